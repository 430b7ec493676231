//! What the spans of complete traces say about the system, accumulated trace by
//! trace in memory bounded by the endpoints and the samples kept (never the spans):
//!
//! * **invocations**: each server span is an endpoint's invocation (`service.endpoint`);
//!   a trace without server spans (a format without kinds) reads its non-client spans so;
//! * **calls**: an invocation's calls are the client spans under it (and server spans
//!   of other services directly under it, when no client span was recorded), down to
//!   the next invocation. Attempts of one call are grouped: the client spans under one
//!   internal span to one callee (a retry loop's span), or consecutive client spans to
//!   one callee of which the later says it is a resend or starts after the earlier
//!   failed;
//! * **self time**: the invocation's length less the union of its calls' intervals
//!   (clipped to it);
//! * **order**: calls that overlap in time are one parallel stage; stages follow in
//!   start order;
//! * **network**: half of (client attempt − its server span) for each pair, one way.
//!
//! Samples (self times, network times) are kept in reservoirs of [`SAMPLES`] values
//! (Vitter's algorithm R on the kernel's `import.reservoir` stream), so a 10 GB file
//! keeps the same memory as a 10 MB one and the same input keeps the same sample.

use std::collections::BTreeMap;

use stampede_kernel::{RngStream, StreamPurpose};

use crate::span::{FastMap, Kind, Names, Skipped, Span, NO_NAME};

/// Values a reservoir keeps.
pub const SAMPLES: usize = 20_000;

/// A bounded uniform sample of a stream of values (algorithm R), deterministic for
/// the input's order: its draws come from the kernel's named stream
/// `import.reservoir` (seed 0), as every random draw in the project does.
#[derive(Clone, Debug)]
pub struct Reservoir {
    /// The values kept.
    pub values: Vec<f64>,
    /// Values offered.
    pub seen: u64,
    /// The most values kept ([`SAMPLES`] unless made smaller).
    capacity: usize,
    rng: RngStream,
}

impl Default for Reservoir {
    fn default() -> Self {
        Reservoir::keeping(SAMPLES)
    }
}

impl Reservoir {
    /// An empty reservoir that keeps at most `capacity` values.
    pub fn keeping(capacity: usize) -> Self {
        assert!(capacity > 0);
        Reservoir {
            values: Vec::new(),
            seen: 0,
            capacity,
            rng: RngStream::derive(0, 0, StreamPurpose::named("import.reservoir")),
        }
    }

    /// Offers `value`.
    pub fn add(&mut self, value: f64) {
        self.seen += 1;
        if self.values.len() < self.capacity {
            self.values.push(value);
            return;
        }
        let slot = self.rng.below(self.seen) as usize;
        if slot < self.capacity {
            self.values[slot] = value;
        }
    }

    /// The `q` quantile of the values kept (`NaN` when empty).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.values.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = (q * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank]
    }

    /// The mean of the values kept (`NaN` when empty).
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.values.len() as f64
    }
}

/// An endpoint: (service, endpoint name), interned.
pub type Endpoint = (u32, u32);

/// What one endpoint calls, over its invocations.
#[derive(Clone, Debug, Default)]
pub struct CalleeStats {
    /// Invocations that called it at least once.
    pub invocations_calling: u64,
    /// Calls in all.
    pub calls: u64,
    /// Calls that shared their stage with another call to the same callee (a fan-out).
    pub calls_fanned: u64,
    /// Σ the stage index of its first call (its place in the plan).
    pub first_stage_sum: u64,
}

/// The default `--skew`: a call that ends up to 5 ms after its caller is one the
/// caller waited for (clocks of different hosts disagree by about that much).
pub const DEFAULT_SKEW_NS: i64 = 5_000_000;

/// One endpoint's invocations.
#[derive(Clone, Debug, Default)]
pub struct EndpointStats {
    /// Invocations seen.
    pub invocations: u64,
    /// Invocations that failed (their span's status).
    pub failed: u64,
    /// Self times, seconds.
    pub self_s: Reservoir,
    /// Σ invocation lengths, seconds (for Little's law).
    pub busy_s: f64,
    /// What it calls.
    pub callees: BTreeMap<Endpoint, CalleeStats>,
    /// Callees it does not wait for (fire-and-forget calls, messages): invocations
    /// calling each and calls made (stages and fan-outs do not apply).
    pub detached: BTreeMap<Endpoint, CalleeStats>,
    /// Pairs of callees (the lesser endpoint first): how often both were called, how
    /// often in one stage, and how often the first came in an earlier stage. Kept for
    /// invocations calling at most [`MAX_PAIRED_CALLEES`] endpoints.
    pub pairs: BTreeMap<(Endpoint, Endpoint), Pair>,
    /// Invocations that called more endpoints than that: their order and parallelism
    /// come from each callee's mean stage alone.
    pub unpaired: u64,
    /// Self time by call pattern (the set of callees an invocation waited for, by its
    /// hash), for the first [`MAX_PATTERNS`] patterns seen.
    pub patterns: BTreeMap<u64, Pattern>,
}

/// One call pattern of an endpoint: the callees it waited for, how many invocations
/// had it, their self times (sum, and a sample of [`PATTERN_SAMPLES`]).
#[derive(Clone, Debug)]
pub struct Pattern {
    /// The callees, in endpoint order.
    pub callees: Vec<Endpoint>,
    /// Invocations with this pattern.
    pub invocations: u64,
    /// Their self times' sum, seconds.
    pub self_sum_s: f64,
    /// Their self times, seconds: the pattern's own work when the import writes the
    /// endpoint's patterns apart.
    pub self_s: Reservoir,
}

impl Default for Pattern {
    fn default() -> Self {
        Pattern { callees: Vec::new(), invocations: 0, self_sum_s: 0.0, self_s: Reservoir::keeping(PATTERN_SAMPLES) }
    }
}

