//! The LLM API's side of the wire (the LLM-gateway fixture's provider), one tier:
//! three meters, a pool of server slots with a FIFO wait queue, and a service time
//! that stretches with load. The gateway model drives it and schedules the events
//! it returns; nothing here knows about the gateway's defences.
//!
//! 1. **Metering first.** A call is charged 1 request, its input tokens and its
//!    `max_tokens`; if any bucket is short, the answer is a 429 whose retry-after is
//!    min(60 s, the time until that bucket holds enough), after a 20–50 ms round trip.
//! 2. **Fleet overload.** With more than 3 × effective slots already queued, the answer
//!    is a 529 (the charges are refunded) after 30–80 ms, retry-after 5–10 s.
//! 3. **Queueing.** A call waits FIFO for a slot and gives up after 30 s.
//!    Effective slots = max(1, slots × health scale).
//! 4. **Service time.** ρ = min(0.985, (in service + queued) / effective slots);
//!    stretch = min(30, 1 + ρ⁸/(1 − ρ)); j ~ LogNormal(0, 0.25);
//!    first token = (base + input/prefill) × stretch × j — or, with a measured
//!    time-to-first-token distribution (`with_ttft`), a draw from it × stretch;
//!    total = first token + (output/decode) × min(stretch, 4) × j.
//! 5. **Errors.** With probability `error_rate` the call ends in a 500 and reconciles
//!    all of `max_tokens` back; otherwise it reconciles `max_tokens − output`.
//! 6. **Incidents** set the health scale, the error rate and a latency factor that
//!    multiplies both times in 4 (by default a brownout is health 0.2, errors 0.25,
//!    latency ×1; an outage 0.05 / 1.0 / ×1), or scale the quota's three limits.
//!
//! Invariants (asserted): in service ≤ effective slots at admission time; the queue
//! holds only calls that were metered.

use std::collections::VecDeque;

use crate::components::distribution::Distribution;
use crate::kernel::rng::RngStream;
use crate::kernel::time::{secs_to_nanos, Nanos, NANOS_PER_SEC};
use crate::policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reservation, Reserve};

/// A tier's published limits and speeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierSpec {
    /// Requests per minute.
    pub rpm: u64,
    /// Input tokens per minute.
    pub itpm: u64,
    /// Output tokens per minute.
    pub otpm: u64,
    /// How fast the prompt is read, tokens per second.
    pub prefill_tokens_per_s: f64,
    /// How fast the answer is written, tokens per second.
    pub decode_tokens_per_s: f64,
    /// Latency before any token, seconds.
    pub base_latency_s: f64,
    /// Calls the tier serves at once; more wait in its queue.
    pub server_slots: u32,
    /// Each meter's bucket holds this many seconds of its refill (requests, input,
    /// output; 60: a minute's worth, the providers' rule).
    pub burst_s: [f64; 3],
}

/// A tier's condition during an incident.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierIncident {
    /// Multiplies the server slots (effective slots = max(1, slots × health)).
    pub health: f64,
    /// The share of calls that end in a 500.
    pub error_rate: f64,
    /// Multiplies the time to first token and the decode time.
    pub latency_factor: f64,
}

/// One call as the provider sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSpec {
    /// The gateway's handle for the call.
    pub id: u64,
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// What the model will write (drawn by the gateway).
    pub output_tokens: u64,
    /// The most the call may write (what quota meters reserve).
    pub max_tokens: u64,
}

/// When a started call produces its first token and ends, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServicePlan {
    /// The call's handle, as in its [`CallSpec`].
    pub id: u64,
    /// When its first token arrives.
    pub first_token_at: Nanos,
    /// When it ends.
    pub done_at: Nanos,
    /// A 500 at `done_at` instead of an answer.
    pub server_error: bool,
}

/// The provider's immediate answer to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// 429 at `respond_at`, come back after `retry_after`.
    RateLimited {
        /// When the 429 arrives.
        respond_at: Nanos,
        /// How long the provider asks the caller to wait.
        retry_after: Nanos,
    },
    /// 529 at `respond_at` (charges refunded), retry after `retry_after`.
    Overloaded {
        /// When the 529 arrives.
        respond_at: Nanos,
        /// How long the provider asks the caller to wait.
        retry_after: Nanos,
    },
    /// A slot was free: the call runs by this plan (it holds the slot until `done_at`).
    Started(ServicePlan),
    /// Waiting for a slot; [`ProviderTier::slot_freed`] starts it, or it gives up at `gives_up_at`.
    Queued {
        /// When the provider gives up on it (its queue timeout).
        gives_up_at: Nanos,
    },
}

