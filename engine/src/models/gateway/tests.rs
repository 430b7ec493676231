//! The gateway's wiring, tested on one generous tier with fixed token counts.

use super::*;
use crate::components::provider::TierSpec;
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::kernel::Named;
use crate::measurement::trace::{Trace, TraceKind};
use crate::models::gateway::results;
use crate::policy::admission::Ladder;
use crate::policy::backoff::Backoff;
use crate::policy::breaker::BreakerConfig;
use crate::policy::bulkhead::CoDelConfig;
use crate::policy::bulkhead::QueueOrder;
use crate::policy::classify::RetryClassifier;
use crate::policy::limiter::{AimdConfig, GradientConfig, LimiterKind, SampleWindow};
use crate::policy::quota::QuotaConfig;

const S: Nanos = NANOS_PER_SEC;

// The seed's classes, in the order `params` lists them.
const GUARD: usize = 0;
const REWRITE: usize = 1;
const ANSWER: usize = 2;
const THINK: usize = 3;
const TITLE: usize = 4;
const ANSWER_FALLBACK: usize = 5;
const CLASSES: usize = 6;
const CLASS_NAMES: [&str; CLASSES] = ["guard", "rewrite", "answer", "think", "title", "answer_fallback"];

/// The seed's turn: guard → rewrite (its share) → think (its share) or answer → title
/// (its share, in the background); each call's probability is its class's share.
fn seed_plan() -> TurnPlan {
    let call = |class| PlannedCall { class, probability: None, otherwise: None, required: true, needs: None };
    TurnPlan::new(vec![
        (vec![call(GUARD)], false),
        (vec![call(REWRITE)], false),
        (vec![PlannedCall { otherwise: Some(ANSWER), ..call(THINK) }], false),
        (vec![call(TITLE)], true),
    ])
}

/// One latency histogram per latency the replica records.
fn latency_histograms(p: &GatewayParams) -> Vec<LatencyHistogram> {
    (0..p.latency_histograms()).map(|_| LatencyHistogram::new()).collect()
}

/// One generous tier and five classes with fixed token counts (sd 0), so that
/// token arithmetic is exact; only guard → answer runs unless a test says so.
fn params(gates: &[Gate]) -> GatewayParams {
    let spec = TierSpec {
        rpm: 1_000_000,
        itpm: 1_000_000_000,
        otpm: 1_000_000_000,
        prefill_tokens_per_s: 10_000.0,
        decode_tokens_per_s: 100.0,
        base_latency_s: 0.1,
        server_slots: 1_000,
        burst_s: [60.0; 3],
    };
    let class = ClassParams {
        tier: 0,
        share: 0.0,
        input_tokens: (1_000.0, 0.0),
        output_tokens: (50.0, 0.0),
        max_tokens: 200,
        streamed: false,
        deadline: 30 * S,
        timeouts: Timeouts { connect: 2 * S, first_token: 10 * S, inter_token: None, total: 20 * S },
        max_attempts: 2,
        shed_from_rung: 5,
        has_fallback: false,
        fallback: None,
        latency: true,
        bulkhead_slots: 500,
        pressure_slots: 500,
        bulkhead_queue: 500,
        backoff: Backoff::FullJitter { base: S / 10, cap: S },
        cache_hit_ratio: 0.0,
        cacheable_prefix: 0.0,
    };
    let answer = ClassParams { streamed: true, shed_from_rung: 4, ..class };
    GatewayParams {
        tiers: vec![TierParams { spec, usd_per_mtok_in: 1.0, usd_per_mtok_out: 5.0, error_rate: 0.0, ttft: None }],
        classes: vec![
            ClassParams { share: 1.0, ..class },
            class,
            answer,
            class,
            ClassParams { shed_from_rung: 1, ..class },
            ClassParams { latency: false, ..answer },
        ],
        class_names: CLASS_NAMES.to_vec(),
        plan: seed_plan(),
        turns_per_s: 20.0,
        load: None,
        call_arrivals: Vec::new(),
        arrivals: Arrivals::Poisson,
        tenants: 1,
        hot_tenant_share: 0.0,
        instances: 1,
        client: Client::Stack,
        gates: gates.to_vec(),
        ladder: Ladder::default(),
        limiter: LimiterKind::Fixed { limit: 1_000 },
        limiter_scope: LimiterScope::Class,
        limiter_window: None,
        breaker: BreakerConfig {
            window: crate::policy::breaker::SlidingWindow::Time { window: 60 * S, buckets: 12 },
            minimum_calls: 20,
            failure_rate_threshold: 0.3,
            slow_call_rate_threshold: 2.0,
            slow_call_duration: 20 * S,
            open_duration: 20 * S,
            open_duration_multiplier: 1.0,
            max_open_duration: 20 * S,
            half_open_probes: 3,
            count_rate_limited: false,
        },
        quota: QuotaConfig { headroom: 1.0, longest_wait: 2 * S, instances: 1, coordinated: true },
        reconcile: true,
        retry_budget: None,
        classifier: RetryClassifier::default(),
        no_retry_past_delivered: 0.8,
        bulkhead_order: QueueOrder::Lifo,
        codel: None,
        incidents: Vec::new(),
        cache_itpm_weight: 0.1,
        cache_price_weight: 0.1,
        warmup: 0,
        horizon: 60 * S,
        series_bucket: S,
    }
}

fn run(p: GatewayParams) -> GatewayResults {
    let mut histograms = latency_histograms(&p);
    Gateway::new(p, 7, 0, &mut histograms).run()
}