/// Self times a pattern keeps: fewer than an endpoint's [`SAMPLES`], as an endpoint has
/// up to [`MAX_PATTERNS`] of them (2,000 values place a p99 within about ±0.3
/// percentiles).
pub const PATTERN_SAMPLES: usize = 2_000;

/// Call patterns whose self time is kept apart, per endpoint.
pub const MAX_PATTERNS: usize = 8;

/// The most distinct callees of one invocation whose pairs are counted: pairs grow as
/// the square of callees (10,000 callees would be 50 million pairs).
pub const MAX_PAIRED_CALLEES: usize = 64;

/// Two callees of one endpoint, over the invocations that called both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pair {
    /// Invocations that called both.
    pub both: u64,
    /// … in one stage (in parallel).
    pub together: u64,
    /// … the lesser endpoint in an earlier stage than the other.
    pub first_before: u64,
}

/// The key of the pair of `a` and `b` in [`EndpointStats::pairs`]: the lesser first.
pub fn pair_key(a: Endpoint, b: Endpoint) -> (Endpoint, Endpoint) {
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}

impl Pair {
    /// Whether they were called in parallel in at least half the invocations that
    /// called both.
    pub fn parallel(&self) -> bool {
        self.both > 0 && self.together * 2 >= self.both
    }

    /// Whether their order varied: each came first in over 5% of the invocations that
    /// called them one after the other.
    pub fn order_varies(&self) -> bool {
        let apart = self.both - self.together;
        let share = self.first_before as f64 / apart.max(1) as f64;
        apart > 0 && share > 0.05 && share < 0.95
    }
}

/// Calls between two services.
#[derive(Clone, Debug, Default)]
pub struct EdgeStats {
    /// Calls (a call's attempts grouped).
    pub calls: u64,
    /// Attempts.
    pub attempts: u64,
    /// Attempts that failed.
    pub failed_attempts: u64,
    /// One-way network time, seconds, where a client span and its server span both exist.
    pub network_s: Reservoir,
}

/// An entry point's arrivals.
#[derive(Clone, Debug, Default)]
pub struct EntryStats {
    /// Arrivals.
    pub arrivals: u64,
    /// The first and last arrival, Unix nanoseconds.
    pub first: i64,
    /// The last.
    pub last: i64,
    /// Arrivals per bucket (bucket = floor(time / bucket width)).
    pub buckets: BTreeMap<i64, u64>,
    /// Its requests' latencies (the entry span's length), seconds.
    pub latency_s: Reservoir,
}

/// Everything the traces said.
#[derive(Debug, Default)]
pub struct Model {
    /// By endpoint.
    pub endpoints: BTreeMap<Endpoint, EndpointStats>,
    /// By (caller service, callee service).
    pub edges: BTreeMap<(u32, u32), EdgeStats>,
    /// By entry endpoint.
    pub entries: BTreeMap<Endpoint, EntryStats>,
    /// Instances seen per service.
    pub instances: BTreeMap<u32, std::collections::BTreeSet<u32>>,
    /// Traces read, spans read.
    pub traces: u64,
    /// Spans read.
    pub spans: u64,
    /// What was skipped.
    pub skipped: Skipped,
    /// The width of a load bucket, nanoseconds.
    pub bucket_ns: i64,
    /// The deepest nesting of invocations in a trace (the entry is depth 1).
    pub max_depth: u32,
    /// The first start and the last end of any span read: the time the traces cover.
    pub extent: Option<(i64, i64)>,
    /// A call ending more than this after its caller ended was not waited for.
    pub skew_ns: i64,
    /// Calls not waited for (messages, calls ending or made after their caller ended).
    pub detached_calls: u64,
    /// The caller's name for a callee (what an uninstrumented call to it is read as) →
    /// the callee's own endpoint, learned from client spans with a server span under
    /// them: `payments-svc POST /charge` is `payments.charge` (see [`Model::join_spellings`]).
    pub spellings: BTreeMap<Endpoint, Endpoint>,
    /// Buffers a trace's analysis reuses (no allocation per trace once they have grown).
    scratch: Scratch,
}

/// The working lists of one trace's analysis, kept between traces.
#[derive(Debug, Default)]
struct Scratch {
    ids: Vec<u64>,
    index: FastMap<u64, usize>,
    parent_of: Vec<(usize, usize)>,
    roots: Vec<usize>,
    starts: Vec<usize>,
    flat: Vec<usize>,
    entries: Vec<usize>,
    stack: Vec<usize>,
    depths: Vec<(usize, u32)>,
    below: Vec<(usize, u32)>,
    walk: Vec<usize>,
    calls: Vec<Call>,
    stage_of: Vec<u64>,
    first_stage: Vec<(Endpoint, u64)>,
    keyed: Vec<(Endpoint, u64)>,
}

/// One call an invocation made: its attempts grouped.
#[derive(Clone, Copy, Debug)]
struct Call {
    callee: Endpoint,
    start: i64,
    end: i64,
    attempts: u32,
    failed_attempts: u32,
    /// Its last attempt failed (an attempt after it is a retry).
    last_failed: bool,
    /// Not waited for: a message, or a call that ended after its caller did.
    detached: bool,
}

/// Each span's children, in start order: one flat list and where each span's begins.
struct Children<'a> {
    flat: &'a [usize],
    starts: &'a [usize],
}

