//! The Learn page's ten experiments, one mechanism each, in order: a healthy call;
//! independent errors; retries; an outage; 429s with and without retry-after; a
//! thundering herd; a retry budget; a breaker; a 429 must not trip the breaker;
//! overload with background work shed.
//!
//! Each experiment is one call class (answer; in the last, rewrite as the
//! background work in front of it) on one tier (sonnet) with one fault, built as a
//! `gateway` scenario from its knobs ([`Setup::toml`]), so the page can show and
//! export exactly what ran. Its figures are measured per replica from the replica's
//! trace ([`measure`]) and given 95% intervals over the replicas; where a closed
//! form exists it is checked against them ([`Experiment::checks`]).

use serde::Deserialize;
use serde_json::{json, Value};
use stampede_engine::measurement::trace::{Trace, TraceKind};
use stampede_engine::nanos_to_secs;
use stampede_run::stats::Summary;

/// One knob: a slider (`min`..`max` by `step`) or a choice among `choices`.
pub struct Knob {
    pub id: &'static str,
    pub label: &'static str,
    pub min: f64,
    pub max: f64,
    pub step: f64,
    pub default: f64,
    pub unit: &'static str,
    /// A choice knob's options; its value is the index.
    pub choices: &'static [&'static str],
}

const fn slider(
    id: &'static str,
    label: &'static str,
    range: (f64, f64, f64),
    default: f64,
    unit: &'static str,
) -> Knob {
    Knob { id, label, min: range.0, max: range.1, step: range.2, default, unit, choices: &[] }
}

const fn choice(id: &'static str, label: &'static str, choices: &'static [&'static str], default: usize) -> Knob {
    Knob { id, label, min: 0.0, max: (choices.len() - 1) as f64, step: 1.0, default: default as f64, unit: "", choices }
}

const ARRIVALS: &[&str] = &["Poisson", "even"];
const ON_OFF: &[&str] = &["off", "on"];

/// Knob values by id, as the page sends them.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Knobs(pub std::collections::BTreeMap<String, f64>);

impl Knobs {
    fn get(&self, experiment: &Experiment, id: &str) -> f64 {
        let knob = experiment.knobs.iter().find(|k| k.id == id).unwrap_or_else(|| panic!("knob {id}"));
        let value = self.0.get(id).copied().unwrap_or(knob.default);
        // Out-of-range values are clamped to the slider, and choices rounded to one.
        let value = value.clamp(knob.min, knob.max);
        if knob.choices.is_empty() {
            value
        } else {
            value.round()
        }
    }
}

/// What one run of an experiment is: the scenario's few moving parts.
#[derive(Clone, Debug)]
pub struct Setup {
    pub rate: f64,
    pub even: bool,
    pub horizon_s: f64,
    pub latency_s: f64,
    pub error_rate: f64,
    pub attempts: u32,
    pub wait_s: f64,
    /// The backoff rule (`constant`, `exponential`, `equal_jitter`, `full_jitter`).
    pub backoff: &'static str,
    pub backoff_cap_s: f64,
    /// The provider's requests per second, with one second of burst.
    pub allows: Option<f64>,
    pub honour_retry_after: bool,
    /// The retry budget's ratio (`None`: unbudgeted).
    pub budget: Option<f64>,
    /// (open time s, trip ratio, counts 429s).
    pub breaker: Option<(f64, f64, bool)>,
    /// Background rewrite calls in front of each answer, on the same tier, and
    /// whether the admission ladder sheds them; the tier's server slots.
    pub overload: Option<(bool, u32)>,
    /// (kind, start s, duration s) on the tier.
    pub incident: Option<(&'static str, f64, f64)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            rate: 5.0,
            even: false,
            horizon_s: 20.0,
            latency_s: 0.3,
            error_rate: 0.0,
            attempts: 1,
            wait_s: 1.0,
            backoff: "constant",
            backoff_cap_s: 1.0,
            allows: None,
            honour_retry_after: true,
            budget: None,
            breaker: None,
            overload: None,
            incident: None,
        }
    }
}

/// Input and output tokens per call: small and fixed, so a call's time is the
/// latency knob (plus 100/8000 s of prefill and 1/65 s of decode).
const INPUT_TOKENS: f64 = 100.0;
const OUTPUT_TOKENS: f64 = 1.0;

impl Setup {
    /// The mean time of a healthy attempt: (latency + prefill + decode) × E[j], j ~ LogNormal(0, 0.25).
    pub fn mean_call_s(&self) -> f64 {
        (self.latency_s + INPUT_TOKENS / 8_000.0 + OUTPUT_TOKENS / 65.0) * (0.25f64 * 0.25 / 2.0).exp()
    }