/// The seed's arithmetic for a naive client: with failure probability p and up to
/// n immediate attempts, attempts per call = (1 − pⁿ)/(1 − p) and a call still
/// fails with probability pⁿ.
#[test]
fn naive_attempts_follow_the_geometric_series() {
    let mut p = params(&[]);
    p.client = Client::Naive { attempts: 3, timeout: 60 * S };
    p.tiers[0].error_rate = 0.3;
    p.turns_per_s = 100.0;
    p.horizon = 200 * S;
    let r = run(p);
    let calls = r.offered_calls() as f64;
    let attempts_per_call = r.attempts() as f64 / calls;
    let expected = (1.0 - 0.3f64.powi(3)) / (1.0 - 0.3);
    assert!((attempts_per_call - expected).abs() < 0.01, "{attempts_per_call} vs {expected}");
    let failed = r.reason(Reason::Http500) as f64 / calls;
    assert!((failed - 0.027).abs() < 0.004, "{failed} vs 0.027");
    // Without a fallback a failed guard fails its turn.
    assert_eq!(r.turns_offered, r.turns_answered + r.turns_failed);
    assert!(r.turns_failed > 0);
}

/// ⑥ → ④ minus 429s: on a healthy tier whose request meter is far too small, the
/// breaker stays closed unless 429s are counted as failures.
#[test]
fn rate_limits_reach_the_breaker_only_when_counted() {
    let mut p = params(&[Gate::Breaker, Gate::Retry]);
    p.tiers[0].spec.rpm = 600; // 10 requests/s against about 40 calls/s
    p.classes[GUARD].max_attempts = 1;
    p.classes[ANSWER].max_attempts = 1;
    let excluded = run(p.clone());
    p.breaker.count_rate_limited = true;
    let counted = run(p);
    for r in [&excluded, &counted] {
        assert!(r.reason(Reason::Http429) > 200, "the meter answers 429s: {}", r.reason(Reason::Http429));
    }
    assert_eq!(excluded.classes[GUARD].breaker_trips, 0);
    assert_eq!(excluded.reason(Reason::BreakerOpen), 0);
    assert!(counted.classes[GUARD].breaker_trips > 0);
    assert!(counted.reason(Reason::BreakerOpen) > 200, "{}", counted.reason(Reason::BreakerOpen));
}

/// ⑥ → ③: a streamed call feeds its limiter the time to first token. AIMD counts a
/// sample slower than 5 s as a drop: answer streams for 20 s after a 0.2 s first
/// token and its limit grows; the same call not streamed is sampled at 20 s and
/// its limit falls.
#[test]
fn the_limiter_learns_time_to_first_token_for_streams_and_the_whole_call_otherwise() {
    let mut p = params(&[Gate::Adaptive, Gate::Retry]);
    p.limiter = LimiterKind::Aimd(AimdConfig { initial: 20.0, min: 1.0, max: 1_000.0, ..AimdConfig::default() });
    p.classes[ANSWER].output_tokens = (2_000.0, 0.0);
    p.classes[ANSWER].max_tokens = 4_000;
    p.classes[ANSWER].timeouts.total = 60 * S;
    let streamed = run(p.clone());
    assert!(streamed.classes[ANSWER].limit_max > Some(20), "{:?}", streamed.classes[ANSWER]);
    assert_eq!(streamed.classes[ANSWER].limit_min, Some(20));
    p.classes[ANSWER].streamed = false;
    let whole = run(p);
    assert_eq!(whole.classes[ANSWER].limit_max, Some(20));
    assert!(whole.classes[ANSWER].limit_min < Some(10), "{:?}", whole.classes[ANSWER]);
}

/// ⑥ → ⑤: reconciliation hands back exactly max_tokens − output per served call.
#[test]
fn reconciliation_hands_back_the_unused_reservation() {
    let p = params(&[Gate::Quota, Gate::Retry]);
    let r = run(p.clone());
    let guard = r.classes[GUARD];
    assert!(guard.served > 1_000 && guard.failed == 0);
    assert_eq!(guard.tokens_reserved, guard.served * 200);
    assert_eq!(guard.tokens_handed_back, guard.served * 150);
    let mut p = p;
    p.reconcile = false;
    let r = run(p);
    assert_eq!(r.classes[GUARD].tokens_handed_back, 0);
}

/// Without reconciliation the output meter holds every reservation in full, so it
/// caps the rate at OTPM / max_tokens instead of OTPM / output.
#[test]
fn an_unreconciled_reservation_throttles_to_otpm_over_max_tokens() {
    let mut p = params(&[Gate::Quota, Gate::Retry]);
    p.tiers[0].spec.otpm = 120_000; // 2,000 tokens/s: 10 calls/s of max 200, 40 of output 50
    p.classes[GUARD].deadline = 3 * S;
    p.warmup = 60 * S; // the meter's one-minute burst is spent by then
    p.horizon = 180 * S;
    let reconciled = run(p.clone());
    p.reconcile = false;
    let unreconciled = run(p);
    let window = 120.0;
    let rate = |r: &GatewayResults| (r.classes[GUARD].served + r.classes[ANSWER].served) as f64 / window;
    // Offered: 20 guard + 20 answer calls/s; reconciled, 40/s fits exactly.
    assert!(rate(&reconciled) > 36.0, "{}", rate(&reconciled));
    assert!((rate(&unreconciled) - 10.0).abs() < 0.5, "{}", rate(&unreconciled));
}

