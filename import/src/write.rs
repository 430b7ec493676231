//! The scenario the traces describe, as TOML: the graph's services, endpoints (self
//! time as an `empirical` distribution in a CSV beside it, the call plan), edges
//! (measured one-way network), entry points (rate, or a `[load]` schedule when it
//! varies); what traces cannot tell with a default and `# not in the traces: set
//! this`; and the summary `stampede import` prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::infer::{pair_key, CalleeStats, Endpoint, EndpointStats, Model};
use crate::span::{Names, Skipped};

/// How the traces are written out.
#[derive(Clone, Debug)]
pub struct Options {
    /// The scenario's name.
    pub name: String,
    /// The folder of data files, relative to the scenario's folder.
    pub data_dir: String,
    /// The share of requests the traces kept (head sampling): rates are divided by it.
    pub sample_rate: f64,
    /// Where the spans came from, for the header.
    pub source: String,
    /// The time the traces were collected over, seconds (`--window`); `None`: the
    /// time the spans read cover, first start to last end.
    pub window_s: Option<f64>,
}

/// What `stampede import` writes.
#[derive(Clone, Debug)]
pub struct Written {
    /// The scenario's text.
    pub toml: String,
    /// Data files: (name inside the data folder, content).
    pub files: Vec<(String, String)>,
    /// The summary for stdout.
    pub summary: String,
}

const SET_THIS: &str = "# not in the traces: set this";

/// A name the graph takes: letters, digits, `_` and `-` (others become `_`).
pub fn clean(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let keep = c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if keep {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.is_empty() || out == "client" {
        format!("{out}_op")
    } else {
        out
    }
}

/// Clean, distinct names for every service and endpoint seen.
struct Naming {
    services: BTreeMap<u32, String>,
    endpoints: BTreeMap<Endpoint, String>,
    /// (original, written) where they differ.
    renamed: Vec<(String, String)>,
}

/// Distinct names from cleaned ones: a name already taken gets the first free `_2`,
/// `_3`, … — remembered per base, so 4,000 names that clean alike (all-CJK endpoints
/// become `_op`) cost linear time, not a scan from `_2` each.
#[derive(Default)]
struct Distinct {
    taken: std::collections::HashSet<String>,
    next: std::collections::HashMap<String, u32>,
}

impl Distinct {
    fn claim(&mut self, base: String) -> String {
        if self.taken.insert(base.clone()) {
            return base;
        }
        let n = self.next.entry(base.clone()).or_insert(2);
        loop {
            let candidate = format!("{base}_{n}");
            *n += 1;
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

impl Naming {
    fn new(model: &Model, names: &Names) -> Self {
        let mut naming = Naming { services: BTreeMap::new(), endpoints: BTreeMap::new(), renamed: Vec::new() };
        let mut taken = Distinct::default();
        let mut services: Vec<u32> = model.endpoints.keys().map(|e| e.0).collect();
        services.dedup();
        for service in services {
            let original = names.get(service);
            let name = taken.claim(clean(original));
            if name != original {
                naming.renamed.push((original.to_string(), name.clone()));
            }
            naming.services.insert(service, name);
        }
        let mut per_service: BTreeMap<u32, Distinct> = BTreeMap::new();
        for &(service, endpoint) in model.endpoints.keys() {
            let original = names.get(endpoint);
            let name = per_service.entry(service).or_default().claim(clean(original));
            if name != original {
                naming.renamed.push((format!("{}: {original}", names.get(service)), name.clone()));
            }
            naming.endpoints.insert((service, endpoint), format!("{}.{name}", naming.services[&service]));
        }
        naming
    }
}

/// A TOML comment keeping a name's original spelling where cleaning changed it.
fn original_comment(original: &str, written: &str) -> String {
    if original == written {
        String::new()
    } else {
        let shown: String = original.chars().take(200).collect::<String>().replace(['\n', '\r'], " ");
        format!("   # in the traces: {shown:?}")
    }
}

/// Seconds as the scenario writes them.
fn secs(value: f64) -> String {
    let text = format!("{value:.6}");
    let text = text.trim_end_matches('0');
    if text.ends_with('.') {
        format!("{text}0")
    } else {
        text.to_string()
    }
}

/// A positive figure (a rate) to six significant digits, never rounded to zero: an
/// endpoint seen twice in six hours is 4.62963e-5/s, not `0.0000`.
pub fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value:?}");
    }
    let text = stampede_scenario::base::numbers::scientific(value, 6);
    let rounded: f64 = text.parse().expect("a formatted float parses");
    if (1e-4..1e9).contains(&rounded.abs()) {
        format!("{rounded:?}")
    } else {
        text
    }
}

/// The most buckets a load schedule fills in (empty ones included).
const MAX_LOAD_POINTS: i64 = 100_000;

/// Entries the summary lists one by one (the scenario has them all).
const MAX_SUMMARY_ENTRIES: usize = 20;

/// Whether per-bucket arrival counts vary more than a steady Poisson stream's would:
/// the index of dispersion Σ(n − n̄)²/n̄ is χ² with k − 1 degrees of freedom for a
/// steady stream; beyond its 99.9% quantile (Wilson–Hilferty) the rate varies. A
/// steady 100/s over 17 buckets stays one rate; a daily cycle becomes a schedule.
fn varies_beyond_noise(counts: &[(i64, u64)]) -> bool {
    let k = counts.len() as f64;
    let mean = counts.iter().map(|c| c.1 as f64).sum::<f64>() / k;
    if mean <= 0.0 {
        return false;
    }
    let dispersion = counts.iter().map(|c| (c.1 as f64 - mean).powi(2)).sum::<f64>() / mean;
    let nu = k - 1.0;
    let z = 3.090_232; // the standard normal's 99.9% quantile
    let quantile = nu * (1.0 - 2.0 / (9.0 * nu) + z * (2.0 / (9.0 * nu)).sqrt()).powi(3);
    dispersion > quantile
}

/// A step list's entry for `callee`, called with probability `p`.
fn call(name: &str, p: f64) -> String {
    if p >= 0.9995 {
        format!("{{ call = \"{name}\" }}")
    } else {
        format!("{{ call = \"{name}\", probability = {} }}", significant(p))
    }
}

/// Callees whose calls run in parallel, in the order an invocation calls them.
type Group<'a> = Vec<(&'a Endpoint, &'a CalleeStats)>;

/// The steps of one endpoint, and what was approximated. With `patterns` (its self
/// time differs by call pattern), one `one_of` of them, each with its own work.
fn steps(
    stats: &EndpointStats,
    naming: &Naming,
    notes: &mut Vec<String>,
    me: &str,
    patterns: Option<&[&crate::infer::Pattern]>,
    work_files: &mut WorkFiles,
) -> Vec<String> {
    let invocations = stats.invocations.max(1) as f64;
    // Invocations calling more than MAX_PAIRED_CALLEES endpoints kept no pairs: there
    // callees whose mean stage rounds the same are parallel.
    let by_stage = stats.unpaired > 0;
    if by_stage {
        notes.push(format!(
            "{me} called more than {} endpoints in {} invocation(s): which calls run in parallel is judged from \
             each callee's mean stage, not pair by pair",
            crate::infer::MAX_PAIRED_CALLEES,
            stats.unpaired
        ));
    }
    let groups = parallel_groups(stats, by_stage);
    let mut out = Vec::new();
    if let Some(patterns) = patterns {
        for group in &groups {
            // The plan's notes (a fan-out's rounding), its lines unused.
            plan_group(group, invocations, naming, notes, me, &mut Vec::new());
        }
        out.push(pattern_branch(patterns, &groups, naming, me, work_files));
        steps_not_waited_for(stats, invocations, naming, &mut out);
        return out;
    }
    for run in alternative_runs(stats, groups, by_stage) {
        if run.len() < 2 {
            let group = run.into_iter().next().expect("a run holds a group");
            plan_group(&group, invocations, naming, notes, me, &mut out);
            continue;
        }
        let names: Vec<&str> = run.iter().map(|g| naming.endpoints[g[0].0].as_str()).collect();
        let alternatives: Vec<String> = run
            .iter()
            .zip(&names)
            .map(|(g, name)| {
                let p = g[0].1.invocations_calling as f64 / invocations;
                format!("{{ call = \"{name}\", probability = {} }}", significant(p))
            })
            .collect();
        out.push(format!("{{ one_of = [{}] }}", alternatives.join(", ")));
        notes.push(format!("{me}: {} never called together: written as one_of", names.join(", ")));
    }
    steps_not_waited_for(stats, invocations, naming, &mut out);
    for ((a, b), pair) in stats.pairs.iter().filter(|(_, pair)| pair.order_varies()) {
        let (a, b) = (&naming.endpoints[a], &naming.endpoints[b]);
        let share = pair.first_before as f64 / (pair.both - pair.together) as f64 * 100.0;
        notes.push(format!("{me} calls {a} before {b} in {share:.0}% of invocations, after it in the rest: written in their mean order"));
    }
    out
}

/// The callees waited for in their mean order, grouped where they run in parallel:
/// callees that share a stage in most invocations that call both (or, `by_stage`,
/// whose mean stages round the same).
fn parallel_groups(stats: &EndpointStats, by_stage: bool) -> Vec<Group<'_>> {
    let mut callees: Vec<(&Endpoint, &CalleeStats)> = stats.callees.iter().collect();
    let place = |c: &CalleeStats| c.first_stage_sum as f64 / c.invocations_calling.max(1) as f64;
    callees.sort_by(|a, b| place(a.1).total_cmp(&place(b.1)).then(a.0.cmp(b.0)));
    let together =
        |a: (&Endpoint, &CalleeStats), b: (&Endpoint, &CalleeStats)| match stats.pairs.get(&pair_key(*a.0, *b.0)) {
            Some(pair) => pair.parallel(),
            None => by_stage && place(a.1).round() == place(b.1).round(),
        };
    let mut groups: Vec<Group> = Vec::new();
    for callee in callees {
        match groups.last_mut() {
            // A group whose members all pair as parallel: checked against every member
            // while pairs are counted (at most MAX_PAIRED_CALLEES of them), against the
            // first alone when stages decide (the same rounded stage is transitive).
            Some(group) if by_stage && together(group[0], callee) => group.push(callee),
            Some(group) if !by_stage && group.iter().all(|&member| together(member, callee)) => group.push(callee),
            _ => groups.push(vec![callee]),
        }
    }
    groups
}

