//! The gateway's metric table: the global metrics, then a block per call class named
//! from the fixture (`NAME_offered`, `NAME_failed_<reason>`, …), each reason's column
//! built by iterating the engine's [`Reason`] enum. The table is built once per
//! scenario (names interned), so a replica only reads its numbers; values are read
//! with [`Metric::indexed`] by class index.

use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::{GatewayResults, Reason, REASONS};

use crate::models::metrics::{count, fraction, headline, intern, real, Direction, Metric, MetricDef, MetricKind};

const SECONDS_PER_DAY: f64 = 86_400.0;

fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator > 0.0 {
        numerator / denominator
    } else {
        f64::NAN
    }
}

const GLOBAL_METRICS: &[Metric<GatewayResults>] = &[
    count("turns_offered", "user turns that arrived after the warm-up", |r| r.turns_offered as f64),
    count("turns_answered", "turns whose every required call succeeded or was served its fallback", |r| {
        r.turns_answered as f64
    }),
    count("turns_failed", "turns that were not answered", |r| r.turns_failed as f64),
    headline(
        Direction::Higher,
        fraction("turn_completion_ratio", "turns answered ÷ offered", |r| {
            ratio(r.turns_answered as f64, r.turns_offered as f64)
        }),
    ),
    headline(
        Direction::Higher,
        real("answered_turns_per_s", "goodput: turns answered per second of the window", |r| {
            r.turns_answered as f64 / r.window_s
        }),
    ),
    count("calls_offered", "LLM calls the turns made, all classes", |r| r.offered_calls() as f64),
    count("attempts", "attempts sent to the provider, all classes", |r| r.attempts() as f64),
    headline(
        Direction::Lower,
        real("amplification_ratio", "attempts ÷ calls offered", |r| {
            ratio(r.attempts() as f64, r.offered_calls() as f64)
        }),
    ),
    fraction("retry_ratio", "retries ÷ attempts", |r| ratio(r.retries() as f64, r.attempts() as f64)),
    real("useful_usd", "spend on attempts that succeeded, per replica over the measured window (USD)", |r| {
        r.useful_usd()
    }),
    real(
        "wasted_usd",
        "spend on attempts that failed or timed out (billed input and generated output), per replica over the \
         measured window (USD)",
        |r| r.wasted_usd(),
    ),
    real("total_usd", "spend on every attempt, per replica over the measured window (USD)", |r| r.total_usd()),
    real("usd_per_turn", "spend ÷ turns offered (USD a turn, background calls included)", |r| {
        ratio(r.total_usd(), r.turns_offered as f64)
    }),
    headline(
        Direction::Lower,
        real(
            "usd_per_1k_answers",
            "spend ÷ turns answered × 1000: what a thousand answers cost, waste included (USD)",
            |r| ratio(r.total_usd(), r.turns_answered as f64) * 1000.0,
        ),
    ),
    real("usd_per_day", "spend per day at the simulated load: total_usd ÷ the window × 86,400 (USD)", |r| {
        r.total_usd() / r.window_s * SECONDS_PER_DAY
    }),
    real("useful_usd_per_day", "useful spend per day at the simulated load (USD)", |r| {
        r.useful_usd() / r.window_s * SECONDS_PER_DAY
    }),
    real("wasted_usd_per_day", "wasted spend per day at the simulated load (USD)", |r| {
        r.wasted_usd() / r.window_s * SECONDS_PER_DAY
    }),
    count("turns_full", "turns answered with every call served by its own class and tier", |r| r.turns_full() as f64),
    count(
        "turns_degraded",
        "turns answered with a call served its fallback: a cheaper tier, another class, a local answer",
        |r| r.turns_degraded as f64,
    ),
    fraction("full_answer_ratio", "turns answered in full ÷ offered", |r| {
        ratio(r.turns_full() as f64, r.turns_offered as f64)
    }),
    // A headline beside usd_per_1k_answers: a cost per answer is best where answers
    // are cheap, and degraded answers are cheap (issue 72: its * went to a point that
    // degraded 72% of its answers, with nothing beside it to say so).
    headline(
        Direction::Lower,
        fraction("degraded_answer_ratio", "turns answered degraded ÷ turns answered", |r| {
            ratio(r.turns_degraded as f64, r.turns_answered as f64)
        }),
    ),
    real("usd_per_full_answer", "foreground spend of turns answered in full ÷ those turns (USD)", |r| {
        ratio(r.full_usd, r.turns_full() as f64)
    }),
    real("usd_per_degraded_answer", "foreground spend of turns answered degraded ÷ those turns (USD)", |r| {
        ratio(r.degraded_usd, r.turns_degraded as f64)
    }),
    real("failed_turns_usd", "foreground spend of turns that failed, per replica over the window (USD)", |r| {
        r.failed_turns_usd
    }),
    real("turn_p50_s", "this replica's median answered-turn latency (seconds, within 0.1%)", |r| r.turn_quantiles_s[0]),
    real("turn_p95_s", "this replica's p95 of answered-turn latency (seconds, within 0.1%)", |r| r.turn_quantiles_s[1]),
    real("turn_p99_s", "this replica's p99 of answered-turn latency (seconds, within 0.1%)", |r| r.turn_quantiles_s[2]),
    fraction("wasted_ratio", "wasted ÷ total spend", |r| ratio(r.wasted_usd(), r.wasted_usd() + r.useful_usd())),
    count("calls_failed_http_429", "calls that ended on a provider 429, all classes", |r| {
        r.reason(Reason::Http429) as f64
    }),
    count("calls_failed_http_529", "calls that ended on a provider 529, all classes", |r| {
        r.reason(Reason::Http529) as f64
    }),
    count("calls_failed_http_500", "calls that ended on a provider 500, all classes", |r| {
        r.reason(Reason::Http500) as f64
    }),
    count("breaker_trips", "times any class's breaker opened (warm-up included)", |r| {
        r.classes.iter().map(|c| c.breaker_trips).sum::<u64>() as f64
    }),
    count("events", "events handled", |r| r.events as f64),
];

