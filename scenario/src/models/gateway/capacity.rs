//! `stampede capacity`: the LLM gateway's arithmetic, no simulation.
//!
//! For each call class, its calls per turn as the turn plan makes them, the sustained
//! request rate each meter allows (with and without reconciling the output
//! reservation; prompt-cache hits metered at their weight), the binding meter, the
//! unloaded service time, the in-flight cap that reserving `max_tokens` imposes (OTPM
//! bucket, `burst_s` of refill, ÷ max_tokens) and its throughput tax, and the
//! pool (its p99 of calls in flight at the sustainable rate). Then the turns per second the whole product can sustain —
//! the tightest of every class alone and of every tier's meters and server slots
//! shared by the classes on it — the gap to a target, and what each lever buys.
//!
//! The figure is the simulation's, not a separate opinion: the scenario crate's
//! `tests/capacity.rs` runs the shipped product and a product with a parallel step,
//! caching and a background call just below and just above it.
//!
//! Two bounds are about more than averages, because the simulation showed they must
//! be. A reconciled reservation hands back what it did not use, so on average it costs
//! only the output (the OTPM column); but a short output bucket (`output_burst_s` of a
//! few seconds) refuses a burst of `max_tokens` reservations before refill and
//! hand-backs catch up. The bucket is not a semaphore of reservations (refill repairs
//! each within max_tokens ÷ refill seconds, hand-backs into a full bucket are lost), so
//! that bound is found by replaying the output meter alone ([`meter_replay`]): the rate
//! at which 1% of a class's calls find no tokens within the quota gate's wait. And a
//! tier's slots bind before the fluid limit: load stretches service, the stretch
//! raises the load, and past the knee of that loop a queue never drains; the bound
//! keeps the mean utilisation plus z·√N slots at or below the knee.
//!
//! Each class's pool (the default bulkhead) is the p99 of its calls in flight at the
//! sustainable rate ([`size_pools`]).

use serde_json::{json, Value};

use super::fixture::{CallClass, Fixture, Tier};
use super::meter_replay::{self, Meter, Stream};
use stampede_engine::measurement::theory::poisson_quantile;

/// Φ⁻¹(0.97): the p97 of a normal is mean + 1.8808 sd.
const Z_97: f64 = 1.880_793_608_151_251;

/// Φ⁻¹(0.99): the swings a sustainable load must absorb.
const Z_99: f64 = 2.326_347_874_040_841;

/// The provider's service-time jitter j ~ LogNormal(0, 0.25): its mean and its p99.
const JITTER_MEAN: f64 = 1.031_743_407_499_102; // e^(0.25²/2)
const JITTER_P99: f64 = 1.788_702_419_436_628; // e^(0.25 × Φ⁻¹(0.99))

/// The provider's stretch at utilisation ρ (`components::provider`'s law).
fn stretch(rho: f64) -> f64 {
    (1.0 + rho.powi(8) / (1.0 - rho)).min(30.0)
}

/// A call's unloaded time to first token (mean) and decode time on `tier`, the
/// formula's times multiplied by `jitter` (the provider's mean jitter, or 1).
fn unloaded(tier: &Tier, class: &CallClass, jitter: f64) -> (f64, f64) {
    // A measured time to first token replaces the formula's (its mean, jitter and all).
    let first_token = match &tier.ttft {
        Some(ttft) => ttft.mean_s(),
        None => (tier.base_latency_s + class.input_tokens.mean / tier.prefill_tokens_per_s) * jitter,
    };
    (first_token, class.output_tokens.mean / tier.decode_tokens_per_s * jitter)
}

/// The turns per second `tier`'s server slots sustain for `load` (the classes on it).
///
/// At utilisation ρ a call takes first-token × stretch(ρ) + decode × min(stretch, 4),
/// so turns at ρ are ρ × slots ÷ (slot-seconds a turn takes at ρ). That rises, peaks
/// (the knee: beyond it more load only stretches service) and falls; a class's
/// timeouts can cap ρ sooner (its p99 time to first token, or its whole answer when
/// not streamed, within the timeout). The sustainable ρ keeps ρ + z·√(ρ·slots)/slots —
/// the busy slots' Poisson swing — at that cap.
pub(crate) fn slots_turns_rps(fixture: &Fixture, tier_name: &str, load: &[PlannedLoad]) -> f64 {
    let tier = &fixture.tiers[tier_name];
    let slots = tier.server_slots as f64;
    let on_tier: Vec<(f64, &CallClass)> = load
        .iter()
        .filter(|l| l.tier == tier_name && l.calls > 0.0)
        .map(|l| (l.calls * l.attempts, &fixture.classes[&l.class]))
        .collect();
    let work = |rho: f64| {
        let s = stretch(rho);
        on_tier
            .iter()
            .map(|(calls, class)| {
                let (first, decode) = unloaded(tier, class, JITTER_MEAN);
                calls * (first * s + decode * s.min(4.0))
            })
            .sum::<f64>()
    };
    let in_time = |rho: f64| {
        let s = stretch(rho);
        on_tier.iter().all(|(_, class)| {
            let (first, decode) = unloaded(tier, class, JITTER_MEAN);
            let t = &class.timeouts_s;
            let first_p99 = first * s * JITTER_P99 / JITTER_MEAN;
            let whole_p99 = first_p99 + decode * s.min(4.0) * JITTER_P99 / JITTER_MEAN;
            let first_ok = if class.streamed { first_p99 <= t.first_token } else { whole_p99 <= t.first_token };
            first_ok && whole_p99 <= t.total
        })
    };
    // The knee, or the highest ρ every class's timeouts allow, in steps of 0.001.
    let mut cap = 0.0;
    let mut best = 0.0;
    for step in 1..=985 {
        let rho = step as f64 / 1000.0;
        let turns = rho * slots / work(rho);
        if turns < best || !in_time(rho) {
            break;
        }
        (best, cap) = (turns, rho);
    }
    // ρ + z·√(ρ/slots) = cap, solved for √ρ.
    let root = (-Z_99 / slots.sqrt() + (Z_99 * Z_99 / slots + 4.0 * cap).sqrt()) / 2.0;
    let rho = (root * root).max(0.0);
    if rho == 0.0 {
        return 0.0;
    }
    rho * slots / work(rho)
}