/// The groups in runs of alternatives: consecutive steps of one optional call each
/// whose callees never occur in one invocation (a cache hit's call and a miss's) are
/// one `one_of`, not independent chances (which would make both calls in some
/// requests). A run of one is a step of its own.
fn alternative_runs<'a>(stats: &EndpointStats, groups: Vec<Group<'a>>, by_stage: bool) -> Vec<Vec<Group<'a>>> {
    let invocations = stats.invocations.max(1) as f64;
    let single = |group: &[(&Endpoint, &CalleeStats)]| {
        let [(_, c)] = group else { return None };
        let p = c.invocations_calling as f64 / invocations;
        (p < 0.9995 && c.calls == c.invocations_calling).then_some(p)
    };
    // Never together, and independent chances would have met at least 3 times (seeing
    // none then happens by chance less than 5% of the time).
    let exclusive = |(a, ca): (&Endpoint, &CalleeStats), (b, cb): (&Endpoint, &CalleeStats)| {
        let key = pair_key(*a, *b);
        let expected_together = ca.invocations_calling as f64 * cb.invocations_calling as f64 / invocations;
        !stats.pairs.contains_key(&key) && expected_together >= 3.0
    };
    let mut runs: Vec<Vec<Group>> = Vec::new();
    for group in groups {
        let joins = !by_stage
            && single(&group).is_some()
            && runs.last().is_some_and(|run| {
                let sum: f64 = run.iter().filter_map(|g| single(g)).sum::<f64>() + single(&group).unwrap_or(1.0);
                run.iter().all(|g| single(g).is_some() && exclusive(g[0], group[0])) && sum <= 1.0 + 1e-9
            });
        match runs.last_mut() {
            Some(run) if joins => run.push(group),
            _ => runs.push(vec![group]),
        }
    }
    runs
}