/// Reads a per-class value: `(results, class index)`.
type ClassReader = fn(&GatewayResults, usize) -> f64;

/// The metrics every class reports before its failure reasons, in column order:
/// (suffix, kind, description, reader).
const BEFORE_REASONS: &[(&str, MetricKind, &str, ClassReader)] = &[
    ("offered", MetricKind::Count, "calls of this class the turns made", |r, c| r.classes[c].offered as f64),
    ("attempts", MetricKind::Count, "attempts sent", |r, c| r.classes[c].attempts as f64),
    ("retries", MetricKind::Count, "attempts after the first", |r, c| r.classes[c].retries as f64),
    ("served", MetricKind::Count, "calls that succeeded", |r, c| r.classes[c].served as f64),
    ("failed", MetricKind::Count, "calls not served, for any reason (the sum of the reasons below)", |r, c| {
        r.classes[c].failed as f64
    }),
    ("unserved_ratio", MetricKind::Real, "calls not served ÷ offered", |r, c| {
        ratio(r.classes[c].failed as f64, r.classes[c].offered as f64)
    }),
    (
        "shed_ratio",
        MetricKind::Real,
        "calls refused by any local gate (admission, queue, CoDel, limiter, breaker, quota) ÷ offered",
        |r, c| ratio(r.classes[c].refused_locally() as f64, r.classes[c].offered as f64),
    ),
    ("fallbacks", MetricKind::Count, "failed calls served their fallback", |r, c| r.classes[c].fallbacks as f64),
    ("goodput_rps", MetricKind::Real, "calls served per second of the window", |r, c| {
        r.classes[c].served as f64 / r.window_s
    }),
];