/// ⑤ → ①: as the quota meter drains, pressure rises and the ladder sheds the class
/// on its first rung; with quota to spare it sheds nothing.
#[test]
fn quota_pressure_drives_the_ladder() {
    let mut p = params(&[Gate::Admission, Gate::Quota, Gate::Retry]);
    p.classes[TITLE].share = 1.0;
    p.tiers[0].spec.rpm = 1_800; // 30 requests/s: about 60 are offered
    p.horizon = 120 * S;
    let pressed = run(p.clone());
    assert!(pressed.classes[TITLE].reasons[Reason::AdmissionShed as usize] > 100, "{:?}", pressed.classes[TITLE]);
    assert_eq!(pressed.classes[GUARD].reasons[Reason::AdmissionShed as usize], 0, "guard has no rung");
    p.tiers[0].spec.rpm = 60_000;
    let relaxed = run(p);
    assert_eq!(relaxed.reason(Reason::AdmissionShed), 0);
}

/// Order is semantics: a quota gate below the attempt loop reserves per attempt,
/// above it once per call.
#[test]
fn a_quota_gate_inside_the_attempt_loop_reserves_per_attempt() {
    let mut p = params(&[Gate::Retry, Gate::Quota]);
    p.tiers[0].error_rate = 0.5;
    let per_attempt = run(p.clone());
    let guard = per_attempt.classes[GUARD];
    assert!(guard.retries > 100);
    assert_eq!(guard.tokens_reserved, guard.attempts * 200);
    p.gates = vec![Gate::Quota, Gate::Retry];
    let per_call = run(p).classes[GUARD];
    assert!(per_call.retries > 100);
    assert_eq!(per_call.tokens_reserved, per_call.offered * 200);
}

/// ① tenant share: under pressure, a tenant holding more than its share of the
/// in-flight capacity is refused; without pressure the share is not enforced.
#[test]
fn a_hot_tenant_is_held_to_its_fair_share_under_pressure() {
    let mut p = params(&[Gate::Admission, Gate::Retry]);
    p.tenants = 4;
    p.turns_per_s = 40.0;
    // An overloaded tier (20 slots for about 28 calls in service): attempts pile up
    // and the in-flight pressure passes the first rung at 0.8 × 39 slots.
    p.tiers[0].spec.server_slots = 20;
    for class in &mut p.classes {
        (class.bulkhead_slots, class.pressure_slots) = (1, 1);
    }
    for class in [GUARD, ANSWER, ANSWER_FALLBACK] {
        (p.classes[class].bulkhead_slots, p.classes[class].pressure_slots) = (18, 18);
        // capacity 57: a fair share of 15 in flight
    }
    p.hot_tenant_share = 0.9;
    let pressed = run(p.clone());
    p.turns_per_s = 5.0; // the tier keeps up: no pressure, no share to enforce
    let relaxed = run(p);
    let share = |r: &GatewayResults| r.reason(Reason::AdmissionFairShare);
    assert!(share(&pressed) > 100, "{}", share(&pressed));
    assert_eq!(share(&relaxed), 0);
    assert!(relaxed.turns_offered > 200 && relaxed.turns_answered > 200);
}

/// Order is semantics, again: a breaker below the attempt loop is asked on every
/// try, so during an outage the loop retries into the open circuit and each try is
/// refused again; a breaker above the loop refuses each call once.
#[test]
fn a_loop_above_the_breaker_retries_into_the_open_circuit() {
    let mut p = params(&[Gate::Retry, Gate::Breaker]);
    p.tiers[0].error_rate = 1.0;
    p.classes[GUARD].max_attempts = 3;
    let inside = run(p.clone()).classes[GUARD];
    p.gates = vec![Gate::Breaker, Gate::Retry];
    let outside = run(p).classes[GUARD];
    let refused = |c: &ClassResults| c.reasons[Reason::BreakerOpen as usize];
    assert!(refused(&outside) > 500, "{outside:?}");
    assert_eq!(outside.breaker_refusals, refused(&outside), "one refusal per refused call");
    assert!(inside.breaker_refusals > refused(&inside) + 500, "{inside:?}");
    // Tries, not only attempts sent, are bounded by max_attempts.
    assert!(inside.attempts <= 3 * inside.offered);
}

/// Every counted call ends served or failed for exactly one reason, every turn
/// answered or failed, whatever the stack (asserted inside `finish`); the same
/// seed gives the same results and another replica different ones.
#[test]
fn the_full_stack_drains_and_reproduces() {
    let gates =
        [Gate::Admission, Gate::Bulkhead, Gate::Adaptive, Gate::Breaker, Gate::Quota, Gate::Retry, Gate::Fallback];
    let mut p = params(&gates);
    p.limiter = LimiterKind::Gradient(GradientConfig { initial: 40.0, min: 1.0, ..GradientConfig::default() });
    p.limiter_window = Some(SampleWindow::default());
    p.codel = Some(CoDelConfig { target: S / 20, interval: S });
    p.tiers[0].spec.server_slots = 30;
    p.tiers[0].error_rate = 0.05;
    p.classes[REWRITE].share = 0.5;
    p.classes[TITLE].share = 0.3;
    p.classes[THINK].share = 0.1;
    p.classes[GUARD].has_fallback = true;
    p.retry_budget = Some(0.1);
    p.incidents = vec![Incident { tier: 0, kind: IncidentKind::BROWNOUT, start: 20 * S, end: 35 * S }];
    let a = run(p.clone());
    // Debug text: NaN p95s of an empty class compare unequal as floats.
    assert_eq!(format!("{a:?}"), format!("{:?}", run(p.clone())));
    let mut histograms = latency_histograms(&p);
    let other = Gateway::new(p, 7, 1, &mut histograms).run();
    assert_ne!(a.turns_answered, other.turns_answered);
    assert!(a.turns_failed > 0 && a.turns_answered > 0);
}