/// An endpoint's call patterns whose self times differ: its patterns with at least
/// [`PATTERN_MIN_INVOCATIONS`] invocations, most common first, when the two most common
/// have mean self times 1.5× apart; and the note that says so. They are written apart
/// (a `one_of` of the patterns, each with its own work) when they cover at least
/// [`PATTERN_MIN_COVERAGE`] of the invocations; otherwise one distribution of their mix
/// is written and the note says what it hides.
fn patterns_apart<'a>(
    stats: &'a EndpointStats,
    naming: &Naming,
    me: &str,
) -> Option<(Option<Vec<&'a crate::infer::Pattern>>, String)> {
    let mut patterns: Vec<&crate::infer::Pattern> =
        stats.patterns.values().filter(|p| p.invocations >= PATTERN_MIN_INVOCATIONS).collect();
    patterns.sort_by_key(|p| std::cmp::Reverse(p.invocations));
    let [a, b, ..] = patterns[..] else { return None };
    let (mean_a, mean_b) = (a.self_sum_s / a.invocations as f64, b.self_sum_s / b.invocations as f64);
    if mean_a.max(mean_b) < 1.5 * mean_a.min(mean_b) {
        return None;
    }
    let describe = |p: &crate::infer::Pattern, mean: f64| {
        let callees: Vec<&str> = p.callees.iter().filter_map(|c| naming.endpoints.get(c)).map(String::as_str).collect();
        let calling = if callees.is_empty() { "nothing".to_string() } else { callees.join(", ") };
        format!("{} s when it calls {calling} ({} invocations)", secs(mean), p.invocations)
    };
    let covered = patterns.iter().map(|p| p.invocations).sum::<u64>() as f64 / stats.invocations.max(1) as f64;
    let differs = format!("{me}'s self time differs by call pattern: {}, {}", describe(a, mean_a), describe(b, mean_b));
    if covered >= PATTERN_MIN_COVERAGE {
        let note = format!(
            "{differs}; written as a one_of of its {} patterns, each with its own work ({:.0}% of invocations)",
            patterns.len(),
            covered * 100.0
        );
        Some((Some(patterns), note))
    } else {
        let note = format!(
            "{differs}; written as one distribution of their mix (patterns seen {PATTERN_MIN_INVOCATIONS}+ times \
             cover only {:.0}% of invocations)",
            covered * 100.0
        );
        Some((None, note))
    }
}

/// The share of invocations an endpoint's frequent patterns must cover to be written
/// apart (the rest are folded into them in proportion).
const PATTERN_MIN_COVERAGE: f64 = 0.9;

/// Where a pattern's self-time sample goes: the files written beside the scenario.
struct WorkFiles<'a> {
    options: &'a Options,
    files: &'a mut Vec<(String, String)>,
}

/// `{ one_of = [...] }` over an endpoint's call patterns: each alternative does its
/// pattern's work, then calls its callees in the endpoint's plan (`groups`: stage
/// order, parallel members together), each surely. Probabilities are the patterns'
/// shares of the invocations they cover, rounded down so they never sum past 1.
fn pattern_branch(
    patterns: &[&crate::infer::Pattern],
    groups: &[Vec<(&Endpoint, &CalleeStats)>],
    naming: &Naming,
    me: &str,
    work_files: &mut WorkFiles,
) -> String {
    let total = patterns.iter().map(|p| p.invocations).sum::<u64>().max(1) as f64;
    let mut alternatives = Vec::new();
    for (k, pattern) in patterns.iter().enumerate() {
        let (mut inner, mut comment) = (Vec::new(), String::new());
        let file = format!("{me}.pattern{}.self_s.csv", k + 1);
        if let Some(work) = distribution(&pattern.self_s, &file, "self_s", work_files.options, work_files.files) {
            let median = secs(pattern.self_s.quantile(0.5));
            inner.push(format!("{{ work = {work} }}"));
            comment = format!("   # self time: median {median} s, {} invocations", pattern.invocations);
        }
        for group in groups {
            // The pattern's members of the group, each made once an invocation (its
            // fan-out's copies kept): plan_group then writes them with probability 1.
            let members: Vec<(&Endpoint, CalleeStats)> = group
                .iter()
                .filter(|(callee, _)| pattern.callees.contains(callee))
                .map(|&(callee, c)| {
                    let copies = (c.calls as f64 / c.invocations_calling.max(1) as f64).round().max(1.0) as u64;
                    let fanned = c.calls_fanned * 2 >= c.calls;
                    let sure = CalleeStats {
                        invocations_calling: 1,
                        calls: copies,
                        calls_fanned: if fanned { copies } else { 0 },
                        ..*c
                    };
                    (callee, sure)
                })
                .collect();
            if members.is_empty() {
                continue;
            }
            let refs: Vec<(&Endpoint, &CalleeStats)> = members.iter().map(|(e, c)| (*e, c)).collect();
            plan_group(&refs, 1.0, naming, &mut Vec::new(), me, &mut inner);
        }
        if inner.is_empty() {
            continue; // No work, no calls: its share is the one_of's "none".
        }
        let p = (pattern.invocations as f64 / total * 1e6).floor() / 1e6;
        // Each line ends with its comma (a comment, after it, ends the line).
        let lines: Vec<String> = inner
            .iter()
            .enumerate()
            .map(|(i, line)| format!("{line},{}", if i == 0 { &comment[..] } else { "" }))
            .collect();
        let lines = lines.join("\n      ");
        alternatives.push(format!("{{ probability = {p}, steps = [\n      {lines}\n    ] }}"));
    }
    format!("{{ one_of = [\n    {},\n  ] }}", alternatives.join(",\n    "))
}

/// The invocations a call pattern needs before its mean self time is compared.
const PATTERN_MIN_INVOCATIONS: u64 = 20;

/// One step group's lines: its parallel members (and a fan-out's copies) in one step,
/// sequential copies after it.
fn plan_group(
    group: &[(&Endpoint, &CalleeStats)],
    invocations: f64,
    naming: &Naming,
    notes: &mut Vec<String>,
    me: &str,
    out: &mut Vec<String>,
) {
    let mut members = Vec::new();
    for (endpoint, c) in group {
        let name = &naming.endpoints[endpoint];
        let p = (c.invocations_calling as f64 / invocations).min(1.0);
        let per = c.calls as f64 / c.invocations_calling.max(1) as f64;
        let copies = per.round().max(1.0) as usize;
        if (per - copies as f64).abs() > 0.05 {
            notes.push(format!("{me} calls {name} {per:.2} times per invocation that calls it: written as {copies}"));
        }
        let fanned = c.calls_fanned * 2 >= c.calls && copies > 1;
        for copy in 0..copies {
            members.push((call(name, p), fanned || copy == 0));
        }
    }
    // Parallel members (and a fan-out's copies) go in one step; sequential copies follow.
    let parallel: Vec<&String> = members.iter().filter(|m| m.1).map(|m| &m.0).collect();
    if parallel.len() == 1 {
        out.push(parallel[0].clone());
    } else {
        let list: Vec<String> = parallel.iter().map(|m| m.to_string()).collect();
        out.push(format!("{{ parallel = [{}], wait = \"all\" }}", list.join(", ")));
    }
    out.extend(members.iter().filter(|m| !m.1).map(|m| m.0.clone()));
}