const QUEUE_TIMEOUT: Nanos = 30 * NANOS_PER_SEC;

#[derive(Clone, Copy, Debug)]
struct Waiting {
    call: CallSpec,
    enqueued_at: Nanos,
}

/// One tier of the provider.
#[derive(Clone, Debug)]
pub struct ProviderTier {
    spec: TierSpec,
    /// The three meters: the same reserve-and-reconcile buckets a client keeps, with
    /// no headroom and no waiting.
    meters: QuotaMeter,
    in_service: u32,
    queue: VecDeque<Waiting>,
    health_scale: f64,
    error_rate: f64,
    healthy_error_rate: f64,
    latency_factor: f64,
    /// The unloaded time to first token, drawn per call, when measured.
    ttft: Option<Distribution>,
}

impl ProviderTier {
    /// A healthy tier (error rate `error_rate`, the fixture's 0.002).
    pub fn new(spec: TierSpec, error_rate: f64) -> Self {
        assert!(spec.server_slots > 0);
        ProviderTier {
            spec,
            meters: QuotaMeter::with_burst(
                QuotaLimits {
                    requests_per_minute: spec.rpm,
                    input_tokens_per_minute: spec.itpm,
                    output_tokens_per_minute: spec.otpm,
                },
                QuotaConfig { headroom: 1.0, longest_wait: 0, instances: 1, coordinated: true },
                spec.burst_s.map(crate::kernel::time::secs_to_nanos),
            ),
            in_service: 0,
            queue: VecDeque::with_capacity(4 * spec.server_slots as usize + 1),
            health_scale: 1.0,
            error_rate,
            healthy_error_rate: error_rate,
            latency_factor: 1.0,
            ttft: None,
        }
    }

    /// Draws each call's unloaded time to first token from `ttft` (measured latencies,
    /// say) instead of base + input ÷ prefill × jitter; load still stretches it and an
    /// incident's latency factor still multiplies it. `None` keeps the formula.
    pub fn with_ttft(mut self, ttft: Option<Distribution>) -> Self {
        self.ttft = ttft;
        self
    }

    /// max(1, slots × health scale).
    pub fn effective_slots(&self) -> u32 {
        ((self.spec.server_slots as f64 * self.health_scale) as u32).max(1)
    }

    /// Calls in service and waiting.
    pub fn load(&self) -> (u32, usize) {
        (self.in_service, self.queue.len())
    }

    /// Starts an incident or, with `None`, ends it.
    pub fn set_incident(&mut self, incident: Option<TierIncident>) {
        let healthy = TierIncident { health: 1.0, error_rate: self.healthy_error_rate, latency_factor: 1.0 };
        let TierIncident { health, error_rate, latency_factor } = incident.unwrap_or(healthy);
        assert!(health > 0.0 && (0.0..=1.0).contains(&error_rate) && latency_factor > 0.0);
        self.health_scale = health;
        self.error_rate = error_rate;
        self.latency_factor = latency_factor;
    }

    /// From `now` on, the tier's requests, input-token and output-token limits are
    /// `scales` × the published ones (`[1.0; 3]`: back to them).
    pub fn scale_quota(&mut self, now: Nanos, scales: [f64; 3]) {
        self.meters.scale_limits(now, scales);
    }

    /// A call arrives at `now`.
    pub fn arrive(&mut self, now: Nanos, call: CallSpec, rng: &mut RngStream) -> Arrival {
        // 1. Metering: all three or nothing.
        let reservation = match self.meters.reserve(now, call.input_tokens, call.max_tokens) {
            Reserve::Granted(reservation) => reservation,
            Reserve::Wait(wait) | Reserve::Refused { wait: Some(wait) } => return self.rate_limited(now, wait, rng),
            // More than a bucket holds: it never fits, and the answer says "a minute".
            Reserve::Refused { wait: None } => return self.rate_limited(now, Nanos::MAX, rng),
        };
        // 2. Fleet overload.
        if self.queue.len() > 3 * self.effective_slots() as usize {
            self.meters.cancel(now, reservation);
            let respond_at = now + secs_to_nanos(rng.uniform(0.030, 0.080));
            return Arrival::Overloaded { respond_at, retry_after: secs_to_nanos(rng.uniform(5.0, 10.0)) };
        }
        // 3. A free slot, or the FIFO queue.
        if self.in_service < self.effective_slots() {
            self.in_service += 1;
            Arrival::Started(self.plan(now, call, rng))
        } else {
            self.queue.push_back(Waiting { call, enqueued_at: now });
            Arrival::Queued { gives_up_at: now + QUEUE_TIMEOUT }
        }
    }