/// The tier's output meter as a client that waits for tokens meets it (the stack's
/// quota gate, up to `gateway.limiter_longest_wait_s`), at the provider's limits.
fn output_meter(fixture: &Fixture, tier: &Tier) -> Meter {
    Meter { otpm: tier.otpm, burst_s: tier.bursts_s()[2], patience_s: fixture.gateway.limiter_longest_wait_s }
}

/// `per_unit` calls of `class` on `tier` as the meter replay draws them.
fn replayed(tier: &Tier, class: &CallClass, per_unit: f64) -> Stream {
    let (first_token_s, _) = unloaded(tier, class, JITTER_MEAN);
    Stream {
        per_unit,
        max_tokens: class.max_tokens(),
        output_mean: class.output_tokens.mean,
        output_sd: class.output_tokens.sd,
        first_token_s,
        decode_tokens_per_s: tier.decode_tokens_per_s / JITTER_MEAN,
    }
}

/// What limits a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Rpm,
    Itpm,
    Otpm,
    /// Reserving `max_tokens` of the OTPM bucket per call: a short bucket refuses a
    /// burst of reservations before the refill binds on average (see [`meter_replay`]).
    OtpmReservation,
    /// The tier's server slots: service stretches with load (the provider's law), and
    /// past the knee a queue never drains (see [`slots_turns_rps`]).
    ServerSlots,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::Rpm => "RPM",
            Binding::Itpm => "ITPM",
            Binding::Otpm => "OTPM",
            Binding::OtpmReservation => "OTPM reservation",
            Binding::ServerSlots => "server slots",
        }
    }
}

/// One class on its tier, alone.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassCapacity {
    pub class: String,
    pub tier: String,
    pub rpm_rps: f64,
    pub itpm_rps: f64,
    /// Output meter with reconciliation (charged the real output).
    pub otpm_rps: f64,
    /// Output meter without reconciliation (charged max_tokens).
    pub otpm_unreconciled_rps: f64,
    pub sustained_rps: f64,
    pub binding: Binding,
    pub service_s: f64,
    /// OTPM bucket ÷ max_tokens.
    pub in_flight_cap: f64,
    pub reservation_rps: f64,
    pub effective_rps: f64,
    pub effective_binding: Binding,
    /// Fraction of the sustained rate the reservation cap takes away.
    pub reservation_tax_ratio: f64,
    /// The default bulkhead: the p99 of the calls in flight at the effective rate.
    pub pool_size: f64,
    /// Little's law's mean of those calls in flight (what the ladder's pressure is
    /// measured against).
    pub mean_in_flight: f64,
    /// Calls per turn, from the turn plan.
    pub calls_per_turn: f64,
    /// Attempts per call on a healthy tier.
    pub attempts_per_call: f64,
    /// The share of calls whose cacheable prefix hits the prompt cache.
    pub cache_hit_ratio: f64,
}

/// One tier's meter shared by every class on it.
#[derive(Clone, Debug, PartialEq)]
pub struct TierBound {
    pub tier: String,
    pub binding: Binding,
    pub turns_rps: f64,
}

/// A lever and what it buys.
#[derive(Clone, Debug, PartialEq)]
pub struct Lever {
    pub name: &'static str,
    pub turns_rps: f64,
    pub multiplier: f64,
}

/// The whole arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityReport {
    pub classes: Vec<ClassCapacity>,
    pub tiers: Vec<TierBound>,
    pub sustainable_turns_rps: f64,
    /// Which class (or "tier: meter") sets it.
    pub limited_by: String,
    pub target_turns_rps: f64,
    pub gap: f64,
    pub levers: Vec<Lever>,
}

/// The unloaded service time as the fixture spec's table has it (no jitter).
fn service_s(tier: &Tier, class: &CallClass) -> f64 {
    let (first_token, decode) = unloaded(tier, class, 1.0);
    first_token + decode
}

/// Input tokens as the ITPM meter counts them: the share `hit_ratio` of calls whose
/// cacheable prefix is a prompt-cache hit have that prefix counted at `weight`.
fn metered_input(class: &CallClass, hit_ratio: f64, weight: f64) -> f64 {
    class.input_tokens.mean * (1.0 - hit_ratio * class.cacheable_prefix * (1.0 - weight))
}