/// Overlapping incidents on one tier compose (issue 44, item 1): two outages of 20–30 s
/// and 25–35 s keep the tier out until 35 s, as one outage of 20–35 s (the first to end
/// used to restore the tier); two brownouts give their product of health and latency
/// and 1 − (1 − r₁)(1 − r₂) of errors; two quota steps multiply; coordinator outages
/// likewise. Each equals its composed single incident, replica for replica.
#[test]
fn overlapping_incidents_on_one_tier_compose() {
    let same = |two: Vec<Incident>, one: Vec<Incident>, what: &str| {
        let mut p = params(&[Gate::Breaker, Gate::Quota, Gate::Retry]);
        p.incidents = two;
        let a = run(p.clone());
        p.incidents = one;
        let b = run(p);
        // The same but for the extra incident's two events.
        let events = |r: &GatewayResults| GatewayResults { events: 0, ..r.clone() };
        assert_eq!(format!("{:?}", events(&a)), format!("{:?}", events(&b)), "{what}");
        a
    };
    let at = |kind, from: u64, to: u64| Incident { tier: 0, kind, start: from * S, end: to * S };
    let outage = IncidentKind::Outage;
    let a = same(vec![at(outage, 20, 30), at(outage, 25, 35)], vec![at(outage, 20, 35)], "outages");
    assert!(a.turns_failed > 0);
    let brownout = |health, error_rate, latency_factor| IncidentKind::Brownout { health, error_rate, latency_factor };
    same(
        vec![at(brownout(0.5, 0.5, 2.0), 20, 30), at(brownout(0.5, 0.5, 3.0), 20, 30)],
        vec![at(brownout(0.25, 0.75, 6.0), 20, 30)],
        "brownouts",
    );
    let step = |scale: f64| IncidentKind::RateLimitStep { scales: [scale; 3] };
    same(vec![at(step(0.5), 20, 30), at(step(0.5), 20, 30)], vec![at(step(0.25), 20, 30)], "quota steps");
    let coordinator = IncidentKind::CoordinatorOutage;
    same(vec![at(coordinator, 20, 30), at(coordinator, 25, 35)], vec![at(coordinator, 20, 35)], "coordinator outages");
}

/// Repeat trips lengthen the open state (Resilience4j's exponential wait interval):
/// a dead tier is probed less and less often.
#[test]
fn a_dead_tier_is_probed_less_and_less_often() {
    let trips = |multiplier: f64| {
        let mut p = params(&[Gate::Breaker, Gate::Retry]);
        p.horizon = 300 * S;
        p.turns_per_s = 5.0;
        p.breaker.open_duration_multiplier = multiplier;
        p.breaker.max_open_duration = 300 * S;
        p.incidents = vec![Incident { tier: 0, kind: IncidentKind::Outage, start: 0, end: 400 * S }];
        run(p).classes[GUARD].breaker_trips
    };
    let (constant, growing) = (trips(1.0), trips(1.5));
    // 20 s open: a probe about every 20 s; growing 20, 30, 45, 67.5, 101 s: five at most.
    assert!(constant >= 10, "{constant}");
    assert!(growing <= 6 && growing < constant / 2, "{growing} trips growing vs {constant} constant");
}

/// A timeout caused by the caller's own deadline is its own reason and teaches the
/// breaker nothing; a retry whose backoff plus expected call time overruns the
/// deadline is not made, and counted.
#[test]
fn the_callers_deadline_is_not_the_providers_fault() {
    let mut p = params(&[Gate::Breaker, Gate::Retry]);
    // Answer is slow (≈ 8 s) and its deadline is 3 s, below its 20 s attempt timeout.
    p.tiers[0].spec.decode_tokens_per_s = 6.0;
    p.classes[ANSWER].deadline = 3 * S;
    p.classes[ANSWER].streamed = false;
    p.breaker.minimum_calls = 5;
    let r = run(p);
    let answer = r.classes[ANSWER];
    assert!(answer.reasons[Reason::TimeoutDeadline as usize] > 100, "{answer:?}");
    assert_eq!(answer.reasons[Reason::TimeoutTotal as usize], 0, "{answer:?}");
    assert_eq!(answer.breaker_trips, 0, "deadline timeouts are not provider failures: {answer:?}");
    assert!(answer.retries_denied_by_deadline > 100, "no retry fits 3 s after a 3 s attempt: {answer:?}");
    assert_eq!(answer.retries, 0, "{answer:?}");
}