/// Calls not waited for: each a step of its own after the rest, made as the
/// invocation answers (`wait = "none"`: they load their callee, not the answer).
fn steps_not_waited_for(stats: &EndpointStats, invocations: f64, naming: &Naming, out: &mut Vec<String>) {
    for (endpoint, c) in &stats.detached {
        let name = &naming.endpoints[endpoint];
        let p = (c.invocations_calling as f64 / invocations).min(1.0);
        let copies = (c.calls as f64 / c.invocations_calling.max(1) as f64).round().max(1.0) as usize;
        let step = call(name, p);
        let step = format!("{}, wait = \"none\" }}", step.trim_end_matches(" }"));
        out.extend(std::iter::repeat_n(step, copies));
    }
}

/// Whether the endpoints' calls form a cycle (depth-first, colouring endpoints; an
/// explicit stack, so a 50,000-deep call chain costs memory, not the thread's stack).
fn has_cycle(model: &Model) -> bool {
    // `true`: on the current path (grey); `false`: finished (black).
    let mut state: BTreeMap<Endpoint, bool> = BTreeMap::new();
    let callees = |at: &Endpoint| -> Vec<Endpoint> {
        model
            .endpoints
            .get(at)
            .map(|e| e.callees.keys().chain(e.detached.keys()).copied().collect())
            .unwrap_or_default()
    };
    for &root in model.endpoints.keys() {
        if state.contains_key(&root) {
            continue;
        }
        state.insert(root, true);
        let mut stack: Vec<(Endpoint, Vec<Endpoint>, usize)> = vec![(root, callees(&root), 0)];
        while let Some((at, next_callees, next)) = stack.last_mut() {
            let Some(&callee) = next_callees.get(*next) else {
                state.insert(*at, false);
                stack.pop();
                continue;
            };
            *next += 1;
            match state.get(&callee) {
                Some(true) => return true,
                Some(false) => {}
                None => {
                    state.insert(callee, true);
                    stack.push((callee, callees(&callee), 0));
                }
            }
        }
    }
    false
}

/// A measured sample as a distribution value: `empirical` over a CSV `file` (one
/// `column` value a line, added to `files`), a constant for one value, nothing when
/// every value is zero.
fn distribution(
    sample: &crate::infer::Reservoir,
    file: &str,
    column: &str,
    options: &Options,
    files: &mut Vec<(String, String)>,
) -> Option<String> {
    match sample.values.as_slice() {
        values if values.iter().all(|v| *v <= 0.0) => None,
        [one] => Some(format!("{{ dist = \"constant\", value_s = {} }}", secs(*one))),
        values => {
            let mut csv = format!("{column}\n");
            for value in values {
                let _ = writeln!(csv, "{value}");
            }
            files.push((file.to_string(), csv));
            Some(format!("{{ dist = \"empirical\", file = \"{}/{file}\" }}", options.data_dir))
        }
    }
}

/// The time the file's arrivals are spread over, as rates need it: each entry's rate is
/// its arrivals over [`Window::seconds`].
struct Window {
    /// The divisor of an entry's arrivals: `--window`; else, for N arrivals spread over
    /// S seconds, S·N/(N−1) (the whole stream's rate is then (N−1)/S, the estimate
    /// that does not count one arrival too many); `None` for one arrival (its trace's
    /// length is no window: a 40 ms trace is not 25 requests a second).
    seconds: Option<f64>,
    /// First arrival to last, seconds.
    arrivals_s: f64,
    /// `--window` gave it.
    given: bool,
}

impl Window {
    fn of(model: &Model, given: Option<f64>) -> Window {
        let arrivals: u64 = model.entries.values().map(|e| e.arrivals).sum();
        let first = model.entries.values().map(|e| e.first).min().unwrap_or(0);
        let last = model.entries.values().map(|e| e.last).max().unwrap_or(0);
        let arrivals_s = (last - first) as f64 / 1e9;
        let seconds = match given {
            Some(w) => Some(w),
            None if arrivals >= 2 && arrivals_s > 0.0 => Some(arrivals_s * arrivals as f64 / (arrivals - 1) as f64),
            None => None,
        };
        Window { seconds, arrivals_s, given: given.is_some() }
    }

    fn describe(&self) -> String {
        match (self.given, self.seconds) {
            (true, Some(w)) => format!("a {} s window (given by --window)", significant(w)),
            (false, Some(_)) => format!("arrivals over {} s", significant(self.arrivals_s)),
            (_, None) => "no time between arrivals: no rate to measure (pass --window)".to_string(),
        }
    }
}

/// Entries and services the fidelity claims cover at most (the busiest).
const MAX_FIDELITY_CLAIMS: usize = 20;

/// The widening of a fidelity claim's bounds beyond the traces' own interval: the
/// model is a model (a self time resampled, a network time drawn apart).
const FIDELITY_SLACK: f64 = 0.05;

/// The `q` quantile of `sample` with its 95% distribution-free interval (order
/// statistics at ranks nq ± 1.96 √(nq(1−q))), or `None` under 10 values.
pub fn quantile_interval(sample: &crate::infer::Reservoir, q: f64) -> Option<(f64, f64, f64)> {
    let n = sample.values.len();
    if n < 10 {
        return None;
    }
    let mut sorted = sample.values.clone();
    sorted.sort_by(f64::total_cmp);
    let at = |rank: f64| sorted[(rank.round().max(0.0) as usize).min(n - 1)];
    let (centre, spread) = (n as f64 * q, 1.96 * (n as f64 * q * (1.0 - q)).sqrt());
    Some((at(centre - 1.0), at(centre - 1.0 - spread), at(centre + spread)))
}