/// How a healthy tier treats a call of `class`: the share of calls that fail every
/// attempt on its 500s (what a fallback then serves), and the attempts a call makes.
fn healthy_failures(class: &CallClass, tier: &Tier) -> (f64, f64) {
    let (e, m) = (tier.error_rate, class.max_attempts as i32);
    let attempts = if e < 1.0 { (1.0 - e.powi(m)) / (1.0 - e) } else { m as f64 };
    (e.powi(m), attempts)
}

/// Calls one class makes on one tier per turn, on average, as the turn plan makes them.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedLoad {
    pub class: String,
    pub tier: String,
    /// Calls per turn.
    pub calls: f64,
    /// Attempts per call (a healthy tier's 500s retried up to `max_attempts`).
    pub attempts: f64,
    /// The share of calls served (a 500 hands its whole output reservation back).
    pub served: f64,
    /// The share of calls whose cacheable prefix is a prompt-cache hit.
    pub hit_ratio: f64,
    /// A failed call of `class` re-sent to this (other) tier: a different model, whose
    /// prompt cache has never seen the prefix.
    pub resent: bool,
}

/// What one turn asks of each tier, on average, from the turn plan — the one count of
/// calls `capacity`, the validator and the burst warning share. Each planned call
/// counts at its probability (`otherwise` at the rest), every call of a parallel group
/// and every background step counts, and a healthy tier's failures send their share on
/// to the class's fallback (another class, or the same call on `fallback_tier`). A call
/// that `needs` an earlier one is counted as if that one succeeded (an upper bound).
pub(crate) fn planned_load(fixture: &Fixture) -> Vec<PlannedLoad> {
    let mut load: Vec<PlannedLoad> = fixture
        .classes
        .iter()
        .map(|(name, class)| {
            let (failing, attempts) = healthy_failures(class, &fixture.tiers[&class.tier]);
            PlannedLoad {
                class: name.clone(),
                tier: class.tier.clone(),
                calls: 0.0,
                attempts,
                served: 1.0 - failing,
                hit_ratio: class.cache_hit_ratio,
                resent: false,
            }
        })
        .collect();
    fn add(fixture: &Fixture, load: &mut Vec<PlannedLoad>, name: &str, weight: f64) {
        let class = &fixture.classes[name];
        load.iter_mut().find(|l| l.class == name && !l.resent).expect("every class has a row").calls += weight;
        let (failing, _) = healthy_failures(class, &fixture.tiers[&class.tier]);
        if let Some(next) = class.fallback_class() {
            add(fixture, load, next, weight * failing); // chains end: validated
        } else if let Some(tier) = &class.fallback_tier {
            let resent = match load.iter_mut().find(|l| l.class == name && l.resent) {
                Some(row) => row,
                None => {
                    let (failing, attempts) = healthy_failures(class, &fixture.tiers[tier]);
                    let row = PlannedLoad {
                        class: name.into(),
                        tier: tier.clone(),
                        calls: 0.0,
                        attempts,
                        served: 1.0 - failing,
                        hit_ratio: class.fallback_cache_hit_ratio,
                        resent: true,
                    };
                    load.push(row);
                    load.last_mut().expect("just pushed")
                }
            };
            resent.calls += weight * failing;
        }
    }
    for (calls, _background) in fixture.steps() {
        for call in calls {
            let share = call.probability.unwrap_or_else(|| fixture.classes[&call.call].share());
            add(fixture, &mut load, &call.call, share);
            if let Some(otherwise) = &call.otherwise {
                add(fixture, &mut load, otherwise, 1.0 - share);
            }
        }
    }
    load
}

/// Valid input that would likely mislead: a `calls_per_turn` the turn plan does not
/// make (capacity and the simulation both count the plan's calls); prompts whose
/// long tail does not fit an input bucket (those calls can never succeed).
pub fn warnings(fixture: &Fixture) -> Vec<String> {
    let mut warnings = Vec::new();
    if fixture.turn.is_some() {
        let load = planned_load(fixture);
        for (name, class) in &fixture.classes {
            let Some(given) = class.calls_per_turn else { continue };
            let planned: f64 = load.iter().filter(|l| &l.class == name && !l.resent).map(|l| l.calls).sum();
            if (given - planned).abs() > 0.01 * given.max(planned).max(0.01) {
                warnings.push(format!(
                    "classes.{name}.calls_per_turn = {given}: the turn plan makes {planned:.3} {name} calls a \
                     turn, and capacity and run both count the plan's; calls_per_turn is read only as the share \
                     of turns for a plan step that gives no probability (remove it, or make the plan say it)"
                ));
            }
        }
    }
    for (name, class) in &fixture.classes {
        let tier = &fixture.tiers[&class.tier];
        let long = class.input_tokens.mean + 4.0 * class.input_tokens.sd;
        let bucket = tier.bucket_capacities()[1].floor();
        if long > bucket {
            warnings.push(format!(
                "classes.{name}.input_tokens: a prompt 4 standard deviations long ({long:.0} tokens) is more than \
                 tier {}'s input-token bucket holds ({bucket:.0}); such calls are refused with a 429 every time",
                class.tier
            ));
        }
    }
    warnings
}