    /// The scenario's `[gateway]` section: the backoff, the budget, the breaker and the
    /// ladder this setup turns on.
    fn gateway_section(&self) -> String {
        let mut text = format!(
            "\n[gateway]\nbackoff_base_s = {wait:?}\nbackoff_cap_s = {cap:?}\nhonour_retry_after = {honour}\n",
            wait = self.wait_s,
            cap = self.backoff_cap_s.max(self.wait_s),
            honour = self.honour_retry_after,
        );
        if let Some(ratio) = self.budget {
            text += &format!("retry_budget_ratio = {ratio:?}\n");
        }
        if let Some((open, ratio, counts_429)) = self.breaker {
            text += &format!(
                "breaker_open_s = {open:?}\nbreaker_max_open_s = {open:?}\nbreaker_open_multiplier = 1.0\n\
                 breaker_failure_ratio = {ratio:?}\nbreaker_window_s = 5.0\nbreaker_minimum_calls = 5\n\
                 breaker_counts_429 = {counts_429}\n"
            );
        }
        if self.overload.is_some() {
            // Pressure is attempts in flight ÷ both classes' slots: 0.5 when the provider is full.
            text += "ladder_classes = [\"rewrite\"]\nladder_rungs = [0.45, 0.9, 0.95, 1.0]\n";
        }
        text
    }

    /// The scenario, as `stampede run` reads it.
    pub fn toml(&self, name: &str, description: &str, replicas: u32, seed: u64) -> String {
        let mut gates = Vec::new();
        if let Some((shed, _)) = self.overload {
            if shed {
                gates.push("admission");
            }
        }
        if self.breaker.is_some() {
            gates.push("breaker");
        }
        gates.push("retry");
        let gates = gates.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>().join(", ");
        let mut text = format!(
            "name = {name:?}\ndescription = {description:?}\nmodel = \"gateway\"\n\n\
             [run]\nhorizon_s = {horizon:?}\nwarmup_s = 0.0\nreplicas = {replicas}\nseed = {seed}\n\n\
             [workload]\nturns_per_s = {rate:?}\narrivals = \"{arrivals}\"\n\n\
             [stack]\ngates = [{gates}]\nretry_budget = {budgeted}\n",
            horizon = self.horizon_s,
            rate = self.rate,
            arrivals = if self.even { "even" } else { "poisson" },
            budgeted = self.budget.is_some(),
        );
        if let Some((_, slots)) = self.overload {
            text += &format!("bulkhead_slots = {{ rewrite = {slots}, answer = {slots} }}\n");
        }
        text += &self.gateway_section();
        text += &format!(
            "\n[tiers.sonnet]\nbase_latency_s = {latency:?}\nerror_rate = {error:?}\n",
            latency = self.latency_s,
            error = self.error_rate
        );
        if let Some(allows) = self.allows {
            text += &format!("rpm = {}\nburst_s = 1.0\n", (allows * 60.0).round() as u64);
        }
        if let Some((_, slots)) = self.overload {
            text += &format!("server_slots = {slots}\n");
        }
        let class = format!(
            "tier = \"sonnet\"\nstreamed = false\nmax_tokens = 16\nbackoff = \"{backoff}\"\nmax_attempts = {attempts}\n\
             input_tokens = {{ mean = {INPUT_TOKENS:?}, sd = 0.0 }}\noutput_tokens = {{ mean = {OUTPUT_TOKENS:?}, sd = 0.0 }}\n\
             cache_hit_ratio = 0.0\ndeadline_s = 30.0\ntimeouts_s = {{ connect = 2.0, first_token = 8.0, total = 10.0 }}\n",
            backoff = self.backoff,
            attempts = self.attempts
        );
        text += &format!("\n[classes.answer]\n{class}");
        let background = self.overload.is_some();
        text += &format!(
            "\n[classes.rewrite]\ncalls_per_turn = {}\n{}",
            if background { "1.0" } else { "0.0" },
            if background { class.as_str() } else { "" }
        );
        for other in ["guard", "think", "title"] {
            text += &format!("\n[classes.{other}]\ncalls_per_turn = 0.0\n");
        }
        if let Some((kind, start, duration)) = self.incident {
            text += &format!(
                "\n[[incidents]]\ntier = \"sonnet\"\nkind = \"{kind}\"\nstart_s = {start:?}\nduration_s = {duration:?}\n"
            );
        }
        text
    }
}

/// The figures measured in each replica, by index (see [`FIGURES`]).
pub mod figure {
    pub const CALLS: usize = 0;
    pub const SUCCEEDED: usize = 1;
    pub const FAILED: usize = 2;
    pub const REFUSED: usize = 3;
    pub const SHED: usize = 4;
    pub const ATTEMPTS: usize = 5;
    pub const AMPLIFICATION: usize = 6;
    pub const RATE_LIMITED: usize = 7;
    pub const TRIPS: usize = 8;
    pub const WASTED_S: usize = 9;
    pub const FAILURE_SHARE: usize = 10;
    pub const ATTEMPTS_PER_FAILED: usize = 11;
    pub const RETRIES: usize = 12;
    pub const SERVED: usize = 13;
    pub const PEAK_RETRIES: usize = 14;
    pub const GOODPUT: usize = 15;
    pub const BACKGROUND_SERVED: usize = 16;
    pub const IN_FLIGHT: usize = 17;
    pub const SERVER_ERRORS: usize = 18;
    pub const TIMEOUTS: usize = 19;
    pub const BREAKER_REFUSALS: usize = 20;
}