/// Histograms count what the counts count: from the warm-up on.
#[test]
fn histograms_count_from_the_warmup_like_the_counts() {
    let mut p = params(&[Gate::Retry]);
    p.warmup = 20 * S;
    p.classes[REWRITE].share = 0.5;
    let mut histograms = latency_histograms(&p);
    let r = Gateway::new(p, 7, 0, &mut histograms).run();
    for class in [GUARD, REWRITE, ANSWER] {
        let histograms_of = results::ClassHistograms::from(3 + results::ClassHistograms::LEN * class);
        let c = r.classes[class];
        assert_eq!(histograms[histograms_of.total].count(), c.served, "{}", CLASS_NAMES[class]);
        // Calls by ending: served, failed, all — every counted call in exactly one.
        let [served, failed, all] = [0, 1, 2].map(|k| histograms[histograms_of.total + 1 + k].count());
        assert_eq!((served, failed, all), (c.served, c.failed, c.served + c.failed), "{}", CLASS_NAMES[class]);
        assert!(c.served > 100);
    }
    assert_eq!(histograms[results::TURN_HISTOGRAM].count(), r.turns_answered);
    assert_eq!(histograms[results::TURN_HISTOGRAM + 1].count(), r.turns_failed);
    assert_eq!(histograms[results::TURN_HISTOGRAM + 2].count(), r.turns_answered + r.turns_failed);
    assert!(r.classes[ANSWER].attempt_p95_s > 0.0 && r.classes[ANSWER].call_p95_s >= r.classes[ANSWER].attempt_p95_s);
}

/// When the quota coordinator fails, a coordinated quota falls back to per-instance
/// meters of 1/N each. They know nothing of what the fleet already spent: at an
/// overload, the fleet admits a fresh burst the provider's meter has no room for, and
/// pays in provider 429s.
#[test]
fn a_failed_coordinator_over_admits_and_the_provider_answers_429() {
    let run_with = |outage: bool| {
        let mut p = params(&[Gate::Quota]);
        p.instances = 12;
        p.quota.instances = 12;
        // 40 calls/s (guard and answer at 20 turns/s) against 30/s: the meters bind.
        p.tiers[0].spec.rpm = 1_800;
        p.horizon = 300 * S;
        p.quota.longest_wait = 0;
        if outage {
            p.incidents =
                vec![Incident { tier: 0, kind: IncidentKind::CoordinatorOutage, start: 100 * S, end: 200 * S }];
        }
        run(p)
    };
    let (coordinated, split) = (run_with(false), run_with(true));
    let (before, after) = (coordinated.reason(Reason::Http429), split.reason(Reason::Http429));
    assert!(coordinated.reason(Reason::LocalQuota) > 300, "the meters bind: {coordinated:?}");
    eprintln!(
        "429s: {after} with the outage, {before} without; local refusals {} and {}",
        split.reason(Reason::LocalQuota),
        coordinated.reason(Reason::LocalQuota)
    );
    assert!(after > before + 500, "{after} calls ended on a provider 429 with the outage, {before} without");
}

/// Prompt caching: a hit's cached prefix is metered at the cache weight and billed
/// at the cache price.
#[test]
fn cached_prefixes_are_billed_and_metered_at_the_cache_weight() {
    let spend = |hit_ratio: f64| {
        let mut p = params(&[Gate::Quota, Gate::Retry]);
        for class in &mut p.classes {
            class.cache_hit_ratio = hit_ratio;
            class.cacheable_prefix = 0.8;
        }
        run(p)
    };
    let (cold, warm) = (spend(0.0), spend(1.0));
    let answer = warm.classes[ANSWER];
    assert_eq!(answer.cache_hits, answer.offered, "every call hits at ratio 1");
    assert_eq!(answer.cached_tokens, answer.offered * 800, "80% of 1,000 input tokens");
    assert_eq!(cold.classes[ANSWER].cache_hits, 0);
    // Input: 1,000 tokens at $1/M cold; 200 + 800 × 0.1 = 280 warm. Output 50 at $5/M.
    let per_call = |r: &ClassResults| (r.useful_usd + r.wasted_usd) / r.attempts as f64;
    assert!((per_call(&cold.classes[ANSWER]) - (1_000.0 + 250.0) / 1e6).abs() < 1e-9);
    assert!((per_call(&answer) - (280.0 + 250.0) / 1e6).abs() < 1e-9);
}

/// The full stack under a brownout, with a warm-up: every gate parks, refuses and
/// releases, the breaker trips, and calls straddle the warm-up.
fn busy_params() -> GatewayParams {
    let gates =
        [Gate::Admission, Gate::Bulkhead, Gate::Adaptive, Gate::Breaker, Gate::Quota, Gate::Retry, Gate::Fallback];
    let mut p = params(&gates);
    p.limiter = LimiterKind::Gradient(GradientConfig { initial: 20.0, min: 1.0, ..GradientConfig::default() });
    p.codel = Some(CoDelConfig { target: S / 20, interval: S });
    p.tiers[0].spec.server_slots = 20;
    p.tiers[0].spec.rpm = 3_000;
    p.tiers[0].error_rate = 0.05;
    p.classes[REWRITE].share = 0.5;
    p.classes[TITLE].share = 0.3;
    p.classes[THINK].share = 0.1;
    p.classes.iter_mut().for_each(|c| (c.bulkhead_slots, c.pressure_slots, c.bulkhead_queue) = (12, 12, 8));
    p.retry_budget = Some(0.2);
    p.breaker.minimum_calls = 10;
    p.turns_per_s = 12.0;
    p.warmup = 5 * S;
    p.horizon = 40 * S;
    p.incidents = vec![Incident { tier: 0, kind: IncidentKind::Outage, start: 15 * S, end: 25 * S }];
    p
}

fn traced(p: GatewayParams, replica: u64) -> (GatewayResults, GatewaySeries, Trace) {
    let mut histograms = latency_histograms(&p);
    let (results, series, trace) = Gateway::new(p, 7, replica, &mut histograms).traced().run_all();
    (results, series, trace.expect("traced"))
}