/// A meter a load over-asks: how long its full bucket lasts.
#[derive(Clone, Debug, PartialEq)]
pub struct BurstDrain {
    pub tier: String,
    pub meter: Binding,
    /// Asked per minute at the load, and the meter's refill per minute.
    pub asked_per_minute: f64,
    pub limit_per_minute: f64,
    /// The meter's burst, seconds of its refill.
    pub burst_s: f64,
    /// Seconds until the bucket (burst_s of refill) is empty: burst_s × limit ÷ (asked − limit).
    pub drain_s: f64,
}

/// What `turns_per_s` asks each tier's meters for, per minute: (requests, input
/// tokens as metered, output tokens as produced).
fn asked_per_minute(fixture: &Fixture, load: &[PlannedLoad], tier: &str, turns_per_s: f64) -> [f64; 3] {
    let weight = fixture.gateway.cache_read_itpm_weight;
    let mut asked = [0.0; 3];
    for l in load.iter().filter(|l| l.tier == tier) {
        let class = &fixture.classes[&l.class];
        let attempts = 60.0 * turns_per_s * l.calls * l.attempts;
        asked[0] += attempts;
        asked[1] += attempts * metered_input(class, l.hit_ratio, weight);
        asked[2] += 60.0 * turns_per_s * l.calls * l.served * class.output_tokens.mean.min(class.max_tokens() as f64);
    }
    asked
}

/// Every RPM/ITPM/OTPM meter that `turns_per_s` asks more of than it refills (output
/// counted as produced, the reservation's slack handed back), with how long the bucket's
/// starting burst lasts. Until then the provider admits more than its quota sustains.
pub(crate) fn burst_drains(fixture: &Fixture, turns_per_s: f64) -> Vec<BurstDrain> {
    let load = planned_load(fixture);
    let mut drains = Vec::new();
    for (tier_name, tier) in &fixture.tiers {
        let asked = asked_per_minute(fixture, &load, tier_name, turns_per_s);
        let limits = [tier.rpm as f64, tier.itpm as f64, tier.otpm as f64];
        let meters = [Binding::Rpm, Binding::Itpm, Binding::Otpm];
        for (((meter, asked), limit), burst_s) in meters.into_iter().zip(asked).zip(limits).zip(tier.bursts_s()) {
            if asked > limit {
                drains.push(BurstDrain {
                    tier: tier_name.clone(),
                    meter,
                    asked_per_minute: asked,
                    limit_per_minute: limit,
                    burst_s,
                    drain_s: burst_s * limit / (asked - limit),
                });
            }
        }
    }
    drains
}

fn class_capacity(fixture: &Fixture, load: &PlannedLoad, weight: f64) -> ClassCapacity {
    let class = &fixture.classes[&load.class];
    let tier = &fixture.tiers[&load.tier];
    let rpm_rps = tier.rpm as f64 / 60.0;
    let itpm_rps = tier.itpm as f64 / 60.0 / metered_input(class, load.hit_ratio, weight);
    let otpm_rps = tier.otpm as f64 / 60.0 / class.output_tokens.mean;
    let otpm_unreconciled_rps = tier.otpm as f64 / 60.0 / class.max_tokens() as f64;
    let (sustained_rps, binding) = [(rpm_rps, Binding::Rpm), (itpm_rps, Binding::Itpm), (otpm_rps, Binding::Otpm)]
        .into_iter()
        .fold((f64::INFINITY, Binding::Rpm), |best, candidate| if candidate.0 < best.0 { candidate } else { best });
    let service = service_s(tier, class);
    // Reservations the output bucket holds when full (refill repairs them as calls run).
    let in_flight_cap = tier.bucket_capacities()[2] / class.max_tokens() as f64;
    let reservation_rps =
        meter_replay::reservation_bound(output_meter(fixture, tier), &[replayed(tier, class, 1.0)], sustained_rps)
            .unwrap_or(f64::INFINITY);
    let (effective_rps, effective_binding) = if reservation_rps < sustained_rps {
        (reservation_rps, Binding::OtpmReservation)
    } else {
        (sustained_rps, binding)
    };
    let class_name = if load.resent { format!("{}_fallback", load.class) } else { load.class.clone() };
    ClassCapacity {
        class: class_name,
        tier: load.tier.clone(),
        rpm_rps,
        itpm_rps,
        otpm_rps,
        otpm_unreconciled_rps,
        sustained_rps,
        binding,
        service_s: service,
        in_flight_cap,
        reservation_rps,
        effective_rps,
        effective_binding,
        reservation_tax_ratio: 1.0 - effective_rps / sustained_rps,
        // Sized once the product's sustainable rate is known (see `size_pools`).
        pool_size: 0.0,
        mean_in_flight: 0.0,
        calls_per_turn: load.calls,
        attempts_per_call: load.attempts,
        cache_hit_ratio: load.hit_ratio,
    }
}