impl Scratch {
    /// Each span's parent by id (`parent_of`, as (parent, child) pairs) and the trace's
    /// roots, for `spans` sorted by start. Returns how many orphans were adopted.
    fn link_parents(&mut self, spans: &[Span]) -> u64 {
        let index = &mut self.index;
        index.clear();
        index.extend(spans.iter().enumerate().map(|(i, s)| (s.id, i)));
        let (parent_of, roots) = (&mut self.parent_of, &mut self.roots);
        parent_of.clear();
        roots.clear();
        for (i, span) in spans.iter().enumerate() {
            match span.parent.and_then(|p| index.get(&p)) {
                Some(&parent) if parent != i => parent_of.push((parent, i)),
                _ => roots.push(i),
            }
        }
        // One trace is one request: a span whose parent is missing (a lost span, an
        // uninstrumented hop between two that are) goes under the trace's root — its
        // first true root, else its first span — rather than arriving on its own.
        if roots.len() <= 1 {
            return 0;
        }
        let is_orphan = |i: usize| spans[i].parent.is_some();
        let root = roots.iter().copied().find(|&r| !is_orphan(r)).unwrap_or(roots[0]);
        let before = roots.len();
        roots.retain(|&r| {
            let adopt = r != root && is_orphan(r);
            if adopt {
                parent_of.push((root, r));
            }
            !adopt
        });
        (before - roots.len()) as u64
    }

    /// Children as one flat list (by parent, then start) of `spans` spans: the
    /// [`Children`] of `flat` and `starts`.
    fn list_children(&mut self, spans: usize) {
        self.parent_of.sort_unstable();
        let starts = &mut self.starts;
        starts.clear();
        starts.resize(spans + 1, 0);
        for &(parent, _) in self.parent_of.iter() {
            starts[parent + 1] += 1;
        }
        for i in 0..spans {
            starts[i + 1] += starts[i];
        }
        self.flat.clear();
        self.flat.extend(self.parent_of.iter().map(|&(_, child)| child));
    }
}

/// Adds client span `span` to `calls`: a resend (the span says so) or an attempt after
/// a failed one to the same callee is the same call; anything else is a new call (a
/// fan-out's parallel calls too).
fn add_attempt(calls: &mut Vec<Call>, callee: Endpoint, span: &Span, detached: bool) {
    let resend = span.attempt.is_some_and(|a| a > 1);
    let previous = calls.iter_mut().rev().find(|call| call.callee == callee);
    match previous.filter(|p| p.detached == detached && (resend || (p.last_failed && span.start >= p.end))) {
        Some(call) => {
            call.end = call.end.max(span.end);
            call.attempts += 1;
            call.failed_attempts += span.error as u32;
            call.last_failed = span.error;
        }
        None => calls.push(Call::first(callee, span, detached)),
    }
}

/// Walks down from `roots`, not below a span where `stop` says so; returns how many
/// spans it reached.
fn walk_from(
    roots: &[usize],
    children: &Children,
    stack: &mut Vec<usize>,
    mut stop: impl FnMut(usize) -> bool,
) -> usize {
    stack.clear();
    stack.extend(roots.iter().copied());
    let mut reached = 0usize;
    while let Some(i) = stack.pop() {
        reached += 1;
        if !stop(i) {
            stack.extend(children.of(i).iter().copied());
        }
    }
    reached
}

/// One invocation's working lists (borrowed from the trace's [`Scratch`]).
struct Work<'a> {
    /// The invocations below, with how many hops down (2 through a broker).
    below: &'a mut Vec<(usize, u32)>,
    walk: &'a mut Vec<usize>,
    calls: &'a mut Vec<Call>,
    stage_of: &'a mut Vec<u64>,
    first_stage: &'a mut Vec<(Endpoint, u64)>,
    keyed: &'a mut Vec<(Endpoint, u64)>,
}

impl Children<'_> {
    fn of(&self, span: usize) -> &[usize] {
        &self.flat[self.starts[span]..self.starts[span + 1]]
    }
}

impl Call {
    /// A call to `callee` whose first attempt is `span`.
    fn first(callee: Endpoint, span: &Span, detached: bool) -> Call {
        Call {
            callee,
            start: span.start,
            end: span.end,
            attempts: 1,
            failed_attempts: span.error as u32,
            last_failed: span.error,
            detached,
        }
    }
}

impl Model {
    /// An empty model whose load buckets are `bucket_ns` wide.
    pub fn new(bucket_ns: i64) -> Self {
        Model { bucket_ns: bucket_ns.max(1), skew_ns: DEFAULT_SKEW_NS, ..Model::default() }
    }

    /// Adds one complete trace.
    pub fn add_trace(&mut self, spans: &mut Vec<Span>, names: &mut Names) {
        let mut scratch = std::mem::take(&mut self.scratch);
        self.analyse(spans, names, &mut scratch);
        self.scratch = scratch;
    }