/// Every call's attempts, waits and refusals tile its life; the trace's counted calls,
/// attempts and failures by reason are the replica's counts; tracing changes nothing.
#[test]
fn a_trace_tiles_every_call_and_adds_up_to_the_results() {
    for (name, p) in [
        ("busy stack", busy_params()),
        ("naive", {
            let mut p = busy_params();
            p.client = Client::Naive { attempts: 3, timeout: 10 * S };
            p
        }),
    ] {
        let (results, series, trace) = traced(p.clone(), 0);
        trace.check_tiling().unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut histograms = latency_histograms(&p);
        let (untraced, untraced_series, none) = Gateway::new(p, 7, 0, &mut histograms).run_all();
        assert!(none.is_none());
        assert_eq!(format!("{results:?}"), format!("{untraced:?}"), "{name}: tracing changes nothing");
        assert_eq!(series, untraced_series);
        let count = |kind: TraceKind, class: &str, outcome: Option<&str>| {
            trace
                .rows
                .iter()
                .filter(|r| r.kind == kind && r.counted && r.class == class && outcome.is_none_or(|o| r.outcome == o))
                .count() as u64
        };
        let mut seen = [0u64; 3];
        for (class, c) in CLASS_NAMES.iter().zip(&results.classes) {
            assert_eq!(count(TraceKind::Call, class, None), c.offered, "{name} {class}: calls");
            assert_eq!(count(TraceKind::Call, class, Some("served")), c.served, "{name} {class}: served");
            assert_eq!(count(TraceKind::Attempt, class, None), c.attempts, "{name} {class}: attempts");
            for reason in Reason::ALL {
                let failed = count(TraceKind::Call, class, Some(reason.name()));
                assert_eq!(failed, c.reasons[reason.index()], "{name} {class}: {}", reason.name());
            }
            seen[0] += c.attempts;
            seen[1] += c.refused_locally();
            seen[2] += c.retries;
        }
        let refusals_expected = name != "naive"; // the naive client has no gate to refuse it
        assert!(seen[0] > 0 && seen[2] > 0 && (seen[1] > 0) == refusals_expected, "{name}: {seen:?}");
        // Attempts in the series are every attempt, warm-up included.
        let attempts = trace.rows.iter().filter(|r| r.kind == TraceKind::Attempt).count() as u64;
        let in_series: u64 = series.attempts.iter().sum();
        let after_horizon = trace.rows.iter().filter(|r| r.kind == TraceKind::Attempt && r.start >= 40 * S).count();
        assert_eq!(in_series + after_horizon as u64, attempts, "{name}");
        // Per tier, the same attempts split by the tier that served them, bucket by bucket.
        for (bucket, &total) in series.attempts.iter().enumerate() {
            let by_tier: u64 = series.tier_attempts.iter().map(|tier| tier[bucket]).sum();
            assert_eq!(by_tier, total, "{name}: bucket {bucket}");
        }
        assert_eq!(trace.rows.iter().filter(|r| r.kind == TraceKind::Incident).count(), 1);
    }
    let (busy, _, trace) = traced(busy_params(), 0);
    let opened = trace.rows.iter().filter(|r| r.kind == TraceKind::State && r.outcome == "open").count() as u64;
    let trips: u64 = busy.classes.iter().map(|c| c.breaker_trips).sum();
    assert!(trips > 0);
    assert_eq!(opened, trips, "every trip is an opening in the trace");
    let waits: std::collections::BTreeSet<&str> =
        trace.rows.iter().filter(|r| r.kind == TraceKind::Wait).map(|r| r.outcome).collect();
    assert!(waits.contains("backoff") && waits.contains("bulkhead"), "{waits:?}");
}

/// A retry budget of 0 funds no retry at all (the reference's Learn page read 0 as
/// "no limit").
#[test]
fn a_retry_budget_of_zero_funds_no_retries() {
    let mut p = params(&[Gate::Retry]);
    p.tiers[0].error_rate = 0.3;
    p.retry_budget = Some(0.0);
    let results = run(p.clone());
    assert_eq!(results.retries(), 0);
    assert!(results.classes[GUARD].retries_denied_by_budget > 0);
    p.retry_budget = Some(0.1);
    assert!(run(p).retries() > 0);
}

/// Even arrivals are evenly spaced; a guard share below 1 skips the guard.
#[test]
fn even_arrivals_and_a_skipped_guard() {
    let mut p = params(&[Gate::Retry]);
    p.arrivals = Arrivals::Even;
    p.turns_per_s = 4.0;
    p.horizon = 10 * S;
    p.classes[GUARD].share = 0.0;
    let (results, _, trace) = traced(p, 0);
    // Arrivals at 0.25, 0.5, … 9.75 s.
    assert_eq!(results.turns_offered, 39);
    assert_eq!(results.classes[GUARD].offered, 0);
    assert_eq!(results.classes[ANSWER].offered, 39);
    let mut starts: Vec<Nanos> = trace.rows.iter().filter(|r| r.kind == TraceKind::Call).map(|r| r.start).collect();
    starts.sort_unstable();
    assert!(starts.iter().enumerate().all(|(i, &t)| t == (i as u64 + 1) * S / 4), "{starts:?}");
}