/// Sustainable turns per second of `fixture` (prompt caches hitting as `load` says),
/// with what limits it.
fn sustainable(fixture: &Fixture, load: &[PlannedLoad]) -> (Vec<ClassCapacity>, Vec<TierBound>, f64, String) {
    let weight = fixture.gateway.cache_read_itpm_weight;
    let mut classes: Vec<ClassCapacity> = load.iter().map(|l| class_capacity(fixture, l, weight)).collect();
    let mut best = (f64::INFINITY, String::new());
    for (c, l) in classes.iter().zip(load).filter(|(c, _)| c.calls_per_turn > 0.0) {
        // Requests and input are metered per attempt; output only where served.
        let per_turn = match c.effective_binding {
            Binding::Otpm => l.calls * l.served,
            _ => l.calls * l.attempts,
        };
        let turns = c.effective_rps / per_turn;
        if turns < best.0 {
            best = (turns, format!("{} ({})", c.class, c.effective_binding.name()));
        }
    }
    let mut tiers = Vec::new();
    for (tier_name, tier) in &fixture.tiers {
        let on_tier: Vec<&PlannedLoad> = load.iter().filter(|l| &l.tier == tier_name && l.calls > 0.0).collect();
        if on_tier.is_empty() {
            continue;
        }
        let [requests, input, output] = asked_per_minute(fixture, load, tier_name, 1.0 / 60.0);
        let mut bounds = vec![
            (Binding::Rpm, tier.rpm as f64 / 60.0 / requests),
            (Binding::Itpm, tier.itpm as f64 / 60.0 / input),
            (Binding::Otpm, tier.otpm as f64 / 60.0 / output),
        ];
        // Below the meters' average bounds, a short output bucket may refuse bursts of
        // reservations: replayed, not assumed.
        let fluid = bounds.iter().map(|b| b.1).fold(f64::INFINITY, f64::min);
        let streams: Vec<Stream> =
            on_tier.iter().map(|l| replayed(tier, &fixture.classes[&l.class], l.calls * l.attempts)).collect();
        if let Some(turns) = meter_replay::reservation_bound(output_meter(fixture, tier), &streams, fluid) {
            bounds.push((Binding::OtpmReservation, turns));
        }
        bounds.push((Binding::ServerSlots, slots_turns_rps(fixture, tier_name, load)));
        for (binding, turns_rps) in bounds {
            if turns_rps < best.0 {
                best = (turns_rps, format!("tier {tier_name} ({}, shared)", binding.name()));
            }
            tiers.push(TierBound { tier: tier_name.clone(), binding, turns_rps });
        }
    }
    size_pools(&mut classes);
    (classes, tiers, best.0, best.1)
}

/// Each class's default bulkhead and the concurrency its pressure is measured against.
///
/// Both at the rate the class alone sustains on its tier (its effective rate: the
/// tightest meter, or the replayed reservation bound). The slots: the p99 of its calls
/// in flight (Poisson around Little's law's mean, whatever the service time's shape),
/// so the tier's ordinary swings are never refused; the admission ladder's pressure is
/// in flight ÷ the mean. Not the product's rate: a class on a tier with room to spare
/// (the shipped answer on sonnet, while opus's slots bound the product) would be
/// throttled to another tier's pace. And not capped at the reservations the output
/// bucket holds (think's 39 on opus): refill repairs a reservation while its call
/// runs, so that count bounds nothing (see `docs/src/capacity.md`). A re-sent copy is
/// the class alone on its fallback tier: sized for every call of its class, since a
/// fallback exists for when the first tier fails them all.
fn size_pools(classes: &mut [ClassCapacity]) {
    for class in classes {
        let alone_rps = if class.effective_rps.is_finite() { class.effective_rps } else { 0.0 };
        class.mean_in_flight = alone_rps * class.service_s * JITTER_MEAN;
        class.pool_size = poisson_quantile(class.mean_in_flight, POOL_QUANTILE) as f64;
    }
}

/// The share of the time a default bulkhead holds every call in flight.
pub(crate) const POOL_QUANTILE: f64 = 0.99;

/// The hit ratio of the whole-response cache lever: answered from the cache, a call
/// never reaches the provider (semantic caches report 10–30% on repeated traffic).
pub(crate) const RESPONSE_CACHE_HIT_RATIO: f64 = 0.2;

/// The prompt-caching lever's hit ratio: a steady product re-sending the same system
/// prompt within the cache's lifetime (each class keeps its own ratio when higher).
pub(crate) const PROMPT_CACHE_LEVER_HIT_RATIO: f64 = 0.8;

/// Each class's default bulkhead (its pool, see [`size_pools`]) by engine class name
/// (`reply`, `reply_fallback`), with its mean calls in flight: the sustainable rate
/// alone, without the levers.
pub fn pools(fixture: &Fixture) -> std::collections::BTreeMap<String, Pool> {
    let (classes, ..) = sustainable(fixture, &planned_load(fixture));
    classes.into_iter().map(|c| (c.class, Pool { slots: c.pool_size, mean_in_flight: c.mean_in_flight })).collect()
}

/// A class's default bulkhead: its slots (the p99 of calls in flight) and the mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pool {
    pub slots: f64,
    pub mean_in_flight: f64,
}