/// The metrics every class reports after its failure reasons, in column order.
const AFTER_REASONS: &[(&str, MetricKind, &str, ClassReader)] = &[
    ("retries_denied_by_budget", MetricKind::Count, "retries the budget refused", |r, c| {
        r.classes[c].retries_denied_by_budget as f64
    }),
    ("retry_ratio", MetricKind::Real, "retries ÷ attempts", |r, c| {
        ratio(r.classes[c].retries as f64, r.classes[c].attempts as f64)
    }),
    ("useful_usd", MetricKind::Real, "spend on attempts that succeeded", |r, c| r.classes[c].useful_usd),
    ("wasted_usd", MetricKind::Real, "spend on attempts that did not", |r, c| r.classes[c].wasted_usd),
    ("tokens_reserved", MetricKind::Count, "output tokens reserved on the client meter", |r, c| {
        r.classes[c].tokens_reserved as f64
    }),
    ("tokens_handed_back", MetricKind::Count, "reserved output tokens reconciled back", |r, c| {
        r.classes[c].tokens_handed_back as f64
    }),
    ("breaker_trips", MetricKind::Count, "times this class's breaker opened (warm-up included)", |r, c| {
        r.classes[c].breaker_trips as f64
    }),
    (
        "breaker_refusals",
        MetricKind::Count,
        "every refusal by the breaker, warm-up included (above the calls it failed when retries hit it)",
        |r, c| r.classes[c].breaker_refusals as f64,
    ),
    // Real, not Count: absent (NaN; null in JSON) for a client that has no limiter.
    ("limit_final", MetricKind::Real, "the adaptive limit at the end (NaN: no limiter)", |r, c| {
        r.classes[c].limit_final.map_or(f64::NAN, f64::from)
    }),
    ("limit_min", MetricKind::Real, "the lowest adaptive limit (NaN: no limiter)", |r, c| {
        r.classes[c].limit_min.map_or(f64::NAN, f64::from)
    }),
    ("limit_max", MetricKind::Real, "the highest adaptive limit (NaN: no limiter)", |r, c| {
        r.classes[c].limit_max.map_or(f64::NAN, f64::from)
    }),
    (
        "retries_denied_by_deadline",
        MetricKind::Count,
        "retries whose backoff plus expected call time did not fit the deadline",
        |r, c| r.classes[c].retries_denied_by_deadline as f64,
    ),
    ("attempt_p95_s", MetricKind::Real, "this replica's p95 of successful attempts, sent to last token (seconds, within 0.1%)", |r, c| {
        r.classes[c].attempt_p95_s
    }),
    (
        "call_p95_s",
        MetricKind::Real,
        "this replica's p95 of every call, entering the stack to its answer or failure: what the caller waited (seconds, within 0.1%)",
        |r, c| r.classes[c].call_p95_s,
    ),
    ("cache_hits", MetricKind::Count, "calls whose cacheable prefix hit the prompt cache", |r, c| {
        r.classes[c].cache_hits as f64
    }),
    ("cached_tokens", MetricKind::Count, "input tokens served from the prompt cache", |r, c| {
        r.classes[c].cached_tokens as f64
    }),
];

/// What a `…_failed_<reason>` column counts. Exhaustive: a new reason does not
/// compile until it is described here.
fn reason_description(reason: Reason) -> &'static str {
    match reason {
        Reason::AdmissionShed => "refused by the ladder",
        Reason::AdmissionInfeasible => "refused: the deadline could not be met",
        Reason::AdmissionFairShare => "refused: tenant over its share",
        Reason::QueueFull => "refused by a full bulkhead queue",
        Reason::QueueDeadline => "deadline expired in the bulkhead queue",
        Reason::CoDel => "dropped by CoDel",
        Reason::Limiter => "refused by the adaptive limiter",
        Reason::BreakerOpen => "refused by an open breaker",
        Reason::LocalQuota => "refused by the client quota",
        Reason::TimeoutConnect => "last attempt: no slot within the connect timeout",
        Reason::TimeoutFirstToken => "last attempt: first-token timeout",
        Reason::TimeoutInterToken => "last attempt: inter-token timeout",
        Reason::TimeoutTotal => "last attempt: its total timeout",
        Reason::TimeoutDeadline => "last attempt: the caller's deadline ran out (not fed to the breaker or limiter)",
        Reason::Http429 => "last attempt: provider 429",
        Reason::Http529 => "last attempt: provider 529 (or its queue gave up)",
        Reason::Http500 => "last attempt: provider 500",
    }
}

/// Class `c`'s block; `main`: its call_p95_s is a headline (what a user waited for
/// the turn's answer).
fn class_block(prefix: &str, c: usize, main: bool) -> Vec<Metric<GatewayResults>> {
    let metric = |suffix: &str, kind, description, read: ClassReader, index| {
        // The class's ratios are shares of its calls or attempts.
        let fraction = suffix.ends_with("_ratio");
        let mut def = MetricDef::new(intern(format!("{prefix}_{suffix}")), kind, description, fraction);
        if main && suffix == "call_p95_s" {
            def.headline = true;
            def.direction = Direction::Lower;
        }
        Metric::indexed(def, read, index)
    };
    let mut block: Vec<_> = BEFORE_REASONS.iter().map(|&(s, k, d, read)| metric(s, k, d, read, c)).collect();
    // The reason's column reads index class × REASONS + reason.
    let by_reason: ClassReader = |r, i| r.classes[i / REASONS].reasons[i % REASONS] as f64;
    block.extend(Reason::ALL.iter().map(|&reason| {
        let suffix = format!("failed_{}", reason.name());
        metric(&suffix, MetricKind::Count, reason_description(reason), by_reason, c * REASONS + reason.index())
    }));
    block.extend(AFTER_REASONS.iter().map(|&(s, k, d, read)| metric(s, k, d, read, c)));
    block
}