    fn analyse(&mut self, spans: &mut Vec<Span>, names: &mut Names, scratch: &mut Scratch) {
        if spans.is_empty() {
            return;
        }
        self.traces += 1;
        self.spans += spans.len() as u64;
        // Duplicate ids are rare: look for them before paying for the merge.
        scratch.ids.clear();
        scratch.ids.extend(spans.iter().map(|s| s.id));
        scratch.ids.sort_unstable();
        if scratch.ids.windows(2).any(|pair| pair[0] == pair[1]) {
            self.merge_duplicates(spans);
        }
        spans.sort_by_key(|s| (s.start, s.id));
        self.skipped.orphans += scratch.link_parents(spans);
        self.extent = Some(match self.extent {
            None => (spans[0].start, spans.iter().map(|s| s.end).max().unwrap_or(spans[0].start)),
            Some((first, last)) => (first.min(spans[0].start), spans.iter().map(|s| s.end).fold(last, i64::max)),
        });
        scratch.list_children(spans.len());
        let children = Children { flat: &scratch.flat, starts: &scratch.starts };
        // Spans no root leads to sit in a loop of parent links (a → b → a): counted, not
        // read (no root means no arrival, and following the loop would never end).
        let reached = walk_from(&scratch.roots, &children, &mut scratch.stack, |_| false);
        self.skipped.in_cycle += (spans.len() - reached) as u64;
        let has_server = spans.iter().any(|s| s.kind.is_served());
        let is_invocation = |s: &Span| if has_server { s.kind.is_served() } else { !s.kind.is_sent() };
        // Entry invocations: the first invocation on each path from a root.
        let entries = &mut scratch.entries;
        entries.clear();
        walk_from(&scratch.roots, &children, &mut scratch.stack, |i| {
            let entry = is_invocation(&spans[i]);
            if entry {
                entries.push(i);
            }
            entry
        });
        if entries.is_empty() {
            self.skipped.no_entry += 1;
            return;
        }
        for &entry in entries.iter() {
            self.count_arrival(spans[entry]);
        }
        // Every invocation, from the entries down, with its depth.
        let depths = &mut scratch.depths;
        depths.clear();
        depths.extend(entries.iter().map(|&e| (e, 1)));
        let work = &mut Work {
            below: &mut scratch.below,
            walk: &mut scratch.walk,
            calls: &mut scratch.calls,
            stage_of: &mut scratch.stage_of,
            first_stage: &mut scratch.first_stage,
            keyed: &mut scratch.keyed,
        };
        while let Some((i, depth)) = depths.pop() {
            self.max_depth = self.max_depth.max(depth);
            work.below.clear();
            work.calls.clear();
            self.invocation(i, spans, &children, &is_invocation, work, names);
            depths.extend(work.below.drain(..).map(|(b, hops)| (b, depth + hops)));
            self.record(spans[i], work);
        }
    }

    /// An entry invocation arrived: its endpoint's arrivals, first and last arrival,
    /// latency and load bucket.
    fn count_arrival(&mut self, span: Span) {
        let endpoint = (span.service, span.name);
        let stats = self.entries.entry(endpoint).or_default();
        if stats.arrivals == 0 || span.start < stats.first {
            stats.first = span.start;
        }
        stats.last = stats.last.max(span.start);
        stats.arrivals += 1;
        stats.latency_s.add((span.end - span.start) as f64 / 1e9);
        *stats.buckets.entry(span.start.div_euclid(self.bucket_ns)).or_default() += 1;
    }

    /// Joins the two spellings of one callee: an endpoint known only from client spans
    /// (an uninstrumented call, `payments-svc POST /charge`) that other client spans
    /// showed to be a served endpoint (`payments.charge`) is that endpoint — its
    /// invocations, callers, pairs and edges moved onto it. Returns how many endpoints
    /// were joined.
    pub fn join_spellings(&mut self) -> usize {
        let served: std::collections::BTreeSet<Endpoint> = self.spellings.values().copied().collect();
        let joins: BTreeMap<Endpoint, Endpoint> = std::mem::take(&mut self.spellings)
            .into_iter()
            .filter(|(from, to)| self.endpoints.contains_key(from) && !served.contains(from) && from != to)
            .collect();
        if joins.is_empty() {
            return 0;
        }
        let to = |e: Endpoint| joins.get(&e).copied().unwrap_or(e);
        for (from, into) in &joins {
            let Some(moved) = self.endpoints.remove(from) else { continue };
            let target = self.endpoints.entry(*into).or_default();
            target.invocations += moved.invocations;
            target.failed += moved.failed;
            target.busy_s += moved.busy_s;
            moved.self_s.values.iter().for_each(|&v| target.self_s.add(v));
        }
        for stats in self.endpoints.values_mut() {
            for map in [&mut stats.callees, &mut stats.detached] {
                if !map.keys().any(|k| joins.contains_key(k)) {
                    continue;
                }
                for (callee, c) in std::mem::take(map) {
                    let merged = map.entry(to(callee)).or_default();
                    merged.invocations_calling += c.invocations_calling;
                    merged.calls += c.calls;
                    merged.calls_fanned += c.calls_fanned;
                    merged.first_stage_sum += c.first_stage_sum;
                }
            }
            if stats.pairs.keys().any(|(a, b)| joins.contains_key(a) || joins.contains_key(b)) {
                for ((a, b), pair) in std::mem::take(&mut stats.pairs) {
                    let (a, b) = (to(a), to(b));
                    if a == b {
                        continue;
                    }
                    // The key is (lesser, greater): a swap turns "a before b" around.
                    let (key, before) = if a < b {
                        ((a, b), pair.first_before)
                    } else {
                        ((b, a), pair.both - pair.together - pair.first_before)
                    };
                    let merged = stats.pairs.entry(key).or_default();
                    merged.both += pair.both;
                    merged.together += pair.together;
                    merged.first_before += before;
                }
            }
        }
        let services: BTreeMap<u32, u32> = joins.iter().map(|(from, into)| (from.0, into.0)).collect();
        let gone: std::collections::BTreeSet<u32> = self.endpoints.keys().map(|e| e.0).collect();
        for ((caller, callee), edge) in std::mem::take(&mut self.edges) {
            // A service all of whose endpoints were joined is gone: its edges move too.
            let callee = match services.get(&callee) {
                Some(&into) if !gone.contains(&callee) => into,
                _ => callee,
            };
            let merged = self.edges.entry((caller, callee)).or_default();
            merged.calls += edge.calls;
            merged.attempts += edge.attempts;
            merged.failed_attempts += edge.failed_attempts;
            edge.network_s.values.iter().for_each(|&v| merged.network_s.add(v));
        }
        joins.len()
    }