/// Runs the arithmetic for `fixture` against `target_turns_rps`.
pub fn analyse(fixture: &Fixture, target_turns_rps: f64) -> CapacityReport {
    let load = planned_load(fixture);
    let (classes, tiers, baseline, limited_by) = sustainable(fixture, &load);
    let lever = |name: &'static str, changed: Fixture, alter: &dyn Fn(&mut PlannedLoad)| {
        let mut load = planned_load(&changed);
        load.iter_mut().for_each(alter);
        let turns = sustainable(&changed, &load).2;
        Lever { name, turns_rps: turns, multiplier: turns / baseline }
    };
    let unchanged = |_: &mut PlannedLoad| {};
    let mut p97 = fixture.clone();
    for class in p97.classes.values_mut() {
        class.max_tokens = Some((class.output_tokens.mean + Z_97 * class.output_tokens.sd).ceil() as u64);
    }
    let mut halved = fixture.clone();
    for class in halved.classes.values_mut().filter(|c| c.retrieval_context) {
        class.input_tokens.mean *= 0.5;
    }
    let mut more_rpm = fixture.clone();
    more_rpm.tiers.values_mut().for_each(|t| t.rpm *= 2);
    let mut bigger = fixture.clone();
    bigger.tiers.values_mut().for_each(|t| {
        t.rpm *= 2;
        t.itpm *= 2;
        t.otpm *= 2;
    });
    let mut more_slots = fixture.clone();
    more_slots.tiers.values_mut().for_each(|t| t.server_slots *= 2);
    let levers = vec![
        Lever { name: "baseline", turns_rps: baseline, multiplier: 1.0 },
        lever("max_tokens sized to the p97 of observed output", p97, &unchanged),
        lever("halve the retrieved context", halved, &unchanged),
        // Not every call hits: the prefix must still be cached (a TTL of minutes) and
        // a re-sent copy meets a cold cache on its other tier.
        lever("prompt caching hitting 80% of cacheable prefixes", fixture.clone(), &|l: &mut PlannedLoad| {
            if !l.resent {
                l.hit_ratio = l.hit_ratio.max(PROMPT_CACHE_LEVER_HIT_RATIO);
            }
        }),
        lever("double every tier's RPM", more_rpm, &unchanged),
        lever("a bigger tier (2x every meter)", bigger, &unchanged),
        lever("provisioned throughput (2x every tier's server slots)", more_slots, &unchanged),
        // A whole-response cache answers a share of calls without the provider: every
        // class sends that much less.
        lever("a whole-response cache answering 20% of calls", fixture.clone(), &|l: &mut PlannedLoad| {
            l.calls *= 1.0 - RESPONSE_CACHE_HIT_RATIO
        }),
    ];
    CapacityReport {
        classes,
        tiers,
        sustainable_turns_rps: baseline,
        limited_by,
        target_turns_rps,
        gap: target_turns_rps / baseline,
        levers,
    }
}

impl CapacityReport {
    /// The terminal table; the class and tier columns as wide as the longest name.
    pub fn render(&self) -> String {
        let class_w = self.classes.iter().map(|c| c.class.len()).max().unwrap_or(0).max(8);
        // calls/turn: from the turn plan (probabilities, parallel groups, background
        // steps, fallbacks at a healthy tier's error rate).
        let tier_w = self.classes.iter().map(|c| c.tier.len()).max().unwrap_or(0).max(7);
        let mut out = format!(
            "{:<class_w$} {:<tier_w$} calls/turn  cache hit  RPM req/s  ITPM req/s  OTPM req/s (unreconciled)  binding                          service s  in-flight cap  effective req/s  tax    pool\n",
            "class", "tier"
        );
        for c in &self.classes {
            out.push_str(&format!(
                "{:<class_w$} {:<tier_w$} {:>10.3}  {:>8.0}%  {:>9.2}  {:>10.2}  {:>10.2} ({:>8.2})        {:<32} {:>9.2}  {:>13.0}  {:>15.2}  {:>4.0}%  {:>6.1}\n",
                c.class,
                c.tier,
                c.calls_per_turn,
                c.cache_hit_ratio * 100.0,
                c.rpm_rps,
                c.itpm_rps,
                c.otpm_rps,
                c.otpm_unreconciled_rps,
                if c.effective_binding == c.binding {
                    c.binding.name().to_string()
                } else {
                    format!("{}, then {}", c.binding.name(), c.effective_binding.name())
                },
                c.service_s,
                c.in_flight_cap.floor(),
                c.effective_rps,
                c.reservation_tax_ratio * 100.0,
                c.pool_size
            ));
        }
        out.push_str(&format!(
            "\nsustainable: {:.2} turns/s, limited by {}; target {} turns/s is {:.2}x that\n\nlevers:\n",
            self.sustainable_turns_rps, self.limited_by, self.target_turns_rps, self.gap
        ));
        for lever in &self.levers {
            out.push_str(&format!(
                "  {:<58} {:>7.2} turns/s  {:>5.2}x\n",
                lever.name, lever.turns_rps, lever.multiplier
            ));
        }
        out
    }

    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        json!({
            "classes": self.classes.iter().map(|c| json!({
                "class": c.class, "tier": c.tier,
                "rpm_rps": c.rpm_rps, "itpm_rps": c.itpm_rps, "otpm_rps": c.otpm_rps,
                "otpm_unreconciled_rps": c.otpm_unreconciled_rps,
                "sustained_rps": c.sustained_rps, "binding": c.binding.name(),
                "service_s": c.service_s, "in_flight_cap": c.in_flight_cap,
                "reservation_rps": c.reservation_rps, "effective_rps": c.effective_rps,
                "effective_binding": c.effective_binding.name(),
                "reservation_tax_ratio": c.reservation_tax_ratio, "pool_size": c.pool_size,
                "mean_in_flight": c.mean_in_flight,
                "calls_per_turn": c.calls_per_turn, "attempts_per_call": c.attempts_per_call,
                "cache_hit_ratio": c.cache_hit_ratio,
            })).collect::<Vec<_>>(),
            "tiers": self.tiers.iter().map(|t| json!({"tier": t.tier, "meter": t.binding.name(), "turns_rps": t.turns_rps})).collect::<Vec<_>>(),
            "sustainable_turns_rps": self.sustainable_turns_rps,
            "limited_by": self.limited_by,
            "target_turns_rps": self.target_turns_rps,
            "gap": self.gap,
            "levers": self.levers.iter().map(|l| json!({"lever": l.name, "turns_rps": l.turns_rps, "multiplier": l.multiplier})).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> CapacityReport {
        analyse(&Fixture::load(None).unwrap(), 1000.0)
    }

    fn class<'a>(r: &'a CapacityReport, name: &str) -> &'a ClassCapacity {
        r.classes.iter().find(|c| c.class == name).unwrap()
    }