/// The metrics every tenant reports (when there are 2 to 16 of them), in column order.
const TENANT_METRICS: &[(&str, MetricKind, &str, ClassReader)] = &[
    ("turns_offered", MetricKind::Count, "turns the tenant offered", |r, t| r.tenants[t].turns_offered as f64),
    ("turns_answered", MetricKind::Count, "the tenant's turns answered (in full or degraded)", |r, t| {
        r.tenants[t].turns_answered as f64
    }),
    ("turn_completion_ratio", MetricKind::Real, "the tenant's turns answered ÷ offered", |r, t| {
        ratio(r.tenants[t].turns_answered as f64, r.tenants[t].turns_offered as f64)
    }),
    ("calls_refused", MetricKind::Count, "the tenant's calls refused by a local gate", |r, t| {
        r.tenants[t].calls_refused as f64
    }),
    ("usd", MetricKind::Real, "spend on the tenant's calls, per replica over the window (USD)", |r, t| {
        r.tenants[t].usd
    }),
    ("usd_per_day", MetricKind::Real, "spend on the tenant's calls per day at the simulated load (USD)", |r, t| {
        r.tenants[t].usd / r.window_s * SECONDS_PER_DAY
    }),
];

/// Every gateway metric: the global ones, then a block per class of `classes` (the
/// engine's class order), then one per tenant (`tenants` of 2 to
/// [`MAX_TENANT_RESULTS`](stampede_engine::models::gateway::MAX_TENANT_RESULTS));
/// `main` is the class whose call p95 is a headline.
pub(super) fn metric_table(classes: &[&str], main: Option<usize>, tenants: u32) -> Vec<Metric<GatewayResults>> {
    let mut table = GLOBAL_METRICS.to_vec();
    for (c, name) in classes.iter().enumerate() {
        table.extend(class_block(name, c, main == Some(c)));
    }
    if (2..=stampede_engine::models::gateway::MAX_TENANT_RESULTS).contains(&tenants) {
        for t in 0..tenants as usize {
            table.extend(TENANT_METRICS.iter().map(|&(suffix, kind, description, read)| {
                let fraction = suffix.ends_with("_ratio");
                Metric::indexed(
                    MetricDef::new(intern(format!("tenant_{t}_{suffix}")), kind, description, fraction),
                    read,
                    t,
                )
            }));
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every class has its block, each reason its column, read from its own counter.
    #[test]
    fn reason_columns_read_their_own_reason() {
        const CLASS_NAMES: [&str; 3] = ["classify", "answer", "answer_fallback"];
        let table = metric_table(&CLASS_NAMES, Some(1), 1);
        let mut results = GatewayResults { classes: vec![Default::default(); 3], ..GatewayResults::default() };
        for (c, class) in results.classes.iter_mut().enumerate() {
            for (i, count) in class.reasons.iter_mut().enumerate() {
                *count = (c * 100 + i) as u64;
            }
        }
        for (c, class) in CLASS_NAMES.iter().enumerate() {
            for &reason in Reason::ALL {
                let name = format!("{class}_failed_{}", reason.name());
                let metric = table.iter().find(|m| m.def.name == name).expect("a column per reason");
                assert_eq!(metric.value(&results), (c * 100 + reason.index()) as f64, "{name}");
            }
        }
        let per_class = BEFORE_REASONS.len() + REASONS + AFTER_REASONS.len();
        assert_eq!(table.len(), GLOBAL_METRICS.len() + CLASS_NAMES.len() * per_class);
        let headlines: Vec<&str> = table.iter().filter(|m| m.def.headline).map(|m| m.def.name).collect();
        assert!(headlines.contains(&"answer_call_p95_s") && !headlines.contains(&"classify_call_p95_s"));
    }
}