    /// One id twice in a trace: the same endpoint's span recorded twice (Alibaba's
    /// caller and callee rows) is one span, the longer; spans of different endpoints
    /// under one id (ids reused by untracked threads) are numbered apart.
    fn merge_duplicates(&mut self, spans: &mut Vec<Span>) {
        spans.sort_by_key(|s| (s.id, s.service, s.name, s.start));
        let mut kept: Vec<Span> = Vec::with_capacity(spans.len());
        // The id's first endpoint keeps it; the id's other endpoints are numbered apart.
        let (mut group_id, mut group_endpoint, mut renumbered) = (None, (0, 0), 0u64);
        for span in spans.drain(..) {
            let endpoint = (span.service, span.name);
            if group_id == Some(span.id) && group_endpoint == endpoint {
                self.skipped.duplicates += 1;
                let last = kept.last_mut().expect("the group's span");
                let error = last.error || span.error;
                if span.end - span.start > last.end - last.start {
                    *last = Span { id: last.id, ..span };
                }
                last.error = error;
                continue;
            }
            let id = if group_id == Some(span.id) {
                renumbered += 1;
                span.id ^ (renumbered << 56)
            } else {
                span.id
            };
            (group_id, group_endpoint) = (Some(span.id), endpoint);
            kept.push(Span { id, ..span });
        }
        self.skipped.renumbered += renumbered;
        *spans = kept;
    }

    /// The calls invocation `i` made (into `work.calls`); the invocations under them
    /// go on `work.below`.
    fn invocation(
        &mut self,
        i: usize,
        spans: &[Span],
        children: &Children,
        is_invocation: &dyn Fn(&Span) -> bool,
        work: &mut Work,
        names: &mut Names,
    ) {
        let me = spans[i];
        if me.instance != NO_NAME {
            self.instances.entry(me.service).or_default().insert(me.instance);
        }
        let (calls, stack, walk) = (&mut *work.calls, &mut *work.below, &mut *work.walk);
        // Depth-first through this invocation's own spans, in start order.
        walk.clear();
        walk.extend(children.of(i).iter().rev().copied());
        while let Some(c) = walk.pop() {
            let span = spans[c];
            if is_invocation(&span) {
                // A server span straight under this one: a call no client span recorded
                // (on the callee's clock: not waited for only if it began after the end).
                stack.push((c, 1));
                let detached = span.start > me.end.saturating_add(self.skew_ns);
                calls.push(Call::first((span.service, span.name), &span, detached));
                self.edge(me.service, span.service, span.error, None);
                continue;
            }
            if span.kind.is_sent() {
                // On the caller's clock: a call made as the caller answered, or still
                // going (beyond the skew) after it, was not waited for.
                let detached =
                    span.end > me.end.saturating_add(self.skew_ns) || (span.start >= me.end && span.end > me.end);
                if span.kind == Kind::Producer {
                    // A message: sent to the broker (waited for as any call is), which
                    // hands it on to its consumers without waiting.
                    let broker = message_broker(&span, names);
                    let consumers = children.of(c).iter().copied().filter(|&s| is_invocation(&spans[s]));
                    stack.extend(consumers.clone().map(|s| (s, 2)));
                    self.broker_hop(broker, &span, consumers.map(|s| spans[s]), work.keyed);
                    self.edge(me.service, broker.0, span.error, None);
                    calls.push(Call::first(broker, &span, detached));
                    continue;
                }
                let server = children.of(c).iter().copied().find(|&s| is_invocation(&spans[s]));
                let callee = self.callee_of(&span, server.map(|s| spans[s]), names);
                if let Some(s) = server {
                    stack.push((s, 1));
                    // Anything else under the client span (a second server span: a
                    // proxy's) is an invocation of its own.
                    stack.extend(
                        children.of(c).iter().copied().filter(|&o| o != s && is_invocation(&spans[o])).map(|o| (o, 1)),
                    );
                }
                let network = server.map(|s| {
                    let (client, serve) = (span.end - span.start, spans[s].end - spans[s].start);
                    ((client - serve).max(0) as f64 / 2.0) / 1e9
                });
                self.edge(me.service, callee.0, span.error, network);
                add_attempt(calls, callee, &span, detached);
                continue;
            }
            // Internal (a retry loop's span, a handler's step): look inside.
            walk.extend(children.of(c).iter().rev().copied());
        }
    }

    /// The endpoint client span `span` called: its `server` span's, else the one its
    /// attributes name (an uninstrumented callee, whose invocation is then the call as
    /// the caller saw it). Notes how the caller spells a callee a server span names.
    fn callee_of(&mut self, span: &Span, server: Option<Span>, names: &mut Names) -> Endpoint {
        let spelled = uninstrumented_callee(span, names);
        let Some(server) = server else {
            let length = (span.end - span.start) as f64 / 1e9;
            let callee_stats = self.endpoints.entry(spelled).or_default();
            callee_stats.invocations += 1;
            callee_stats.failed += span.error as u64;
            callee_stats.busy_s += length;
            callee_stats.self_s.add(length);
            return spelled;
        };
        let callee = (server.service, server.name);
        // How the caller names this callee, for its calls no server span recorded.
        if spelled != callee {
            self.spellings.entry(spelled).or_insert(callee);
        }
        callee
    }