/// Each figure's (name, label, unit).
pub const FIGURES: [(&str, &str, &str); 21] = [
    ("calls", "requests", ""),
    ("succeeded", "succeeded", "share"),
    ("failed", "failed", ""),
    ("refused", "refused locally", ""),
    ("shed", "shed", ""),
    ("attempts", "attempts", ""),
    ("amplification", "attempts per request", "×"),
    ("rate_limited", "429s", ""),
    ("trips", "breaker trips", ""),
    ("wasted_s", "time in failed attempts", "s"),
    ("failure_share", "failed share", "share"),
    ("attempts_per_failed", "attempts per failed request", ""),
    ("retries", "retries", ""),
    ("served", "successes", ""),
    ("peak_retries", "peak retries per ¼ s", ""),
    ("goodput", "successes per second", "/s"),
    ("background_served", "background work served", "share"),
    ("in_flight", "mean requests in flight", ""),
    ("server_errors", "500s", ""),
    ("timeouts", "timeouts", ""),
    ("breaker_refusals", "refused by the breaker", ""),
];

/// One replica's figures from its trace; `horizon_s` is the arrival window.
pub fn measure(trace: &Trace, horizon_s: f64) -> Vec<f64> {
    use figure::*;
    let mut f = vec![0.0; FIGURES.len()];
    let mut important = (0.0, 0.0);
    let mut background = (0.0, 0.0);
    let mut failed_calls = std::collections::HashSet::new();
    for row in &trace.rows {
        match row.kind {
            TraceKind::Call => {
                let served = row.outcome == "served";
                let tally = if row.class == "rewrite" { &mut background } else { &mut important };
                tally.0 += 1.0;
                tally.1 += served as u8 as f64;
                if !served {
                    failed_calls.insert(row.call);
                    if row.outcome.starts_with("admission") {
                        f[SHED] += 1.0;
                    }
                }
            }
            TraceKind::Refusal => {
                f[REFUSED] += 1.0;
                f[BREAKER_REFUSALS] += (row.gate == "breaker") as u8 as f64;
            }
            TraceKind::State => f[TRIPS] += (row.outcome == "open") as u8 as f64,
            TraceKind::Attempt | TraceKind::Wait | TraceKind::Serve | TraceKind::Incident => {}
        }
    }
    let mut retry_bins: Vec<u32> = Vec::new();
    let mut failed_attempts = 0.0;
    for row in trace.rows.iter().filter(|r| r.kind == TraceKind::Attempt) {
        f[ATTEMPTS] += 1.0;
        let ok = row.outcome == "200";
        if !ok {
            f[WASTED_S] += nanos_to_secs(row.end - row.start);
        }
        f[RATE_LIMITED] += (row.outcome == "429") as u8 as f64;
        f[SERVER_ERRORS] += (row.outcome == "500") as u8 as f64;
        f[TIMEOUTS] += row.outcome.starts_with("timeout") as u8 as f64;
        f[IN_FLIGHT] += nanos_to_secs(row.end - row.start);
        if ok && nanos_to_secs(row.start) < horizon_s {
            f[GOODPUT] += 1.0;
        }
        if failed_calls.contains(&row.call) {
            failed_attempts += 1.0;
        }
        if row.attempt > 1 {
            f[RETRIES] += 1.0;
            let bin = (nanos_to_secs(row.start) / super::figures::BIN_S) as usize;
            if retry_bins.len() <= bin {
                retry_bins.resize(bin + 1, 0);
            }
            retry_bins[bin] += 1;
        }
    }
    f[CALLS] = important.0 + background.0;
    f[SERVED] = important.1 + background.1;
    f[FAILED] = f[CALLS] - f[SERVED];
    f[SUCCEEDED] = important.1 / important.0;
    f[BACKGROUND_SERVED] = if background.0 > 0.0 { background.1 / background.0 } else { f64::NAN };
    f[FAILURE_SHARE] = 1.0 - f[SUCCEEDED];
    f[AMPLIFICATION] = f[ATTEMPTS] / f[CALLS];
    f[ATTEMPTS_PER_FAILED] = if f[FAILED] > 0.0 { failed_attempts / f[FAILED] } else { f64::NAN };
    f[PEAK_RETRIES] = retry_bins.iter().copied().max().unwrap_or(0) as f64;
    f[GOODPUT] /= horizon_s;
    f[IN_FLIGHT] /= horizon_s;
    f
}

/// How a closed form is compared with a measured interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compare {
    /// The closed form lies inside the 95% interval of the mean.
    Inside,
    /// The mean is at most the bound.
    AtMost,
}

/// A closed form for one figure.
pub struct Check {
    pub what: String,
    pub formula: String,
    pub expected: f64,
    pub figure: usize,
    pub compare: Compare,
}

impl Check {
    /// How many standard errors the mean lies from the closed form (0 for a bound
    /// that holds; ±∞ when the replicas all agree and the closed form differs).
    pub fn z(&self, measured: &Summary, replicas: u32) -> f64 {
        let gap = measured.mean - self.expected;
        if self.compare == Compare::AtMost && gap <= 0.0 {
            return 0.0;
        }
        let se = measured.sd / (replicas as f64).sqrt();
        if se > 0.0 {
            gap / se
        } else if gap.abs() <= 1e-9 * self.expected.abs().max(1e-9) {
            0.0
        } else {
            gap.signum() * f64::INFINITY
        }
    }