    fn two(x: f64) -> String {
        format!("{x:.2}")
    }

    /// A tier's measured time to first token enters the service time (and so the
    /// pool sizes) by its mean; the formula's base + input ÷ prefill is gone.
    #[test]
    fn a_measured_time_to_first_token_enters_by_its_mean() {
        let mut fixture = Fixture::load(None).unwrap();
        let formula = class(&analyse(&fixture, 1.0), "answer").service_s;
        let answer = fixture.classes["answer"].clone();
        let opus = fixture.tiers.get_mut(&answer.tier).unwrap();
        let (decode, opus_formula_ttft) = (
            answer.output_tokens.mean / opus.decode_tokens_per_s,
            opus.base_latency_s + answer.input_tokens.mean / opus.prefill_tokens_per_s,
        );
        assert!((formula - (opus_formula_ttft + decode)).abs() < 1e-9);
        let text = "dist = \"lognormal\"\nmedian_s = 1.5\nsigma = 0.4";
        opus.ttft_s = Some(toml::from_str(text).unwrap());
        fixture.read_inputs().unwrap();
        let measured = class(&analyse(&fixture, 1.0), "answer").service_s;
        let mean = 1.5 * (0.4f64 * 0.4 / 2.0).exp();
        assert!((measured - (mean + decode)).abs() < 1e-9, "{measured} vs {}", mean + decode);
    }

    /// The fixture spec's table, digit for digit, where the simulation agrees with it:
    /// every class's sustained limit and binding meter, think's in-flight cap (39),
    /// the unreconciled OTPM figures. Where it does not, the simulation wins (see
    /// tests/capacity.rs): think's reservation is not a sustained bound (with 1000
    /// opus slots a run serves 1.6× the spec's 0.56 think calls/s), so the headline is
    /// opus's server slots, 6.61 turns/s where the spec said 6.94, and sizing
    /// max_tokens buys nothing sustained.
    #[test]
    fn reproduces_the_fixture_table() {
        let r = report();
        for (name, limit, binding) in [
            ("guard", "66.67", Binding::Rpm),
            ("rewrite", "66.67", Binding::Rpm),
            ("answer", "21.51", Binding::Itpm),
            ("think", "0.98", Binding::Itpm),
            ("title", "41.67", Binding::Itpm),
        ] {
            let c = class(&r, name);
            assert_eq!(two(c.sustained_rps), limit, "{name}");
            assert_eq!(c.binding, binding, "{name}");
            assert_eq!(c.effective_binding, c.binding, "{name}: no reservation tax at a minute's burst");
        }
        let think = class(&r, "think");
        assert_eq!(think.in_flight_cap.floor(), 39.0);
        // The bucket holds 39 reservations, but refill repairs each within
        // 8,192 ÷ 5,333 tokens/s = 1.5 s while a think call runs 70 s: replayed, the
        // meter refuses none at think's ITPM bound (the lab's sheet capped think at
        // 39 ÷ 70.4 s = 0.56/s, a semaphore the provider's bucket is not).
        assert_eq!(think.reservation_rps, f64::INFINITY, "no reservation bound below the ITPM bound");
        assert_eq!(two(r.sustainable_turns_rps), "6.61");
        assert_eq!(r.limited_by, "tier opus (server slots, shared)");
        assert_eq!(format!("{:.0}", r.gap), "151");
        assert_eq!(two(r.levers[1].multiplier), "1.00", "max_tokens at the p97 buys nothing sustained");
        let answer = class(&r, "answer");
        assert_eq!(format!("{:.1}", answer.otpm_unreconciled_rps), "8.1");
        assert_eq!(format!("{:.1}", answer.otpm_rps), "32.1");
        // Relieving a meter that does not bind buys nothing.
        assert_eq!(two(r.levers[4].multiplier), "1.00");
        // Every class sends 20% fewer calls: every bound rises by 1/0.8.
        let response_cache = r.levers.iter().find(|l| l.name.starts_with("a whole-response cache")).unwrap();
        assert_eq!(two(response_cache.multiplier), "1.25");
        // Twice opus's slots: the next bound is think's ITPM (0.98 ÷ 0.08 calls a turn).
        let slots = r.levers.iter().find(|l| l.name.starts_with("provisioned")).unwrap();
        assert_eq!(two(slots.turns_rps), "12.25");
    }