/// "Latency ×5 for 20 s": a brownout of health 1, no extra errors and latency factor
/// 5 makes the tier's attempts (measured on the trace, at a load far below its slots)
/// five times as long inside the window, within the interval of the ratio, and
/// leaves them as they were outside it.
#[test]
fn a_brownout_latency_factor_of_five_multiplies_attempt_durations_by_five() {
    let mut p = params(&[Gate::Retry]);
    p.horizon = 60 * S;
    p.turns_per_s = 5.0;
    let slow = IncidentKind::Brownout { health: 1.0, error_rate: 0.0, latency_factor: 5.0 };
    p.incidents = vec![Incident { tier: 0, kind: slow, start: 20 * S, end: 40 * S }];
    let (_, _, trace) = traced(p, 0);
    // Attempts begun and ended on one side of each edge of the window.
    let durations = |from: Nanos, to: Nanos| -> Vec<f64> {
        trace
            .rows
            .iter()
            .filter(|r| r.kind == TraceKind::Attempt && r.outcome == "200" && r.start >= from && r.end < to)
            .map(|r| (r.end - r.start) as f64)
            .collect()
    };
    let stats = |v: &[f64]| {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, (var / n).sqrt())
    };
    let (inside, outside) = (durations(20 * S, 40 * S), [durations(0, 20 * S), durations(40 * S, 60 * S)].concat());
    assert!(inside.len() > 100 && outside.len() > 200, "{} {}", inside.len(), outside.len());
    let ((mi, si), (mo, so)) = (stats(&inside), stats(&outside));
    let ratio = mi / mo;
    // Delta method: the ratio's standard error (measured: 5.15 ± 0.14 over 115 and 404 attempts).
    let se = ratio * ((si / mi).powi(2) + (so / mo).powi(2)).sqrt();
    assert!((ratio - 5.0).abs() < 3.0 * se, "ratio {ratio:.3} ± {se:.3}");
    assert!(se < 0.25, "the test could not tell 5 from 4: se {se}");
}

/// A provider halving its RPM for a while halves what it admits (the rest come back
/// as 429s).
#[test]
fn a_rate_limit_step_halves_the_admitted_rate_while_it_lasts() {
    let admitted = |step: bool| {
        let mut p = params(&[]);
        p.horizon = 240 * S;
        p.turns_per_s = 20.0;
        p.tiers[0].spec.rpm = 600; // 10 calls a second; the turns ask for more
        if step {
            let kind = IncidentKind::RateLimitStep { scales: [0.5, 1.0, 1.0] };
            p.incidents = vec![Incident { tier: 0, kind, start: 0, end: 400 * S }];
        }
        let (_, _, trace) = traced(p, 0);
        // Past the first minute (the burst) to the horizon: what the bucket refills.
        let ok = |r: &&crate::measurement::trace::TraceRow| r.kind == TraceKind::Attempt && r.outcome != "429";
        trace.rows.iter().filter(ok).filter(|r| r.start >= 60 * S && r.start < 240 * S).count() as f64 / 180.0
    };
    let (full, halved) = (admitted(false), admitted(true));
    assert!((full - 10.0).abs() < 0.2, "{full} admitted per second at 600 rpm");
    assert!((halved - 5.0).abs() < 0.1, "{halved} admitted per second at 300 rpm");
}

/// Limiter figures exist only where a limiter does: none for the naive client or a
/// stack without `adaptive` (the reference reported a naive client's limit as 40).
#[test]
fn limiter_figures_are_absent_without_a_limiter() {
    let naive = {
        let mut p = params(&[Gate::Adaptive, Gate::Retry]);
        p.client = Client::Naive { attempts: 3, timeout: 10 * S };
        run(p)
    };
    let without = run(params(&[Gate::Retry]));
    let with = run(params(&[Gate::Adaptive, Gate::Retry]));
    for class in 0..CLASSES {
        for (name, r) in [("naive", &naive), ("no adaptive gate", &without)] {
            let c = &r.classes[class];
            assert_eq!((c.limit_final, c.limit_min, c.limit_max), (None, None, None), "{name}");
        }
        assert!(with.classes[class].limit_final.is_some());
    }
}

fn call(class: usize) -> PlannedCall {
    PlannedCall { class, probability: Some(1.0), otherwise: None, required: true, needs: None }
}