    /// Whether `measured` agrees with the closed form.
    pub fn holds(&self, measured: &Summary) -> bool {
        let slack = 1e-9 * self.expected.abs().max(1e-9);
        match self.compare {
            Compare::Inside => {
                if measured.ci_lo.is_nan() {
                    (measured.mean - self.expected).abs() <= slack
                } else {
                    measured.ci_lo - slack <= self.expected && self.expected <= measured.ci_hi + slack
                }
            }
            Compare::AtMost => measured.mean <= self.expected + slack,
        }
    }
}

/// One experiment.
pub struct Experiment {
    pub id: &'static str,
    pub title: &'static str,
    pub knobs: &'static [Knob],
    /// The figures its cards show, in order.
    pub cards: &'static [usize],
    pub takeaway: &'static str,
    setup: fn(&Experiment, &Knobs) -> Setup,
    sentence: fn(&Setup) -> String,
    checks: fn(&Setup, &[Summary]) -> Vec<Check>,
    happened: fn(&Setup, &[Summary]) -> String,
}

impl Experiment {
    pub fn setup(&self, knobs: &Knobs) -> Setup {
        (self.setup)(self, knobs)
    }
    pub fn sentence(&self, setup: &Setup) -> String {
        (self.sentence)(setup)
    }
    pub fn checks(&self, setup: &Setup, figures: &[Summary]) -> Vec<Check> {
        (self.checks)(setup, figures)
    }
    pub fn happened(&self, setup: &Setup, figures: &[Summary]) -> String {
        (self.happened)(setup, figures)
    }

    /// The experiment for the page's list: id, title, knobs, takeaway.
    pub fn describe(&self) -> Value {
        let knobs: Vec<Value> = self
            .knobs
            .iter()
            .map(|k| {
                json!({"id": k.id, "label": k.label, "min": k.min, "max": k.max, "step": k.step,
                       "default": k.default, "unit": k.unit, "choices": k.choices})
            })
            .collect();
        json!({"id": self.id, "title": self.title, "knobs": knobs, "takeaway": self.takeaway})
    }
}

fn arrivals(even: bool) -> &'static str {
    if even {
        "evenly spaced"
    } else {
        "at random (Poisson)"
    }
}