    /// The server-slot bound sits below the knee of the stretch loop: at the bound's
    /// utilisation plus the Poisson swing the turns rate is still rising.
    #[test]
    fn the_slot_bound_keeps_the_swing_below_the_knee() {
        let fixture = Fixture::load(None).unwrap();
        let load = planned_load(&fixture);
        let bound = slots_turns_rps(&fixture, "opus", &load);
        let think = load.iter().find(|l| l.class == "think").unwrap();
        let (first, decode) = unloaded(&fixture.tiers["opus"], &fixture.classes["think"], JITTER_MEAN);
        let turns_at = |rho: f64| {
            let s = stretch(rho);
            rho * 80.0 / (think.calls * think.attempts * (first * s + decode * s.min(4.0)))
        };
        // The bound's utilisation, found again by bisection.
        let (mut lo, mut hi) = (0.0, 0.66);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if turns_at(mid) < bound {
                lo = mid
            } else {
                hi = mid
            }
        }
        let swing = lo + Z_99 * (lo * 80.0).sqrt() / 80.0;
        assert!(turns_at(swing) > turns_at(swing - 0.01) && turns_at(swing + 0.02) < turns_at(swing) + 0.01);
        assert!(swing > 0.6 && swing < 0.7, "{lo} {swing}");
    }

    #[test]
    fn a_bad_fixture_names_the_field() {
        let text = DEFAULT.replace("tier = \"opus\"", "tier = \"gpt\"");
        let error = Fixture::parse(&text, "test").unwrap_err();
        assert!(error.message.contains("classes.think.tier = \"gpt\": no such tier"), "{}", error.message);
    }

    /// A call that could never succeed is refused, naming the class, the tier and
    /// both numbers (issue 53's case: OTPM 60,000 with a 4 s burst holds 4,000 tokens).
    #[test]
    fn a_call_larger_than_a_bucket_is_refused() {
        let small = DEFAULT.replace(
            "[tiers.sonnet]\nrpm = 2000\nitpm = 8000000\notpm = 1000000",
            "[tiers.sonnet]\nrpm = 2000\nitpm = 8000000\notpm = 60000\noutput_burst_s = 4.0",
        );
        let error = Fixture::parse(&small.replace("max_tokens = 2048", "max_tokens = 5000"), "test").unwrap_err();
        assert!(
            error.message.contains(
                "classes.answer.max_tokens = 5000: more than tier sonnet's output-token bucket holds \
                 (otpm 60000 × 4 s of burst ÷ 60 = 4000 tokens)"
            ),
            "{}",
            error.message
        );
        // 4000 fits; the other meters keep their minute.
        let fits = Fixture::parse(&small.replace("max_tokens = 2048", "max_tokens = 4000"), "test").unwrap();
        assert_eq!(fits.tiers["sonnet"].bucket_capacities(), [2000.0, 8_000_000.0, 4000.0]);
        // A fallback tier that cannot hold the call is named as such.
        let resent = small
            .replace(
                "tier = \"opus\"\ncriticality = \"critical\"",
                "tier = \"opus\"\ncriticality = \"critical\"\nfallback_tier = \"sonnet\"",
            )
            .replace("fallback = \"answer\"\n", "");
        let error = Fixture::parse(&resent, "test").unwrap_err();
        assert!(
            error.message.contains("classes.think.max_tokens = 8192: more than tier sonnet (its fallback_tier)'s"),
            "{}",
            error.message
        );
        let input = DEFAULT.replace("itpm = 400000", "itpm = 400000\ninput_burst_s = 0.5");
        let error = Fixture::parse(&input, "test").unwrap_err();
        assert!(
            error.message.contains("classes.think.input_tokens.mean = 6800: more than tier opus's"),
            "{}",
            error.message
        );
    }

    /// calls_per_turn that the plan does not make is a warning, not an error; the
    /// shipped fixture has none.
    #[test]
    fn calls_per_turn_the_plan_does_not_make_is_a_warning() {
        assert_eq!(warnings(&Fixture::load(None).unwrap()), Vec::<String>::new());
        let doubled = DEFAULT.replace(
            "  { call = \"title\", background = true },",
            "  { parallel = [{ call = \"title\" }, { call = \"title\" }], background = true },",
        );
        let warnings = warnings(&Fixture::parse(&doubled, "test").unwrap());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("classes.title.calls_per_turn = 0.18: the turn plan makes 0.360 title calls"),
            "{}",
            warnings[0]
        );
    }

    const DEFAULT: &str = super::super::fixture::DEFAULT_FIXTURE;
}