    /// A 429 after a 20–50 ms round trip; retry-after is the wait, at most 60 s.
    fn rate_limited(&self, now: Nanos, wait: Nanos, rng: &mut RngStream) -> Arrival {
        let respond_at = now + secs_to_nanos(rng.uniform(0.020, 0.050));
        Arrival::RateLimited { respond_at, retry_after: wait.min(60 * NANOS_PER_SEC) }
    }

    /// A call ended (answer or 500) and frees its slot. Reconciles its output charge
    /// and starts the next waiter, if any (waiters past their 30 s are dropped, their
    /// ids returned through `on_gave_up`).
    pub fn finish(
        &mut self,
        now: Nanos,
        call: CallSpec,
        server_error: bool,
        rng: &mut RngStream,
        mut on_gave_up: impl FnMut(u64),
    ) -> Option<ServicePlan> {
        debug_assert!(self.in_service > 0);
        self.in_service -= 1;
        let used = if server_error { 0 } else { call.output_tokens.min(call.max_tokens) };
        let reservation = Reservation { input_tokens: call.input_tokens, max_tokens: call.max_tokens };
        self.meters.reconcile(now, reservation, used);
        while self.in_service < self.effective_slots() {
            let waiting = self.queue.pop_front()?;
            if now - waiting.enqueued_at >= QUEUE_TIMEOUT {
                on_gave_up(waiting.call.id);
                continue;
            }
            self.in_service += 1;
            return Some(self.plan(now, waiting.call, rng));
        }
        None
    }

    /// The stretch factor at the current load.
    pub fn stretch(&self) -> f64 {
        let rho = ((self.in_service as f64 + self.queue.len() as f64) / self.effective_slots() as f64).min(0.985);
        (1.0 + rho.powi(8) / (1.0 - rho)).min(30.0)
    }

    fn plan(&mut self, now: Nanos, call: CallSpec, rng: &mut RngStream) -> ServicePlan {
        let stretch = self.stretch();
        let jitter = rng.lognormal(0.0, 0.25);
        // Each arm multiplies in its own order: the formula's is the one the golden bytes
        // were written with.
        let first_token_s = match &self.ttft {
            None => {
                (self.spec.base_latency_s + call.input_tokens as f64 / self.spec.prefill_tokens_per_s)
                    * stretch
                    * jitter
                    * self.latency_factor
            }
            Some(ttft) => ttft.sample_s(rng) * stretch * self.latency_factor,
        };
        let decode_s =
            call.output_tokens as f64 / self.spec.decode_tokens_per_s * stretch.min(4.0) * jitter * self.latency_factor;
        let first_token_at = now + secs_to_nanos(first_token_s);
        ServicePlan {
            id: call.id,
            first_token_at,
            done_at: first_token_at + secs_to_nanos(decode_s),
            server_error: rng.bernoulli(self.error_rate),
        }
    }