    /// One message through `broker` (sent by `send`, consumed by `consumers`): the
    /// broker's invocation is the send as its producer saw it (the broker records no
    /// span), and each consumer's invocation a call the broker does not wait for — a
    /// queue between the services with its own capacity, not the producer calling its
    /// consumers.
    fn broker_hop(
        &mut self,
        broker: Endpoint,
        send: &Span,
        consumers: impl Iterator<Item = Span>,
        keyed: &mut Vec<(Endpoint, u64)>,
    ) {
        keyed.clear();
        for consumer in consumers {
            keyed.push(((consumer.service, consumer.name), 0));
            self.edge(broker.0, consumer.service, consumer.error, None);
            self.edges.entry((broker.0, consumer.service)).or_default().calls += 1;
        }
        keyed.sort_unstable();
        self.detached_calls += keyed.len() as u64;
        let stats = self.endpoints.entry(broker).or_default();
        let length = (send.end - send.start) as f64 / 1e9;
        stats.invocations += 1;
        stats.failed += send.error as u64;
        stats.busy_s += length;
        stats.self_s.add(length);
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            let of = stats.detached.entry(run[0].0).or_default();
            of.invocations_calling += 1;
            of.calls += run.len() as u64;
        }
    }

    fn edge(&mut self, from: u32, to: u32, failed: bool, network: Option<f64>) {
        let edge = self.edges.entry((from, to)).or_default();
        edge.attempts += 1;
        edge.failed_attempts += failed as u64;
        if let Some(network) = network {
            edge.network_s.add(network);
        }
    }

    /// Adds invocation `me` and its calls to its endpoint's figures.
    fn record(&mut self, me: Span, work: &mut Work) {
        let calls = &mut *work.calls;
        // The calls waited for first, in start order; those not waited for after them.
        calls.sort_by_key(|c| (c.detached, c.start, c.end));
        for call in calls.iter() {
            self.edges.entry((me.service, call.callee.0)).or_default().calls += 1;
        }
        let split = calls.iter().position(|c| c.detached).unwrap_or(calls.len());
        let (calls, detached) = calls.split_at(split);
        self.detached_calls += detached.len() as u64;
        let stats = self.endpoints.entry((me.service, me.name)).or_default();
        stats.count_detached(detached, work.keyed);
        stats.invocations += 1;
        stats.failed += me.error as u64;
        let length = me.end - me.start;
        stats.busy_s += length as f64 / 1e9;
        let (covered, skewed) = covered_by(&me, calls);
        self.skipped.skewed += skewed as u64;
        let self_s = (length - covered).max(0) as f64 / 1e9;
        stats.self_s.add(self_s);
        stages(calls, work.stage_of);
        stats.count_callees(calls, work.stage_of, work.keyed, work.first_stage);
        let called = &*work.first_stage;
        stats.count_pattern(called, self_s);
        if called.len() > MAX_PAIRED_CALLEES {
            stats.unpaired += 1;
            return;
        }
        for (a, (ea, sa)) in called.iter().enumerate() {
            for (eb, sb) in &called[a + 1..] {
                let pair = stats.pairs.entry((*ea, *eb)).or_default();
                pair.both += 1;
                pair.together += (sa == sb) as u64;
                pair.first_before += (sa < sb) as u64;
            }
        }
    }
}

/// How much of invocation `me` its `calls` (sorted by start) cover, clipped to it —
/// the rest is its self time — and whether a call reached outside it (clock skew).
fn covered_by(me: &Span, calls: &[Call]) -> (i64, bool) {
    let mut covered = 0i64;
    let mut reach = me.start;
    let mut skewed = false;
    for call in calls {
        skewed |= call.start < me.start || call.end > me.end;
        let (from, to) = (call.start.max(reach).max(me.start), call.end.min(me.end));
        if to > from {
            covered += to - from;
            reach = to;
        }
    }
    (covered, skewed)
}

/// Each call's stage into `stage_of`: calls (sorted by start) that overlap are one.
fn stages(calls: &[Call], stage_of: &mut Vec<u64>) {
    stage_of.clear();
    let (mut stage, mut stage_end) = (0u64, i64::MIN);
    for (k, call) in calls.iter().enumerate() {
        if k > 0 && call.start >= stage_end {
            stage += 1;
        }
        stage_end = if k == 0 || call.start >= stage_end { call.end } else { stage_end.max(call.end) };
        stage_of.push(stage);
    }
}

impl EndpointStats {
    /// Each callee not waited for: how many invocations call it, how many times.
    fn count_detached(&mut self, detached: &[Call], keyed: &mut Vec<(Endpoint, u64)>) {
        keyed.clear();
        keyed.extend(detached.iter().map(|call| (call.callee, 0)));
        keyed.sort_unstable();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            let of = self.detached.entry(run[0].0).or_default();
            of.invocations_calling += 1;
            of.calls += run.len() as u64;
        }
    }

    /// The calls waited for, by callee: how many, how many fanned out, and in
    /// `first_stage` each callee's first stage (the order callees are called in).
    fn count_callees(
        &mut self,
        calls: &[Call],
        stage_of: &[u64],
        keyed: &mut Vec<(Endpoint, u64)>,
        first_stage: &mut Vec<(Endpoint, u64)>,
    ) {
        // Calls by (callee, stage): calls to one callee in one stage (a fan-out) are
        // adjacent, and each callee's first run holds its first stage. Sorting keeps
        // this linear in calls whatever their number (one span calling 10,000
        // callees); the pairs are bounded by MAX_PAIRED_CALLEES.
        keyed.clear();
        keyed.extend(calls.iter().zip(stage_of.iter()).map(|(call, &stage)| (call.callee, stage)));
        keyed.sort_unstable();
        first_stage.clear();
        let mut run_start = 0;
        while run_start < keyed.len() {
            let (callee, stage) = keyed[run_start];
            let run = keyed[run_start..].iter().take_while(|&&k| k == (callee, stage)).count();
            let stats_of = self.callees.entry(callee).or_default();
            stats_of.calls += run as u64;
            if run > 1 {
                stats_of.calls_fanned += run as u64;
            }
            if first_stage.last().is_none_or(|(last, _)| *last != callee) {
                first_stage.push((callee, stage));
            }
            run_start += run;
        }
        for (callee, stage) in first_stage.iter() {
            let c = self.callees.get_mut(callee).expect("added above");
            c.invocations_calling += 1;
            c.first_stage_sum += stage;
        }
    }

    /// The pattern of the callees waited for (sorted by callee), hashed: one more
    /// invocation of it, with `self_s` of self time (up to MAX_PATTERNS patterns).
    fn count_pattern(&mut self, called: &[(Endpoint, u64)], self_s: f64) {
        let pattern = {
            use std::hash::{BuildHasher, Hash, Hasher};
            let mut hasher = foldhash::fast::FixedState::with_seed(0).build_hasher();
            called.iter().for_each(|(callee, _)| callee.hash(&mut hasher));
            hasher.finish()
        };
        if self.patterns.len() < MAX_PATTERNS || self.patterns.contains_key(&pattern) {
            let seen = self.patterns.entry(pattern).or_default();
            if seen.invocations == 0 {
                seen.callees.extend(called.iter().map(|(callee, _)| *callee));
            }
            seen.invocations += 1;
            seen.self_sum_s += self_s;
            seen.self_s.add(self_s);
        }
    }
}