/// `[[verify]]` claims of how far the model may be from the traces it came from: each
/// busy entry's p50 and p99 (all requests, failures counted) within the traces' 95%
/// interval widened by [`FIDELITY_SLACK`], and each busy service's calls per second of
/// the measured run (`measured_s`) within 5% plus the count's Poisson noise.
fn fidelity_claims(
    t: &mut String,
    model: &Model,
    naming: &Naming,
    measured_s: f64,
    window_s: f64,
    notes: &mut Vec<String>,
) {
    let mut entries: Vec<_> = model.entries.iter().filter(|(e, _)| naming.endpoints.contains_key(e)).collect();
    entries.sort_by_key(|(e, s)| (std::cmp::Reverse(s.arrivals), **e));
    let mut invocations: BTreeMap<u32, u64> = BTreeMap::new();
    for ((service, _), stats) in &model.endpoints {
        *invocations.entry(*service).or_default() += stats.invocations;
    }
    let mut services: Vec<(u32, u64)> = invocations.into_iter().collect();
    services.sort_by_key(|&(s, n)| (std::cmp::Reverse(n), s));
    if entries.len() > MAX_FIDELITY_CLAIMS || services.len() > MAX_FIDELITY_CLAIMS {
        notes.push(format!(
            "fidelity claims ([[verify]]) for the {MAX_FIDELITY_CLAIMS} busiest entries and services only"
        ));
    }
    t.push_str(
        "# How far the model is from the traces it came from: `stampede verify` this file (or\n\
         # `stampede import --check`). Bounds: the traces' own 95% interval, widened by 5%.\n",
    );
    for (endpoint, entry) in entries.iter().take(MAX_FIDELITY_CLAIMS) {
        let name = &naming.endpoints[endpoint];
        for (q, percent) in [(0.5, 50), (0.99, 99)] {
            let Some((value, lo, hi)) = quantile_interval(&entry.latency_s, q) else { continue };
            if q == 0.99 && entry.latency_s.values.len() < 100 {
                continue; // a p99 of fewer than 100 requests is its maximum, not a quantile
            }
            let _ = writeln!(
                t,
                "[[verify]]\nlatency = \"{name}.latency_all_s\"\nquantile = {percent}\nat_least = {}\nat_most = {}\n\
                 note = \"the traces: p{percent} {} s [{}, {}] of {} requests\"\n",
                secs(lo * (1.0 - FIDELITY_SLACK)),
                secs(hi * (1.0 + FIDELITY_SLACK)),
                secs(value),
                secs(lo),
                secs(hi),
                entry.latency_s.seen
            );
        }
    }
    for &(service, count) in services.iter().take(MAX_FIDELITY_CLAIMS) {
        let Some(name) = naming.services.get(&service) else { continue };
        if count < 10 || measured_s <= 0.0 {
            continue;
        }
        let per_s = count as f64 / window_s;
        let within = FIDELITY_SLACK + 1.96 / (count as f64).sqrt();
        let _ = writeln!(
            t,
            "[[verify]]\nmetric = \"{name}.arrivals / {}\"\nstatistic = \"mean\"\nnear = {}\nwithin = {}\n\
             note = \"the traces: {} calls/s ({count} over the window)\"\n",
            secs(measured_s),
            significant(per_s),
            significant(within),
            significant(per_s)
        );
    }
}

/// The scenario for `model`, its data files and the summary.
pub fn write(model: &Model, names: &Names, options: &Options) -> Written {
    let naming = Naming::new(model, names);
    let mut notes: Vec<String> = Vec::new();
    let mut files = Vec::new();
    // The file's window: every entry's rate is its share of the file's arrivals over
    // it (an entry's own first and last arrival say nothing about a rare one's rate).
    let window = Window::of(model, options.window_s);
    let window_s = window.seconds.unwrap_or(0.0).max(1e-3);
    // The run lasts as long as the arrivals did (or the window given).
    let run_s = if window.given { window_s } else { window.arrivals_s.max(1e-3) };
    let horizon_s = (run_s * 10.0).ceil() / 10.0;
    let mut t = String::new();
    let _ = writeln!(t, "# Imported by `stampede import` from {}.", options.source);
    let _ = writeln!(t, "# {} traces, {} spans; {}.", model.traces, model.spans, window.describe());
    let _ = writeln!(t, "# What traces cannot tell is marked `{SET_THIS}`.");
    let _ = writeln!(t, "name = \"{}\"", options.name);
    let _ = writeln!(t, "description = \"imported from traces ({})\"", options.source.replace('"', "'"));
    let _ = writeln!(t, "model = \"graph\"\n");
    let _ = writeln!(t, "[run]");
    let horizon_s = if run_s < 1.0 { 60.0 } else { horizon_s };
    if run_s < 1.0 {
        let _ = writeln!(t, "horizon_s = 60.0                 {SET_THIS} (the traces span under a second)");
    } else {
        let _ = writeln!(t, "horizon_s = {}                 # the traces' window", secs(horizon_s));
    }
    let _ = writeln!(t, "warmup_s = {}", secs((horizon_s * 0.1).min(60.0)));
    let _ = writeln!(t, "replicas = 30\nseed = 1\n");
    // The default 10 ms series bucket allows runs up to 10,000 s (a million buckets):
    // a longer window (a rare endpoint seen hours apart) gets a wider round bucket.
    if horizon_s / 0.01 > 1e6 {
        let wanted = horizon_s / 100_000.0;
        let decade = 10f64.powf(wanted.log10().floor());
        let bucket = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * decade).find(|b| *b >= wanted).unwrap_or(wanted);
        let _ = writeln!(
            t,
            "[series]\nbucket_s = {}   # the traces' window is long: 100,000 buckets at most\n",
            secs(bucket)
        );
    }

    if has_cycle(model) {
        // A service that calls itself (directly or round a loop): the graph bounds the nesting.
        let depth = model.max_depth.max(2) + 2;
        let _ = writeln!(
            t,
            "[graph]\nmax_depth = {depth}              # calls form a cycle; the traces nested {} deep\n",
            model.max_depth
        );
        notes.push(format!(
            "the calls form a cycle: nesting bounded at {depth} (the traces nested {} deep)",
            model.max_depth
        ));
    }
    write_services(&mut t, model, names, &naming, options, window_s, &mut notes, &mut files);
    let observed = write_edges(&mut t, model, &naming, options, &mut files);
    let (entry_lines, total_rate) = write_workloads(&mut t, model, &naming, &window, options);

    fidelity_claims(&mut t, model, &naming, horizon_s - (horizon_s * 0.1).min(60.0), window_s, &mut notes);

    let summary = summarise(model, &naming, options, &window, (total_rate, &entry_lines), &observed, &notes);
    if !notes.is_empty() {
        t.push_str("# Approximated:\n");
        for note in &notes {
            let _ = writeln!(t, "#   {note}");
        }
    }
    Written { toml: t, files, summary }
}