    /// Output tokens the meter could grant now (for tests and the gateway's view).
    pub fn output_available(&mut self, now: Nanos) -> u64 {
        self.meters.output_available(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;

    const OPUS: TierSpec = TierSpec {
        rpm: 400,
        itpm: 400_000,
        otpm: 320_000,
        prefill_tokens_per_s: 5_000.0,
        decode_tokens_per_s: 35.0,
        base_latency_s: 0.45,
        server_slots: 80,
        burst_s: [60.0; 3],
    };

    fn rng() -> RngStream {
        RngStream::derive(1, 0, StreamPurpose::named("test.provider"))
    }

    fn call(id: u64, max_tokens: u64) -> CallSpec {
        CallSpec { id, input_tokens: 6_800, output_tokens: 2_400, max_tokens }
    }

    /// A measured time to first token replaces the formula: a constant 2 s comes out as
    /// 2 s × the stretch (1 + ρ⁸/(1 − ρ), ρ = 1/80 here), and decode keeps its formula.
    #[test]
    fn a_measured_time_to_first_token_replaces_the_formula() {
        use crate::components::distribution::{Distribution, Shape};
        let mut tier =
            ProviderTier::new(OPUS, 0.0).with_ttft(Some(Distribution::new(Shape::Constant { value_s: 2.0 })));
        let stretch = {
            let rho: f64 = 1.0 / 80.0;
            1.0 + rho.powi(8) / (1.0 - rho)
        };
        let Arrival::Started(plan) = tier.arrive(0, call(1, 8_192), &mut rng()) else { panic!("a free slot") };
        assert_eq!(plan.first_token_at, secs_to_nanos(2.0 * stretch));
        let formula = match ProviderTier::new(OPUS, 0.0).arrive(0, call(1, 8_192), &mut rng()) {
            Arrival::Started(plan) => plan,
            other => panic!("{other:?}"),
        };
        // The same jitter draw: decode time equal to the nanosecond.
        assert_eq!(plan.done_at - plan.first_token_at, formula.done_at - formula.first_token_at);
        assert_ne!(plan.first_token_at, formula.first_token_at);
    }

    /// A brownout's latency factor multiplies both times of the same call at the same
    /// load by exactly that (the jitter is the same draw); ending it restores them.
    #[test]
    fn a_latency_factor_multiplies_first_token_and_decode_times() {
        let plan = |factor: Option<f64>| {
            let mut tier = ProviderTier::new(OPUS, 0.0);
            tier.set_incident(factor.map(|latency_factor| TierIncident {
                health: 1.0,
                error_rate: 0.0,
                latency_factor,
            }));
            match tier.arrive(0, call(1, 8_192), &mut rng()) {
                Arrival::Started(plan) => plan,
                other => panic!("{other:?}"),
            }
        };
        let (healthy, slow) = (plan(None), plan(Some(5.0)));
        let ratio = |a: Nanos, b: Nanos| b as f64 / a as f64;
        assert!((ratio(healthy.first_token_at, slow.first_token_at) - 5.0).abs() < 1e-6);
        let decode = |p: ServicePlan| p.done_at - p.first_token_at;
        assert!((ratio(decode(healthy), decode(slow)) - 5.0).abs() < 1e-6);
        assert_eq!(plan(Some(1.0)), healthy, "a factor of 1 changes nothing, to the nanosecond");
    }

    /// Halving the provider's RPM halves what it admits once the burst is spent: over
    /// ten minutes of one call every 10 ms, 400/min admits its burst of 400 + 4,000
    /// refilled, and 200/min (stepped at the start) 200 (the burst, cut to the new
    /// capacity) + 2,000.
    #[test]
    fn a_rate_limit_step_halves_the_requests_admitted() {
        let admitted = |scales: Option<[f64; 3]>| {
            let mut tier = ProviderTier::new(TierSpec { server_slots: 100_000, ..OPUS }, 0.0);
            if let Some(scales) = scales {
                tier.scale_quota(0, scales);
            }
            let mut rng = rng();
            let mut started = 0u64;
            for i in 0..=60_000u64 {
                let now = i * 10_000_000;
                let tiny = CallSpec { id: i, input_tokens: 1, output_tokens: 1, max_tokens: 1 };
                if let Arrival::Started(plan) = tier.arrive(now, tiny, &mut rng) {
                    started += 1;
                    assert!(plan.done_at >= now);
                    tier.finish(now, tiny, false, &mut rng, |_| {});
                }
            }
            started
        };
        assert_eq!(admitted(None), 400 + 4_000);
        // The bucket keeps the 400 it held, cut to the new capacity of 200.
        assert_eq!(admitted(Some([0.5, 1.0, 1.0])), 200 + 2_000);
        assert_eq!(admitted(Some([1.0; 3])), 400 + 4_000, "scales of 1 restore the published limits");
    }

    #[test]
    fn the_output_reservation_caps_calls_in_flight_at_bucket_over_max_tokens() {
        let mut tier = ProviderTier::new(OPUS, 0.0);
        let mut rng = rng();
        let mut started = 0;
        let mut limited = None;
        for id in 0..100 {
            match tier.arrive(0, call(id, 8_192), &mut rng) {
                Arrival::Started(_) => started += 1,
                Arrival::RateLimited { retry_after, respond_at } => {
                    assert!((20_000_000..=50_000_000).contains(&respond_at));
                    limited.get_or_insert(retry_after);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        // ITPM holds 400,000 / 6,800 = 58 calls, OTPM 320,000 / 8,192 = 39: OTPM binds.
        assert_eq!(started, 39);
        // The 40th needs 8,192 − 320,000 mod 8,192 = 7,680 more tokens at 320,000/min: 1.44 s.
        assert_eq!(limited, Some(1_440_000_000));
    }

    #[test]
    fn reconciliation_returns_the_unused_reservation_and_a_500_returns_all() {
        let mut tier = ProviderTier::new(OPUS, 0.0);
        let mut rng = rng();
        let Arrival::Started(plan) = tier.arrive(0, call(1, 8_192), &mut rng) else { panic!() };
        assert_eq!(tier.output_available(0), 320_000 - 8_192);
        tier.finish(0, call(1, 8_192), plan.server_error, &mut rng, |_| {});
        assert_eq!(tier.output_available(0), 320_000 - 2_400, "2,400 written stay charged");
        let Arrival::Started(_) = tier.arrive(0, call(2, 8_192), &mut rng) else { panic!() };
        tier.finish(0, call(2, 8_192), true, &mut rng, |_| {});
        assert_eq!(tier.output_available(0), 320_000 - 2_400, "a 500 reconciles everything back");
    }

    #[test]
    fn service_time_follows_the_stretch_formula() {
        let mut tier = ProviderTier::new(OPUS, 0.0);
        assert_eq!(tier.stretch(), 1.0);
        // Unloaded: ttft ≈ (0.45 + 6800/5000) = 1.81 s and decode ≈ 2400/35 = 68.6 s, times j.
        let mut rng = rng();
        let Arrival::Started(plan) = tier.arrive(0, call(1, 4_000), &mut rng) else { panic!() };
        let ttft = plan.first_token_at as f64 / 1e9;
        let decode = (plan.done_at - plan.first_token_at) as f64 / 1e9;
        assert!((decode / ttft - 68.571 / 1.81).abs() < 0.01, "the same jitter scales both: {ttft} {decode}");
        // Half full: ρ = 0.5, stretch = 1 + 0.5⁸/0.5.
        tier.in_service = 40;
        assert!((tier.stretch() - (1.0 + 0.5f64.powi(8) / 0.5)).abs() < 1e-12);
        tier.in_service = 200;
        assert_eq!(tier.stretch(), 30.0_f64.min(1.0 + 0.985f64.powi(8) / 0.015));
    }

    #[test]
    fn a_full_fleet_queues_fifo_then_answers_529_with_refunds() {
        let spec = TierSpec { server_slots: 2, rpm: 1_000_000, itpm: 1_000_000_000, otpm: 1_000_000_000, ..OPUS };
        let mut tier = ProviderTier::new(spec, 0.0);
        let mut rng = rng();
        let mut plans = Vec::new();
        for id in 0..2 {
            let Arrival::Started(plan) = tier.arrive(0, call(id, 4_000), &mut rng) else { panic!() };
            plans.push(plan);
        }
        for id in 2..9 {
            assert!(
                matches!(tier.arrive(0, call(id, 4_000), &mut rng), Arrival::Queued { gives_up_at } if gives_up_at == 30 * NANOS_PER_SEC)
            );
        }
        // 7 queued > 3 × 2 slots: the next call is refused with a 529 and refunded.
        let before = tier.output_available(0);
        let Arrival::Overloaded { retry_after, .. } = tier.arrive(0, call(99, 4_000), &mut rng) else { panic!() };
        assert!((5 * NANOS_PER_SEC..=10 * NANOS_PER_SEC).contains(&retry_after));
        assert_eq!(tier.output_available(0), before);
        // A freed slot goes to the oldest waiter.
        let next = tier.finish(NANOS_PER_SEC, call(0, 4_000), false, &mut rng, |_| panic!("nobody gave up"));
        assert_eq!(next.map(|p| p.id), Some(2));
        // Waiters older than 30 s give up instead of being served.
        let mut gave_up = Vec::new();
        let next = tier.finish(31 * NANOS_PER_SEC, call(1, 4_000), false, &mut rng, |id| gave_up.push(id));
        assert_eq!(next, None);
        assert_eq!(gave_up, vec![3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn incidents_shrink_the_fleet_and_raise_the_error_rate() {
        let mut tier = ProviderTier::new(OPUS, 0.002);
        tier.set_incident(Some(TierIncident { health: 0.05, error_rate: 1.0, latency_factor: 1.0 }));
        assert_eq!(tier.effective_slots(), 4);
        let mut rng = rng();
        let Arrival::Started(plan) = tier.arrive(0, call(1, 4_000), &mut rng) else { panic!() };
        assert!(plan.server_error, "an outage fails every call");
        tier.set_incident(None);
        assert_eq!(tier.effective_slots(), 80);
    }
}