fn percent(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn none(_: &Setup, _: &[Summary]) -> Vec<Check> {
    Vec::new()
}

use figure::*;

/// The ten experiments, in order.
pub static EXPERIMENTS: [Experiment; 10] = [
    Experiment {
        id: "healthy",
        title: "1 · A healthy call",
        knobs: &[
            slider("rate", "requests per second", (1.0, 20.0, 1.0), 5.0, "/s"),
            slider("latency", "provider latency", (0.1, 2.0, 0.1), 0.3, "s"),
        ],
        cards: &[CALLS, SUCCEEDED, ATTEMPTS, AMPLIFICATION, IN_FLIGHT],
        takeaway: "A healthy call is one attempt; how many are in flight at once is the arrival rate times the time each takes (Little's law).",
        setup: |e, k| Setup { rate: k.get(e, "rate"), latency_s: k.get(e, "latency"), ..Setup::default() },
        sentence: |s| {
            format!(
                "{} requests per second arrive {} at a healthy provider that answers in about {} s; one attempt each, no retries.",
                s.rate, arrivals(s.even), s.latency_s
            )
        },
        checks: |s, _| {
            vec![
                Check {
                    what: "mean requests in flight (Little's law)".into(),
                    formula: format!("λ·W = {} × {:.4} s", s.rate, s.mean_call_s()),
                    expected: s.rate * s.mean_call_s(),
                    figure: IN_FLIGHT,
                    compare: Compare::Inside,
                },
                Check {
                    what: "attempts per request".into(),
                    formula: "1 (nothing fails)".into(),
                    expected: 1.0,
                    figure: AMPLIFICATION,
                    compare: Compare::Inside,
                },
            ]
        },
        happened: |s, f| {
            format!(
                "Every request succeeded at its first attempt; on average {:.2} were in flight at once, as {} requests/s × {:.3} s predicts.",
                f[IN_FLIGHT].mean, s.rate, s.mean_call_s()
            )
        },
    },
    Experiment {
        id: "errors",
        title: "2 · Independent errors",
        knobs: &[
            slider("error_rate", "error rate", (0.0, 0.5, 0.01), 0.1, ""),
            slider("rate", "requests per second", (1.0, 20.0, 1.0), 5.0, "/s"),
            choice("arrivals", "arrivals", ARRIVALS, 0),
        ],
        cards: &[CALLS, SUCCEEDED, FAILED, SERVER_ERRORS, AMPLIFICATION],
        takeaway: "Without retries, each request fails with the provider's error rate: the failures are independent and the arithmetic is one line.",
        setup: |e, k| Setup {
            error_rate: k.get(e, "error_rate"),
            rate: k.get(e, "rate"),
            even: k.get(e, "arrivals") == 1.0,
            ..Setup::default()
        },
        sentence: |s| {
            format!(
                "{} requests per second arrive {}; each attempt fails with a 500 with probability {}; one attempt each.",
                s.rate, arrivals(s.even), s.error_rate
            )
        },
        checks: |s, _| {
            vec![Check {
                what: "failed share".into(),
                formula: format!("p = {}", s.error_rate),
                expected: s.error_rate,
                figure: FAILURE_SHARE,
                compare: Compare::Inside,
            }]
        },
        happened: |_, f| {
            format!(
                "{} of requests failed ({:.1} per run), each at its only attempt.",
                percent(f[FAILURE_SHARE].mean),
                f[FAILED].mean
            )
        },
    },
    Experiment {
        id: "retries",
        title: "3 · Retries",
        knobs: &[
            slider("attempts", "attempts", (1.0, 5.0, 1.0), 3.0, ""),
            slider("error_rate", "error rate", (0.0, 0.6, 0.01), 0.3, ""),
            slider("wait", "wait between attempts", (0.1, 3.0, 0.1), 1.0, "s"),
            choice("arrivals", "arrivals", ARRIVALS, 0),
        ],
        cards: &[CALLS, SUCCEEDED, FAILED, ATTEMPTS, AMPLIFICATION, RETRIES],
        takeaway: "Retries turn independent failures into rare ones (pⁿ) at a price of (1−pⁿ)/(1−p) attempts per request — worth it when failures are independent.",
        setup: |e, k| Setup {
            attempts: k.get(e, "attempts") as u32,
            error_rate: k.get(e, "error_rate"),
            wait_s: k.get(e, "wait"),
            even: k.get(e, "arrivals") == 1.0,
            ..Setup::default()
        },
        sentence: |s| {
            format!(
                "{} requests per second arrive {}; each attempt fails with probability {}; a failed request is tried again after {} s, up to {} attempts.",
                s.rate, arrivals(s.even), s.error_rate, s.wait_s, s.attempts
            )
        },
        checks: |s, _| {
            let (p, n) = (s.error_rate, s.attempts as i32);
            let expected = if p < 1.0 { (1.0 - p.powi(n)) / (1.0 - p) } else { n as f64 };
            vec![
                Check {
                    what: "attempts per request".into(),
                    formula: format!("(1 − pⁿ)/(1 − p) = (1 − {p}^{n})/(1 − {p})"),
                    expected,
                    figure: AMPLIFICATION,
                    compare: Compare::Inside,
                },
                Check {
                    what: "failed share".into(),
                    formula: format!("pⁿ = {p}^{n}"),
                    expected: p.powi(n),
                    figure: FAILURE_SHARE,
                    compare: Compare::Inside,
                },
            ]
        },
        happened: |s, f| {
            format!(
                "{:.1} retries per run rescued all but {} of requests; every retry waited {} s (the dotted lines).",
                f[RETRIES].mean,
                percent(f[FAILURE_SHARE].mean),
                s.wait_s
            )
        },
    },
    Experiment {
        id: "outage",
        title: "4 · An outage",
        knobs: &[
            slider("attempts", "attempts", (1.0, 5.0, 1.0), 3.0, ""),
            slider("wait", "wait between attempts", (0.1, 3.0, 0.1), 1.0, "s"),
            choice("arrivals", "arrivals", ARRIVALS, 0),
        ],
        cards: &[CALLS, SUCCEEDED, FAILED, ATTEMPTS, AMPLIFICATION, WASTED_S],
        takeaway: "When the provider is down, failures are not independent: every retry fails too, so retries are pure cost — n attempts for each request that fails anyway.",
        setup: |e, k| Setup {
            attempts: k.get(e, "attempts") as u32,
            wait_s: k.get(e, "wait"),
            even: k.get(e, "arrivals") == 1.0,
            horizon_s: 25.0,
            incident: Some(("outage", 5.0, 10.0)),
            ..Setup::default()
        },
        sentence: |s| {
            format!(
                "{} requests per second arrive {}; the provider is down from 5 s to 15 s (every attempt fails); a failed request is tried again after {} s, up to {} attempts.",
                s.rate, arrivals(s.even), s.wait_s, s.attempts
            )
        },
        checks: |s, _| {
            vec![Check {
                what: "attempts per failed request".into(),
                formula: format!("n = {} (every retry fails too)", s.attempts),
                expected: s.attempts as f64,
                figure: ATTEMPTS_PER_FAILED,
                compare: Compare::Inside,
            }]
        },
        happened: |s, f| {
            format!(
                "{:.1} requests per run failed, each after all {} attempts; {:.1} s per run went into attempts that failed.",
                f[FAILED].mean, s.attempts, f[WASTED_S].mean
            )
        },
    },
    Experiment {
        id: "rate-limits",
        title: "5 · 429s and retry-after",
        knobs: &[
            slider("rate", "your rate", (1.0, 12.0, 1.0), 6.0, "/s"),
            slider("allows", "the provider allows", (1.0, 10.0, 1.0), 4.0, "/s"),
            choice("honour", "honour retry-after", ON_OFF, 1),
        ],
        cards: &[CALLS, SUCCEEDED, RATE_LIMITED, ATTEMPTS, AMPLIFICATION, GOODPUT],
        takeaway: "A 429 says the limit is reached: no client gets more than the provider allows, and every extra attempt only buys another 429. Retry-after alone brings every refused client back at the same instant, when the bucket refills; jitter on top spreads them.",
        setup: |e, k| Setup {
            rate: k.get(e, "rate"),
            allows: Some(k.get(e, "allows")),
            honour_retry_after: k.get(e, "honour") == 1.0,
            attempts: 4,
            wait_s: 0.1,
            backoff: "full_jitter",
            backoff_cap_s: 0.2,
            horizon_s: 30.0,
            ..Setup::default()
        },
        sentence: |s| {
            format!(
                "You send {} requests per second; the provider allows {} per second (a second's burst) and answers 429 beyond that; up to 4 attempts with a full-jitter backoff of 0.1–0.2 s, {} retry-after.",
                s.rate,
                s.allows.unwrap_or(0.0),
                if s.honour_retry_after { "honouring" } else { "ignoring" }
            )
        },
        checks: |s, _| {
            let allows = s.allows.unwrap_or(0.0);
            vec![Check {
                what: "successes per second".into(),
                formula: format!("≤ allowed × (1 + burst/duration) = {allows} × (1 + 1/{})", s.horizon_s),
                expected: allows * (1.0 + 1.0 / s.horizon_s),
                figure: GOODPUT,
                compare: Compare::AtMost,
            }]
        },
        happened: |s, f| {
            format!(
                "{:.1} 429s per run; {:.2} attempts per request {} retry-after; {:.2} successes per second against {} allowed.",
                f[RATE_LIMITED].mean,
                f[AMPLIFICATION].mean,
                if s.honour_retry_after { "honouring" } else { "ignoring" },
                f[GOODPUT].mean,
                s.allows.unwrap_or(0.0)
            )
        },
    },
    Experiment {
        id: "herd",
        title: "6 · A thundering herd",
        knobs: &[
            choice("jitter", "jitter", &["none", "equal", "full"], 0),
            slider("clients", "clients", (5.0, 60.0, 1.0), 30.0, ""),
        ],
        cards: &[CALLS, SUCCEEDED, ATTEMPTS, PEAK_RETRIES, RETRIES],
        takeaway: "Clients that failed together retry together unless jitter spreads them: exponential backoff alone only moves the stampede later.",
        setup: |e, k| {
            let clients = k.get(e, "clients");
            Setup {
                rate: clients / 0.1,
                even: true,
                horizon_s: 0.1,
                attempts: 6,
                wait_s: 0.5,
                backoff_cap_s: 8.0,
                backoff: ["exponential", "equal_jitter", "full_jitter"][k.get(e, "jitter") as usize],
                incident: Some(("outage", 0.0, 3.0)),
                ..Setup::default()
            }
        },
        sentence: |s| {
            format!(
                "{} clients call within 0.1 s of each other while the provider is down (0–3 s); each retries up to 6 attempts, waiting 0.5 s doubling to 8 s, with {}.",
                (s.rate * s.horizon_s).round(),
                match s.backoff {
                    "exponential" => "no jitter",
                    "equal_jitter" => "equal jitter (half fixed, half random)",
                    _ => "full jitter (uniform from zero)",
                }
            )
        },
        checks: none,
        happened: |_, f| {
            format!(
                "The busiest quarter-second saw {:.1} retries; {:.1} retries in all per run, {} of clients served in the end.",
                f[PEAK_RETRIES].mean,
                f[RETRIES].mean,
                percent(f[SUCCEEDED].mean)
            )
        },
    },
    Experiment {
        id: "budget",
        title: "7 · A retry budget",
        knobs: &[
            slider("budget", "budget (retries per success)", (0.0, 1.0, 0.05), 0.1, ""),
            slider("attempts", "attempts", (1.0, 5.0, 1.0), 3.0, ""),
        ],
        cards: &[CALLS, SUCCEEDED, ATTEMPTS, AMPLIFICATION, RETRIES],
        takeaway: "A budget caps retries at a share of successes, so a failing provider sees little more than the first attempts. A budget of 0 funds no retries at all.",
        setup: |e, k| Setup {
            budget: Some(k.get(e, "budget")),
            attempts: k.get(e, "attempts") as u32,
            error_rate: 0.5,
            horizon_s: 30.0,
            ..Setup::default()
        },
        sentence: |s| {
            format!(
                "{} requests per second; half of all attempts fail (500); up to {} attempts, but each retry spends a token, and each success earns {} (starting with {}).",
                s.rate,
                s.attempts,
                s.budget.unwrap_or(0.0),
                100.0 * s.budget.unwrap_or(0.0)
            )
        },
        checks: |s, f| {
            let ratio = s.budget.unwrap_or(0.0);
            vec![Check {
                what: "retries".into(),
                formula: format!("≤ r × (100 + successes) = {ratio} × (100 + {:.1})", f[SERVED].mean),
                expected: ratio * (100.0 + f[SERVED].mean),
                figure: RETRIES,
                compare: Compare::AtMost,
            }]
        },
        happened: |s, f| {
            format!(
                "{:.1} retries per run against a cap of {:.1}: {:.2} attempts per request where unbudgeted retries would spend {:.2}.",
                f[RETRIES].mean,
                s.budget.unwrap_or(0.0) * (100.0 + f[SERVED].mean),
                f[AMPLIFICATION].mean,
                (1.0 - 0.5f64.powi(s.attempts as i32)) / 0.5
            )
        },
    },
    Experiment {
        id: "breaker",
        title: "8 · A circuit breaker",
        knobs: &[
            choice("breaker", "breaker", ON_OFF, 1),
            slider("open", "open time", (1.0, 20.0, 1.0), 5.0, "s"),
            slider("ratio", "trip at failure ratio", (0.1, 0.9, 0.05), 0.5, ""),
        ],
        cards: &[CALLS, SUCCEEDED, ATTEMPTS, TRIPS, BREAKER_REFUSALS, WASTED_S],
        takeaway: "A breaker stops sending to a provider that is down, failing fast instead of waiting and paying for doomed attempts, and probes now and then to see whether it is back.",
        setup: |e, k| Setup {
            breaker: (k.get(e, "breaker") == 1.0).then(|| (k.get(e, "open"), k.get(e, "ratio"), false)),
            attempts: 2,
            horizon_s: 30.0,
            incident: Some(("outage", 5.0, 15.0)),
            ..Setup::default()
        },
        sentence: |s| match s.breaker {
            Some((open, ratio, _)) => format!(
                "{} requests per second; the provider is down from 5 s to 20 s; a breaker opens when {} of the last 5 s of calls failed, stays open {} s, then lets 3 probes through.",
                s.rate, percent(ratio), open
            ),
            None => format!("{} requests per second; the provider is down from 5 s to 20 s; no breaker: every request is sent.", s.rate),
        },
        checks: none,
        happened: |_, f| {
            format!(
                "The breaker opened {:.1} times per run and refused {:.1} attempts; {:.1} s went into failed attempts.",
                f[TRIPS].mean, f[BREAKER_REFUSALS].mean, f[WASTED_S].mean
            )
        },
    },
    Experiment {
        id: "429-breaker",
        title: "9 · A 429 must not trip the breaker",
        knobs: &[choice("counts", "the breaker counts 429s as failures", ON_OFF, 0)],
        cards: &[CALLS, SUCCEEDED, RATE_LIMITED, TRIPS, BREAKER_REFUSALS, GOODPUT],
        takeaway: "A 429 means \"you, slow down\", not \"I am broken\": counting it as a failure trips the breaker on a healthy provider and refuses work it would have served.",
        setup: |e, k| Setup {
            breaker: Some((5.0, 0.3, k.get(e, "counts") == 1.0)),
            rate: 6.0,
            allows: Some(4.0),
            attempts: 3,
            wait_s: 0.5,
            backoff: "full_jitter",
            backoff_cap_s: 4.0,
            horizon_s: 30.0,
            ..Setup::default()
        },
        sentence: |s| {
            format!(
                "You send 6 requests per second to a healthy provider that allows 4; a breaker (trip at 30% failures, open 5 s) that {} 429s.",
                if s.breaker.is_some_and(|b| b.2) { "counts" } else { "ignores" }
            )
        },
        checks: none,
        happened: |_, f| {
            format!(
                "{:.1} 429s per run, {:.1} breaker trips, {:.1} attempts refused by the breaker; {} of requests succeeded.",
                f[RATE_LIMITED].mean,
                f[TRIPS].mean,
                f[BREAKER_REFUSALS].mean,
                percent(f[SUCCEEDED].mean)
            )
        },
    },
    Experiment {
        id: "overload",
        title: "10 · Overload: shed background work",
        knobs: &[
            choice("shed", "shed background work", ON_OFF, 1),
            slider("concurrency", "provider concurrency", (1.0, 16.0, 1.0), 4.0, ""),
            slider("rate", "requests per second", (2.0, 30.0, 1.0), 10.0, "/s"),
        ],
        cards: &[CALLS, SUCCEEDED, BACKGROUND_SERVED, SHED, TIMEOUTS, IN_FLIGHT],
        takeaway: "When demand exceeds capacity something must give: shedding the background work on purpose keeps the important work fast instead of letting everything time out together.",
        setup: |e, k| Setup {
            overload: Some((k.get(e, "shed") == 1.0, k.get(e, "concurrency") as u32)),
            rate: k.get(e, "rate"),
            attempts: 2,
            horizon_s: 30.0,
            ..Setup::default()
        },
        sentence: |s| {
            let (shed, slots) = s.overload.unwrap_or((false, 1));
            format!(
                "{} requests per second, each a background call then an important one, to a provider that runs {} at a time (~{:.1} calls/s); background work is {}.",
                s.rate,
                slots,
                slots as f64 / s.mean_call_s(),
                if shed { "shed while the provider is full" } else { "never shed" }
            )
        },
        checks: none,
        happened: |_, f| {
            format!(
                "{} of important requests and {} of background ones were served; {:.1} were shed on purpose and {:.1} attempts timed out.",
                percent(f[SUCCEEDED].mean),
                percent(f[BACKGROUND_SERVED].mean),
                f[SHED].mean,
                f[TIMEOUTS].mean
            )
        },
    },
];

/// The experiment `id`.
pub fn find(id: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.id == id)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::llm::figures::{scenario, traced_run};

    /// Runs `experiment` with `knobs` over 100 replicas: its figures and checks.
    fn run(experiment: &Experiment, knobs: &[(&str, f64)]) -> (Setup, Vec<Summary>, Vec<Check>) {
        let knobs = Knobs(knobs.iter().map(|(k, v)| (k.to_string(), *v)).collect());
        let setup = experiment.setup(&knobs);
        let scenario = scenario(&setup.toml("test", "test", 100, 1)).expect("a valid scenario");
        let horizon = setup.horizon_s;
        let (figures, _) = traced_run(&scenario, &AtomicBool::new(false), &|t| measure(t, horizon)).expect("runs");
        let checks = experiment.checks(&setup, &figures);
        (setup, figures, checks)
    }

    /// Every closed form the page shows holds within the interval it shows, at the
    /// defaults and at other knob settings; and a closed form 5% off would not.
    #[test]
    fn the_closed_forms_hold_within_the_intervals_shown() {
        let cases: &[(&str, &[(&str, f64)])] = &[
            ("healthy", &[]),
            ("healthy", &[("rate", 15.0), ("latency", 1.2)]),
            ("errors", &[]),
            ("errors", &[("error_rate", 0.35), ("arrivals", 1.0)]),
            ("retries", &[]),
            ("retries", &[("attempts", 5.0), ("error_rate", 0.5), ("wait", 0.3)]),
            ("retries", &[("attempts", 1.0)]),
            ("outage", &[]),
            ("outage", &[("attempts", 5.0), ("wait", 0.5)]),
            ("rate-limits", &[]),
            ("rate-limits", &[("rate", 12.0), ("allows", 2.0), ("honour", 0.0)]),
            ("budget", &[]),
            ("budget", &[("budget", 0.0)]),
            ("budget", &[("budget", 0.5), ("attempts", 5.0)]),
        ];
        let (mut checked, mut inside) = (0, 0);
        for (id, knobs) in cases {
            let experiment = find(id).unwrap();
            let (_, figures, checks) = run(experiment, knobs);
            assert!(!checks.is_empty(), "{id} has a closed form");
            for check in &checks {
                let measured = &figures[check.figure];
                // A 95% interval misses the truth one time in twenty; a correct model
                // is within 3.3 standard errors 999 times in 1,000.
                let z = check.z(measured, 100);
                assert!(
                    z.abs() <= 3.3,
                    "{id} {knobs:?}: {} = {} vs {measured:?} (z = {z})",
                    check.what,
                    check.expected
                );
                inside += check.holds(measured) as usize;
                // The comparison can fail: an interval check rejects a value 5% off,
                // a bound rejects one 5% under the mean.
                let off = Check {
                    expected: measured.mean * 0.95 - 1e-3,
                    ..Check { what: String::new(), formula: String::new(), ..*check }
                };
                if measured.mean.abs() > 1e-9
                    && (check.compare == Compare::AtMost || measured.ci_hi - measured.ci_lo < 0.05 * measured.mean)
                {
                    assert!(!off.holds(measured), "{id}: a closed form 5% off would be rejected");
                }
                checked += 1;
            }
        }
        assert!(checked >= 15);
        // And most land inside the 95% interval the page shows (one in twenty may not).
        assert!(inside as f64 >= 0.85 * checked as f64, "{inside} of {checked} inside the 95% interval");
    }

    /// The mechanisms without a closed form still show what they should, each against
    /// its own off switch.
    #[test]
    fn each_mechanism_shows_its_effect() {
        let mean = |id: &str, knobs: &[(&str, f64)], figure: usize| run(find(id).unwrap(), knobs).1[figure].mean;
        // A budget of 0 funds no retries at all.
        assert_eq!(mean("budget", &[("budget", 0.0)], figure::RETRIES), 0.0);
        // Jitter spreads a herd's retries: the busiest quarter-second shrinks.
        let peaks: Vec<f64> = (0..3).map(|j| mean("herd", &[("jitter", j as f64)], figure::PEAK_RETRIES)).collect();
        assert!(peaks[0] > 1.3 * peaks[2] && peaks[1] > peaks[2], "no, equal, full jitter: {peaks:?}");
        // A breaker wastes less time on a dead provider than no breaker.
        let wasted = |on: f64| mean("breaker", &[("breaker", on)], figure::WASTED_S);
        assert!(wasted(1.0) < 0.5 * wasted(0.0));
        // Counting 429s as failures trips the breaker on a healthy provider and serves less.
        let trips = |counts: f64| mean("429-breaker", &[("counts", counts)], figure::TRIPS);
        assert_eq!(trips(0.0), 0.0);
        assert!(trips(1.0) > 1.0);
        let served = |counts: f64| mean("429-breaker", &[("counts", counts)], figure::SUCCEEDED);
        assert!(served(1.0) < served(0.0) - 0.05);
        // Shedding background work serves more of the important work under overload.
        let important = |shed: f64| mean("overload", &[("shed", shed)], figure::SUCCEEDED);
        assert!(important(1.0) > important(0.0) + 0.1, "{} vs {}", important(1.0), important(0.0));
    }

    /// The setup sentence is built from the live knobs.
    #[test]
    fn the_setup_sentence_follows_the_knobs() {
        let retries = find("retries").unwrap();
        let knobs = Knobs([("attempts".to_string(), 4.0), ("wait".to_string(), 0.7)].into_iter().collect());
        let sentence = retries.sentence(&retries.setup(&knobs));
        assert!(sentence.contains("up to 4 attempts") && sentence.contains("after 0.7 s"), "{sentence}");
        // Out-of-range knobs are clamped to the slider.
        let clamped = retries.setup(&Knobs([("attempts".to_string(), 40.0)].into_iter().collect()));
        assert_eq!(clamped.attempts, 5);
    }
}