/// The `[services.*]` tables: each service's instances and workers (Little's law over
/// the window), and each endpoint's work and steps.
#[allow(clippy::too_many_arguments)]
fn write_services(
    t: &mut String,
    model: &Model,
    names: &Names,
    naming: &Naming,
    options: &Options,
    window_s: f64,
    notes: &mut Vec<String>,
    files: &mut Vec<(String, String)>,
) {
    let mut by_service: BTreeMap<u32, Vec<(&Endpoint, &EndpointStats)>> = BTreeMap::new();
    for (endpoint, stats) in &model.endpoints {
        by_service.entry(endpoint.0).or_default().push((endpoint, stats));
    }
    for (service, endpoints) in &by_service {
        let name = &naming.services[service];
        let instances = model.instances.get(service).map_or(0, |i| i.len());
        let _ = writeln!(t, "[services.{name}]{}", original_comment(names.get(*service), name));
        if instances > 0 {
            let _ = writeln!(t, "instances = {instances}              # seen in the traces");
        } else {
            let _ = writeln!(t, "instances = 1              {SET_THIS} (no instance ids in the spans)");
        }
        // Little's law: invocations in flight on average, per instance.
        let in_flight = endpoints.iter().map(|(_, s)| s.busy_s).sum::<f64>() / window_s / instances.max(1) as f64;
        let workers = ((2.0 * in_flight).ceil() as u64 + 4).max(4);
        let _ = writeln!(
            t,
            "workers = {workers}                {SET_THIS} (the traces show {in_flight:.2} in flight per instance on average)"
        );
        let _ = writeln!(t, "# queue = {{ capacity = 1000 }}   {SET_THIS}");
        for &(endpoint, stats) in endpoints {
            write_endpoint(t, (names, naming, name), (endpoint, stats), notes, &mut WorkFiles { options, files });
        }
        t.push('\n');
    }
}

/// An endpoint's `[services.NAME.endpoints.E]` table: its work (self time, or by call
/// pattern in a `one_of`), its steps, and the failures observed.
fn write_endpoint(
    t: &mut String,
    (names, naming, name): (&Names, &Naming, &str),
    (endpoint, stats): (&Endpoint, &EndpointStats),
    notes: &mut Vec<String>,
    work_files: &mut WorkFiles,
) {
    let full = &naming.endpoints[endpoint];
    let (_, short) = full.split_once('.').expect("service.endpoint");
    let comment = original_comment(names.get(endpoint.1), short);
    let _ = writeln!(t, "\n[services.{name}.endpoints.{short}]{comment}");
    let (median, p90) = (stats.self_s.quantile(0.5), stats.self_s.quantile(0.9));
    let file = format!("{full}.self_s.csv");
    let apart = patterns_apart(stats, naming, full);
    let by_pattern = apart.as_ref().and_then(|(patterns, _)| patterns.as_deref());
    notes.extend(apart.as_ref().map(|(_, note)| note.clone()));
    if by_pattern.is_some() {
        let _ = writeln!(
            t,
            "# work: by call pattern, in the one_of below (self time overall: median {} s, p90 {} s, {} \
             invocations)",
            secs(median),
            secs(p90),
            stats.invocations
        );
    } else if let Some(work) = distribution(&stats.self_s, &file, "self_s", work_files.options, work_files.files) {
        let _ = writeln!(
            t,
            "work = {work}   # self time: median {} s, p90 {} s, {} invocations",
            secs(median),
            secs(p90),
            stats.invocations
        );
    }
    let steps = steps(stats, naming, notes, full, by_pattern, work_files);
    if !steps.is_empty() {
        let _ = writeln!(t, "steps = [\n  {},\n]", steps.join(",\n  "));
    }
    if stats.failed > 0 {
        let share = stats.failed as f64 / stats.invocations as f64 * 100.0;
        let _ = writeln!(t, "# observed: {share:.2}% of invocations failed");
    }
}

/// The `[edges.*]` tables (network times, the retries and failures seen); returns the
/// summary's lines for edges that retried or failed.
fn write_edges(
    t: &mut String,
    model: &Model,
    naming: &Naming,
    options: &Options,
    files: &mut Vec<(String, String)>,
) -> Vec<String> {
    let mut observed = Vec::new();
    for ((from, to), edge) in &model.edges {
        let (Some(from), Some(to)) = (naming.services.get(from), naming.services.get(to)) else { continue };
        let _ = writeln!(t, "[edges.\"{from}->{to}\"]");
        let file = format!("{from}-{to}.network_s.csv");
        if let Some(network) = distribution(&edge.network_s, &file, "network_s", options, files) {
            let median = secs(edge.network_s.quantile(0.5));
            let _ = writeln!(t, "network = {network}   # one way: median {median} s, {} measured", edge.network_s.seen);
        }
        let _ = writeln!(t, "# timeout_s = 1.0   {SET_THIS}");
        let _ = writeln!(t, "# retry = {{ max_attempts = 2 }}   {SET_THIS} (the policy; the rates seen are below)");
        let retried = (edge.attempts.saturating_sub(edge.calls)) as f64 / edge.calls.max(1) as f64;
        let failed = edge.failed_attempts as f64 / edge.attempts.max(1) as f64;
        let _ = writeln!(
            t,
            "# observed: {} calls, {:.2} attempts per call ({:.2}% retried), {:.2}% of attempts failed\n",
            edge.calls,
            edge.attempts as f64 / edge.calls.max(1) as f64,
            retried * 100.0,
            failed * 100.0
        );
        if retried > 0.0 || failed > 0.0 {
            observed.push(format!(
                "{from}->{to}: {:.2}% of calls retried, {:.2}% of attempts failed",
                retried * 100.0,
                failed * 100.0
            ));
        }
    }

    observed
}