/// A parallel group and a background call, read off the trace: a turn's latency is
/// the slowest of its parallel calls (not their sum), the background call is in no
/// turn and starts when its turn is answered, and the turn histogram holds exactly
/// those latencies.
#[test]
fn a_turn_waits_for_the_slowest_of_a_parallel_group_and_not_for_the_background() {
    let mut p = params(&[]);
    p.plan = TurnPlan::new(vec![(vec![call(GUARD), call(ANSWER)], false), (vec![call(TITLE)], true)]);
    p.turns_per_s = 5.0;
    let mut histograms = latency_histograms(&p);
    let (results, _, trace) = Gateway::new(p, 7, 0, &mut histograms).traced().run_all();
    let trace = trace.expect("traced");
    assert_eq!(results.turns_failed, 0);
    let calls: Vec<_> = trace.rows.iter().filter(|r| r.kind == TraceKind::Call).collect();
    let mut turns: std::collections::BTreeMap<u32, (Nanos, Nanos, Nanos)> = Default::default();
    for row in calls.iter().filter(|r| r.group != crate::measurement::trace::NONE) {
        assert_ne!(row.class, "title", "the background call belongs to no turn");
        let (start, end, sum) = turns.entry(row.group).or_insert((row.start, 0, 0));
        assert_eq!(*start, row.start, "a parallel group's calls start together");
        (*end, *sum) = ((*end).max(row.end), *sum + (row.end - row.start));
    }
    assert_eq!(turns.len() as u64, results.turns_answered);
    let latencies: Vec<Nanos> = turns.values().map(|(start, end, _)| end - start).collect();
    // Parallel, not sequential: the turn is the slowest call, well under the sum.
    let (waited, summed): (Nanos, Nanos) = turns.values().fold((0, 0), |(w, s), (a, e, sum)| (w + (e - a), s + sum));
    assert!((waited as f64) < 0.9 * summed as f64, "{waited} vs {summed}");
    let histogram = &histograms[results::TURN_HISTOGRAM];
    assert_eq!(histogram.count(), latencies.len() as u64);
    let mean = latencies.iter().sum::<Nanos>() as f64 / latencies.len() as f64;
    let recorded = histogram.hdr().mean();
    assert!((recorded - mean).abs() < 1e-3 * mean, "{recorded} vs {mean}");
    // Each title starts at the end of a turn (when it was answered).
    let ends: std::collections::BTreeSet<Nanos> = turns.values().map(|(_, end, _)| *end).collect();
    let titles: Vec<_> = calls.iter().filter(|r| r.class == "title").collect();
    assert_eq!(titles.len() as u64, results.classes[TITLE].offered);
    assert!(titles.iter().all(|t| ends.contains(&t.start)), "a background call starts when its turn is answered");
}

/// `required = false` lets the turn go on past a failure, and `needs` skips a call
/// whose prerequisite failed: answer is made exactly when guard was served.
#[test]
fn needs_skips_a_call_whose_prerequisite_failed_and_an_optional_failure_is_forgiven() {
    let mut p = params(&[]);
    p.tiers[0].error_rate = 0.3;
    p.classes.iter_mut().for_each(|c| c.max_attempts = 1);
    p.plan = TurnPlan::new(vec![
        (vec![PlannedCall { required: false, ..call(GUARD) }], false),
        (vec![PlannedCall { needs: Some(0), ..call(ANSWER) }], false),
    ]);
    let r = run(p);
    let (guard, answer) = (r.classes[GUARD], r.classes[ANSWER]);
    assert!(guard.failed > 100 && answer.failed > 50, "{guard:?} {answer:?}");
    assert_eq!(answer.offered, guard.served, "answer only after a served guard");
    assert_eq!(r.turns_failed, answer.failed, "only the required answer fails turns");
    assert_eq!(r.turns_answered, guard.failed + answer.served);
}

/// A failed call with a fallback class is replaced by that class's call (think
/// downgraded to answer), and a re-sent copy on another tier answers the rest; the
/// copy records no latency histograms of its own.
#[test]
fn a_fallback_class_and_a_fallback_tier_take_over_failed_calls() {
    let mut p = params(&[Gate::Fallback]);
    p.tiers.push(TierParams { error_rate: 0.0, ..p.tiers[0].clone() });
    p.tiers[0].error_rate = 0.3;
    p.classes.iter_mut().for_each(|c| c.max_attempts = 1);
    p.classes[THINK] = ClassParams { has_fallback: true, fallback: Some(ANSWER), ..p.classes[THINK] };
    p.classes[ANSWER] = ClassParams { has_fallback: true, fallback: Some(ANSWER_FALLBACK), ..p.classes[ANSWER] };
    p.classes[ANSWER_FALLBACK].tier = 1;
    p.plan = TurnPlan::new(vec![(vec![call(THINK)], false)]);
    assert_eq!(p.latency_histograms(), 3 + 5 * 5);
    let r = run(p);
    let (think, answer, resent) = (r.classes[THINK], r.classes[ANSWER], r.classes[ANSWER_FALLBACK]);
    assert_eq!(answer.offered, think.failed, "every failed think becomes an answer call");
    assert_eq!(think.fallbacks, think.failed);
    assert_eq!(resent.offered, answer.failed, "every failed answer is re-sent to the healthy tier");
    assert_eq!(resent.failed, 0);
    assert_eq!(r.turns_failed, 0);
    assert_eq!(r.turns_answered, think.served + answer.served + resent.served);
}

/// A planned call's probability is the share of turns that make it, drawn once per
/// turn: over 40,000 turns with nothing failing, a 30% background call and a 20%
/// call with another class otherwise come to their shares within 4 sd.
#[test]
fn planned_probabilities_are_shares_of_turns() {
    let mut p = params(&[]);
    p.horizon = 2_000 * S;
    p.plan = TurnPlan::new(vec![
        (vec![PlannedCall { probability: Some(0.2), otherwise: Some(ANSWER), ..call(THINK) }], false),
        (vec![PlannedCall { probability: Some(0.3), ..call(TITLE) }], true),
    ]);
    let r = run(p);
    assert_eq!(r.turns_failed, 0);
    let turns = r.turns_answered as f64;
    let sd = |p: f64| 4.0 * (p * (1.0 - p) / turns).sqrt();
    let think = r.classes[THINK].offered as f64 / turns;
    assert!((think - 0.2).abs() < sd(0.2), "{think}");
    assert_eq!(r.classes[THINK].offered + r.classes[ANSWER].offered, r.turns_answered, "think or answer, never both");
    let title = r.classes[TITLE].offered as f64 / turns;
    assert!((title - 0.3).abs() < sd(0.3), "{title}");
}