/// The broker endpoint a producer span sends to: the service its attributes name
/// (`messaging.system`, a broker's address; else `broker`) and the destination its
/// name gives — OpenTelemetry names a producer span `{operation} {destination}` (older
/// instrumentation `{destination} {operation}`), so `publish orders` and `orders send`
/// are both the topic `orders`.
fn message_broker(span: &Span, names: &mut Names) -> Endpoint {
    const OPERATIONS: [&str; 5] = ["publish", "send", "produce", "create", "process"];
    let name = names.get(span.name).trim().to_string();
    let words: Vec<&str> = name.split_whitespace().collect();
    let destination = match words[..] {
        [first, ref rest @ ..] if !rest.is_empty() && OPERATIONS.contains(&first.to_ascii_lowercase().as_str()) => {
            rest.join(" ")
        }
        [ref rest @ .., last] if !rest.is_empty() && OPERATIONS.contains(&last.to_ascii_lowercase().as_str()) => {
            rest.join(" ")
        }
        _ if name.is_empty() => "messages".to_string(),
        _ => name.clone(),
    };
    let service = if span.peer != NO_NAME { span.peer } else { names.intern("broker") };
    (service, names.intern(&destination))
}

/// A client span with no server span under it (an uninstrumented database, a third
/// party): the callee its `peer.service` names, or its name (`SERVICE.ENDPOINT` as
/// stampede's own export names it; else the name is the service, endpoint `call`).
fn uninstrumented_callee(span: &Span, names: &mut Names) -> Endpoint {
    let name = names.get(span.name).to_string();
    if span.peer != NO_NAME {
        return (span.peer, span.name);
    }
    match name.split_once('.') {
        Some((service, endpoint)) if !service.is_empty() && !endpoint.is_empty() => {
            (names.intern(service), names.intern(endpoint))
        }
        _ => (span.name, names.intern("call")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::test_span as span;

    /// api.get [0, 100] ms: a call to db (10–40, served 12–38), then two overlapping
    /// calls to cache and auth (50–70, 55–90): two stages, the second parallel; self
    /// time 100 − 30 − 40 = 30 ms; db's network (30 − 26) / 2 = 2 ms.
    #[test]
    fn stages_come_from_overlap_and_self_time_is_what_no_call_covers() {
        let mut names = Names::default();
        let mut spans = vec![
            span(&mut names, 1, None, ("api", "get"), Kind::Server, (0, 100)),
            span(&mut names, 2, Some(1), ("api", "db.q"), Kind::Client, (10, 40)),
            span(&mut names, 3, Some(2), ("db", "q"), Kind::Server, (12, 38)),
            span(&mut names, 4, Some(1), ("api", "cache.g"), Kind::Client, (50, 70)),
            span(&mut names, 5, Some(4), ("cache", "g"), Kind::Server, (51, 69)),
            span(&mut names, 6, Some(1), ("api", "auth.c"), Kind::Client, (55, 90)),
            span(&mut names, 7, Some(6), ("auth", "c"), Kind::Server, (56, 89)),
        ];
        let mut model = Model::new(1_000_000_000);
        model.add_trace(&mut spans, &mut names);
        let api = model.endpoints[&(names.intern("api"), names.intern("get"))].clone();
        assert_eq!(api.invocations, 1);
        assert!((api.self_s.values[0] - 0.030).abs() < 1e-12, "{:?}", api.self_s.values);
        let mut callee = |s: &str, e: &str| (names.intern(s), names.intern(e));
        let (db, cache, auth) = (callee("db", "q"), callee("cache", "g"), callee("auth", "c"));
        assert_eq!(api.callees[&db].first_stage_sum, 0);
        assert_eq!((api.callees[&cache].first_stage_sum, api.callees[&auth].first_stage_sum), (1, 1));
        let key = if cache < auth { (cache, auth) } else { (auth, cache) };
        assert_eq!(api.pairs[&key], Pair { both: 1, together: 1, first_before: 0 }, "called together, in one stage");
        let edge = &model.edges[&(names.intern("api"), db.0)];
        assert!((edge.network_s.values[0] - 0.002).abs() < 1e-12);
        assert_eq!(model.max_depth, 2);
    }

    /// api.get [0, 100] ms waits for db (10–40); a call to mail still going at 300 ms
    /// and a server span of audit starting at 200 ms are not waited for. A message
    /// (a producer span 95–96 ms, its consumer at 150 ms) is a 1 ms call to the broker
    /// (`broker.orders`: no messaging system named), which hands it to billing without
    /// waiting. Self time 30 ms; a call ending 3 ms late is clock skew.
    #[test]
    fn calls_the_caller_did_not_wait_for_are_detached_and_leave_its_self_time_alone() {
        let mut names = Names::default();
        let mut spans = vec![
            span(&mut names, 1, None, ("api", "get"), Kind::Server, (0, 100)),
            span(&mut names, 2, Some(1), ("api", "db.q"), Kind::Client, (10, 40)),
            span(&mut names, 3, Some(2), ("db", "q"), Kind::Server, (12, 38)),
            span(&mut names, 4, Some(1), ("api", "mail.send"), Kind::Client, (90, 300)),
            span(&mut names, 5, Some(1), ("api", "orders publish"), Kind::Producer, (95, 96)),
            span(&mut names, 6, Some(5), ("billing", "consume"), Kind::Consumer, (150, 160)),
            span(&mut names, 7, Some(1), ("audit", "log"), Kind::Server, (200, 210)),
            span(&mut names, 8, Some(1), ("api", "cache.g"), Kind::Client, (60, 103)),
        ];
        let mut model = Model::new(1_000_000_000);
        model.add_trace(&mut spans, &mut names);
        let api = model.endpoints[&(names.intern("api"), names.intern("get"))].clone();
        // Covered by calls waited for: 10–40 and 60–100 (cache's 3 ms past the end is skew).
        assert!((api.self_s.values[0] - 0.030).abs() < 1e-12, "{:?}", api.self_s.values);
        let mut callee = |s: &str, e: &str| (names.intern(s), names.intern(e));
        let waited: Vec<Endpoint> = api.callees.keys().copied().collect();
        let detached: Vec<Endpoint> = api.detached.keys().copied().collect();
        let (db, cache) = (callee("db", "q"), callee("cache", "g"));
        let (mail, billing, audit) = (callee("mail", "send"), callee("billing", "consume"), callee("audit", "log"));
        let broker = callee("broker", "orders");
        assert_eq!(waited.len(), 3);
        assert!([db, cache, broker].iter().all(|c| waited.contains(c)), "{waited:?}");
        assert_eq!(
            detached,
            [mail, audit].into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>()
        );
        let queue = &model.endpoints[&broker];
        assert_eq!((queue.invocations, queue.self_s.values[0]), (1, 0.001), "the send, as its producer saw it");
        assert_eq!(queue.detached.keys().copied().collect::<Vec<_>>(), [billing], "handed on, not waited for");
        assert!(
            model.edges.contains_key(&(broker.0, billing.0))
                && model.edges.contains_key(&(names.intern("api"), broker.0))
        );
        assert_eq!(model.detached_calls, 3, "mail, audit, and the broker's hand-off");
        assert_eq!(model.max_depth, 3, "api, the broker, billing");
        assert_eq!(model.skipped.skewed, 1, "cache ended 3 ms late: skew, not a detached call");
        assert!(model.endpoints.contains_key(&billing), "the consumer is an invocation");
    }

    /// api's client span names its callee `payments-svc` (peer.service); where payments'
    /// server span is under it, the call is `payments.charge`, and where it is not (the
    /// server side unsampled), the same spelling is joined to it — one service, not two.
    #[test]
    fn a_callees_two_spellings_are_joined_by_its_client_server_pairs() {
        let mut names = Names::default();
        let mut model = Model::new(1_000_000_000);
        let peer = names.intern("payments-svc");
        for (trace, served) in [(1u128, true), (2, false), (3, false)] {
            let mut spans = vec![
                span(&mut names, 1, None, ("api", "get"), Kind::Server, (0, 100)),
                span(&mut names, 2, Some(1), ("api", "POST /charge"), Kind::Client, (10, 40)),
            ];
            spans[1].peer = peer;
            if served {
                spans.push(span(&mut names, 3, Some(2), ("payments", "charge"), Kind::Server, (12, 38)));
            }
            spans.iter_mut().for_each(|s| s.trace = trace);
            model.add_trace(&mut spans, &mut names);
        }
        let (charge, spelled) =
            ((names.intern("payments"), names.intern("charge")), (peer, names.intern("POST /charge")));
        assert!(model.endpoints.contains_key(&spelled), "before: a service of its own");
        assert_eq!(model.join_spellings(), 1);
        assert!(!model.endpoints.contains_key(&spelled));
        assert_eq!(model.endpoints[&charge].invocations, 3);
        let api = &model.endpoints[&(names.intern("api"), names.intern("get"))];
        assert_eq!(api.callees.keys().copied().collect::<Vec<_>>(), [charge]);
        assert_eq!((api.callees[&charge].calls, api.callees[&charge].invocations_calling), (3, 3));
        let edges: Vec<(u32, u32)> = model.edges.keys().copied().collect();
        assert_eq!(edges, [(names.intern("api"), charge.0)]);
        assert_eq!(model.edges[&(names.intern("api"), charge.0)].calls, 3);
    }

    /// A failed attempt then a second one to the same callee are one call of two
    /// attempts; two successful calls in a row are two calls.
    #[test]
    fn a_retry_after_a_failure_is_one_call_and_two_successes_are_two() {
        let mut names = Names::default();
        let mut failed = span(&mut names, 2, Some(1), ("api", "db.q"), Kind::Client, (10, 20));
        failed.error = true;
        let mut spans = vec![
            span(&mut names, 1, None, ("api", "get"), Kind::Server, (0, 100)),
            failed,
            span(&mut names, 3, Some(1), ("api", "db.q"), Kind::Client, (25, 35)),
            span(&mut names, 4, Some(1), ("api", "db.q"), Kind::Client, (40, 50)),
        ];
        let mut model = Model::new(1_000_000_000);
        model.add_trace(&mut spans, &mut names);
        // No server spans under the clients: db.q is an uninstrumented callee.
        let edge = &model.edges[&(names.intern("api"), names.intern("db"))];
        assert_eq!((edge.calls, edge.attempts, edge.failed_attempts), (2, 3, 1));
    }

    #[test]
    fn a_reservoir_keeps_its_size_and_the_same_input_keeps_the_same_sample() {
        let fill = || {
            let mut r = Reservoir::default();
            (0..3 * SAMPLES).for_each(|i| r.add(i as f64));
            r
        };
        let (a, b) = (fill(), fill());
        assert_eq!(a.values.len(), SAMPLES);
        assert_eq!(a.values, b.values);
        assert_eq!(a.seen, 3 * SAMPLES as u64);
        // A uniform sample of 0..60000: its median near 30000.
        assert!((a.quantile(0.5) - 30_000.0).abs() < 1_500.0, "{}", a.quantile(0.5));
    }
}