/// The `[[workload]]`s: each entry's rate over the file's window, or its load
/// schedule where the arrivals vary beyond noise; returns the summary's lines and the
/// model's total rate.
fn write_workloads(
    t: &mut String,
    model: &Model,
    naming: &Naming,
    window: &Window,
    options: &Options,
) -> (Vec<String>, f64) {
    let window_s = window.seconds.unwrap_or(0.0).max(1e-3);
    let (first, last) = model.extent.unwrap_or((0, 0));
    let mut entry_lines = Vec::new();
    let bucket_s = model.bucket_ns as f64 / 1e9;
    // The window's buckets, from the first span's to the last's: a quiet stretch before
    // an entry's first arrival is part of its rate too.
    let (lo, hi) = (first.div_euclid(model.bucket_ns), last.div_euclid(model.bucket_ns));
    let mut total_rate = 0.0;
    for (endpoint, entry) in &model.entries {
        let Some(name) = naming.endpoints.get(endpoint) else { continue };
        let _ = writeln!(t, "[[workload]]\nentry = \"{name}\"");
        if window.seconds.is_none() {
            let _ = writeln!(t, "rate_per_s = 1.0   {SET_THIS} (the arrivals are at one time; pass --window)");
            let _ = writeln!(t, "# deadline_s = 2.0   {SET_THIS}\n");
            entry_lines.push(format!("{name}: no rate to measure: 1/s written, set it (or pass --window)"));
            total_rate += 1.0;
            continue;
        }
        let rate = entry.arrivals as f64 / window_s / options.sample_rate;
        debug_assert!(rate.is_finite() && rate > 0.0);
        total_rate += rate;
        // Every bucket of the window, the empty ones too, up to a bound on the
        // schedule's length. An entry with far fewer arrivals than buckets has no
        // schedule to find (and 3,000 such entries would cost a bucket each).
        let dense = hi - lo < MAX_LOAD_POINTS && (hi - lo) as u64 <= 20 * entry.arrivals;
        let counts: Vec<(i64, u64)> = if dense {
            (lo..=hi).map(|b| (b, entry.buckets.get(&b).copied().unwrap_or(0))).collect()
        } else {
            Vec::new()
        };
        // The first and last buckets are partial (the traces start and stop inside
        // them): they are neither tested nor written as rates of their own.
        let full = if counts.len() > 2 { &counts[1..counts.len() - 1] } else { &counts[..0] };
        if full.len() >= 3 && varies_beyond_noise(full) {
            let base = counts[0].0;
            let rate_of = |i: usize| {
                let (_, n) = counts[i.clamp(1, counts.len() - 2)];
                significant(n as f64 / bucket_s / options.sample_rate)
            };
            let points: Vec<String> = (0..counts.len())
                .map(|i| format!("[{}, {}]", secs((counts[i].0 - base) as f64 * bucket_s), rate_of(i)))
                .collect();
            let _ = writeln!(
                t,
                "load = {{ rate = [{}] }}   # arrivals per {} s bucket (the partial first and last take their \
                 neighbour's)",
                points.join(", "),
                secs(bucket_s)
            );
            entry_lines.push(format!("{name}: a varying rate over {} buckets (mean {rate:.4}/s)", counts.len()));
        } else {
            let seen = match entry.arrivals {
                1 => format!("one arrival in the file's window: a rough rate ({})", window.describe()),
                n => format!("{n} arrivals, {}", window.describe()),
            };
            let _ = writeln!(t, "rate_per_s = {}   # {seen}", significant(rate));
            entry_lines.push(format!("{name}: {}/s ({} arrivals)", significant(rate), entry.arrivals));
        }
        let _ = writeln!(t, "# deadline_s = 2.0   {SET_THIS}\n");
    }

    (entry_lines, total_rate)
}

/// One of [`Skipped`]'s counts.
type SkippedCount = fn(&Skipped) -> u64;

/// What the summary says of each count of spans skipped or approximated.
const SKIPPED: [(SkippedCount, &str); 14] = [
    (|s| s.no_id, "spans without a trace or span id (skipped)"),
    (|s| s.unreadable, "records that could not be read (skipped)"),
    (|s| s.orphans, "spans whose parent is not in the trace (placed under the trace's root)"),
    (|s| s.in_cycle, "spans in a loop of parent links, no root above them (skipped)"),
    (|s| s.negative, "spans that end before they start (clipped to zero length)"),
    (|s| s.bad_time, "spans with a negative start time or duration (skipped: Jaeger and Zipkin count Unix time)"),
    (|s| s.skewed, "invocations with calls outside their interval (clock skew: only the overlap counts)"),
    (|s| s.cut, "traces analysed before they were complete (too many open at once)"),
    (|s| s.no_entry, "traces without a server-side span (skipped)"),
    (|s| s.renumbered, "spans whose id another endpoint's span had (numbered apart)"),
    (
        |s| s.duplicates,
        "spans recorded twice under one id (merged: Alibaba's caller and callee rows, a re-sent export)",
    ),
    (|s| s.untimed, "span fragments without a timestamp that no timed piece of their span matched (skipped)"),
    (|s| s.unknown_callee, "calls to a callee the trace does not name, UNKNOWN (skipped)"),
    (
        |s| s.joined,
        "callees known only by their callers' name for them, joined to the endpoint client/server pairs showed",
    ),
];

/// What the import prints: what was read, the model's rates beside the traces', what
/// was skipped or approximated and why.
fn summarise(
    model: &Model,
    naming: &Naming,
    options: &Options,
    window: &Window,
    (total_rate, entry_lines): (f64, &[String]),
    observed: &[String],
    notes: &[String],
) -> String {
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "read {} spans in {} traces: {} services, {} endpoints, {} edges",
        model.spans,
        model.traces,
        naming.services.len(),
        naming.endpoints.len(),
        model.edges.len()
    );
    let _ = writeln!(
        summary,
        "  the model: {} requests/s over {} entries; the traces: {} traces, {}{}{}",
        significant(total_rate),
        entry_lines.len(),
        model.traces,
        window.describe(),
        window.seconds.map_or(String::new(), |w| format!(" = {}/s", significant(model.traces as f64 / w))),
        if options.sample_rate < 1.0 { " (before head sampling is undone)" } else { "" }
    );
    for line in entry_lines.iter().take(MAX_SUMMARY_ENTRIES) {
        let _ = writeln!(summary, "  entry {line}");
    }
    if entry_lines.len() > MAX_SUMMARY_ENTRIES {
        let _ = writeln!(
            summary,
            "  … and {} more entries (the scenario lists them all)",
            entry_lines.len() - MAX_SUMMARY_ENTRIES
        );
    }
    if options.sample_rate < 1.0 {
        let _ = writeln!(summary, "  rates divided by the sample rate {} (head sampling)", options.sample_rate);
    }
    for line in observed {
        let _ = writeln!(summary, "  observed {line}");
    }
    if model.detached_calls > 0 {
        let _ = writeln!(
            summary,
            "  {} calls not waited for (messages, or calls still going {} ms after their caller answered): \
             written as steps with wait = \"none\"",
            model.detached_calls,
            model.skew_ns as f64 / 1e6
        );
    }
    for (count, what) in SKIPPED.iter().map(|(count, what)| (count(&model.skipped), what)).filter(|(n, _)| *n > 0) {
        let _ = writeln!(summary, "  {count} {what}");
    }
    for note in notes {
        let _ = writeln!(summary, "  approximated: {note}");
    }
    for (from, to) in &naming.renamed {
        let _ = writeln!(summary, "  renamed {from:?} to {to}");
    }
    let _ = writeln!(
        summary,
        "not in the traces (defaults written, marked `{SET_THIS}`): workers, queues, timeouts, retry policies, deadlines"
    );
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::{test_span as span, Kind};

    /// The options of a test's scenario, written from its window.
    fn test_options() -> Options {
        Options { name: "t".into(), data_dir: "t.data".into(), sample_rate: 1.0, source: "test".into(), window_s: None }
    }

    /// The cycle check walks a 50,000-deep chain of calls on a 256 KiB stack (it
    /// recursed, and a 50,000-deep trace overflowed the main thread), and still finds a
    /// loop closed at the bottom.
    #[test]
    fn the_cycle_check_needs_no_stack_for_a_deep_chain() {
        let depth = 50_000u32;
        let chain = move |closed: bool| {
            let mut model = Model::default();
            for i in 0..depth {
                let stats = model.endpoints.entry((i, 0)).or_default();
                let next = if i + 1 < depth { Some(i + 1) } else { closed.then_some(0) };
                if let Some(next) = next {
                    stats.callees.insert((next, 0), CalleeStats::default());
                }
            }
            model
        };
        let found = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || (has_cycle(&chain(false)), has_cycle(&chain(true))))
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(found, (false, true));
    }

    /// One invocation calls db then cache, the next cache then db: the summary says the
    /// order varied and which order was written.
    #[test]
    fn a_varying_order_is_written_in_its_mean_order_and_said() {
        let mut names = Names::default();
        let mut model = Model::new(1_000_000_000);
        for (trace, first, second) in [(1, ("db", "q"), ("cache", "g")), (2, ("cache", "g"), ("db", "q"))] {
            let mut spans = vec![
                span(&mut names, 1, None, ("api", "get"), Kind::Server, (0, 100)),
                span(&mut names, 2, Some(1), first, Kind::Server, (10, 20)),
                span(&mut names, 3, Some(1), second, Kind::Server, (30, 40)),
            ];
            spans.iter_mut().for_each(|s| s.trace = trace);
            model.add_trace(&mut spans, &mut names);
        }
        let api = &model.endpoints[&(names.intern("api"), names.intern("get"))];
        let pair = api.pairs.values().next().expect("one pair");
        assert_eq!((pair.both, pair.together, pair.first_before), (2, 0, 1));
        assert!(pair.order_varies() && !pair.parallel());
        let options = test_options();
        let written = write(&model, &names, &options);
        assert!(written.summary.contains("in 50% of invocations, after it in the rest"), "{}", written.summary);
        assert!(written.toml.contains("# Approximated:"), "{}", written.toml);
    }

    /// Every entry's rate is its arrivals over the file's window: 99 arrivals of a busy
    /// entry a second apart and one of a rare entry make 1/s and 0.0101/s (before: the
    /// rare one, seen once, was written at 1/s; three seen in no time at 2,000/s).
    #[test]
    fn a_rare_entrys_rate_is_its_arrivals_over_the_files_window() {
        let mut names = Names::default();
        let mut model = Model::new(1_000_000_000);
        for trace in 0..100i64 {
            let at = if trace == 50 { ("admin", "purge") } else { ("api", "get") };
            let ms = trace * 1_000;
            let mut spans = vec![span(&mut names, 1, None, at, Kind::Server, (ms, ms + 10))];
            spans[0].trace = trace as u128;
            model.add_trace(&mut spans, &mut names);
        }
        let options = test_options();
        let written = write(&model, &names, &options);
        // 100 arrivals over 99 s: the stream's (N − 1)/S = 1/s, shared 99 : 1.
        assert!(written.toml.contains("entry = \"api.get\"\nrate_per_s = 0.99 "), "{}", written.toml);
        assert!(written.toml.contains("entry = \"admin.purge\"\nrate_per_s = 0.01 "), "{}", written.toml);
        assert!(written.summary.contains("the model: 1.0 requests/s over 2 entries"), "{}", written.summary);
        let written = write(&model, &names, &Options { window_s: Some(200.0), ..options });
        assert!(written.toml.contains("entry = \"admin.purge\"\nrate_per_s = 0.005 "), "{}", written.toml);
    }

    /// api.get does 12 ms of its own work when it calls db and 2 ms when it calls
    /// nothing (a cache hit): the summary says so, naming both patterns, and the steps
    /// are a one_of of the two, each with its own work; with the same work either way it
    /// says nothing and writes one work.
    #[test]
    fn self_time_that_differs_by_call_pattern_is_said() {
        let written = |hit_ms: i64| {
            let mut names = Names::default();
            let mut model = Model::new(1_000_000_000);
            for trace in 0..60i64 {
                let t = trace * 1_000;
                let mut spans = if trace % 2 == 0 {
                    vec![
                        span(&mut names, 1, None, ("api", "get"), Kind::Server, (t, t + 22)),
                        span(&mut names, 2, Some(1), ("db", "q"), Kind::Server, (t + 6, t + 16)),
                    ]
                } else {
                    vec![span(&mut names, 1, None, ("api", "get"), Kind::Server, (t, t + hit_ms))]
                };
                spans.iter_mut().for_each(|s| s.trace = trace as u128);
                model.add_trace(&mut spans, &mut names);
            }
            write(&model, &names, &test_options())
        };
        let apart = written(2);
        let summary = apart.summary;
        assert!(summary.contains("written as a one_of of its 2 patterns, each with its own work (100% of invocations)"));
        assert!(apart.toml.contains("{ probability = 0.5, steps = [\n      { work = "), "{}", apart.toml);
        assert!(apart.toml.contains("      { call = \"db.q\" },\n    ] },"), "{}", apart.toml);
        assert!(
            summary.contains("api.get's self time differs by call pattern: 0.012 s when it calls db.q (30 invocations), 0.002 s when it calls nothing (30 invocations)")
                || summary.contains("api.get's self time differs by call pattern: 0.002 s when it calls nothing (30 invocations), 0.012 s when it calls db.q (30 invocations)"),
            "{summary}"
        );
        let alike = written(12);
        assert!(!alike.summary.contains("differs by call pattern"), "{}", alike.summary);
        assert!(!alike.toml.contains("one_of"), "{}", alike.toml);
    }
}
