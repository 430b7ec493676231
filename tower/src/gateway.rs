//! The LLM gateway's `[stack]`, built from the scenario that simulated it: for each
//! call class, the defences `stack.gates` lists, in its order, each the layer over
//! the policy struct the simulated gate holds, with the scenario's (and the
//! fixture's) numbers — and shared where the simulator shares them:
//!
//! * **admission**: one controller for the gateway (the ladder, each class's rung,
//!   the tenants' fair share of the classes' bulkhead slots); its pressure is the
//!   admitted calls over that capacity and every tier's quota meter;
//! * **bulkhead**: per class (its slots, its queue, the queue order and CoDel; a
//!   waiter gives up at the class's deadline);
//! * **adaptive**: the concurrency limiter per class, or per tier (`limiter_scope`);
//! * **breaker**: per class;
//! * **quota**: the tier's meters (RPM, ITPM, OTPM with headroom and the longest
//!   wait), one per tier, shared by its classes;
//! * **retry**: the class's attempts, backoff and deadline, the classifier, one ratio
//!   budget for the gateway (`stack.retry_budget`);
//! * the class's total timeout per attempt, innermost.
//!
//! A gate left out of `stack.gates` is an empty place. The naive client
//! (`stack.client = "naive"`) is its one timeout per call around immediate retries.
//!
//! Beside the class stacks, the scenario gives what sits around them:
//! [`GatewayStacks::stream_timeouts`] (a class's `timeouts_s` as the body wrapper,
//! innermost, around the provider), [`GatewayStacks::fallback`] (the `fallback` gate:
//! outermost, sending a failed call once to the service you give it — the stack of
//! [`GatewayStacks::fallback_class`] over that tier's provider, or a local answer) and
//! [`GatewayStacks::share_quota`] (each tier's meter moved into a store every gateway
//! process shares: the simulation's coordinated meter).
//!
//! What a scenario says that a process cannot take from it: the provider (tiers,
//! speeds, incidents) and the turn plan. Admission reads each call as its class's,
//! from tenant 0, with the class's deadline; [`ClassStack::applicant`] reads them from
//! the request.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stampede_engine::models::gateway::{Client, Gate, GatewayParams, LimiterScope};
use stampede_policy::backoff::Backoff;
use stampede_policy::breaker::CircuitBreaker;
use stampede_policy::classify::RetryClassifier;
use stampede_policy::quota::QuotaMeter;
use stampede_policy::retry_budget::RetryBudget;
use stampede_policy::Criticality;
use stampede_scenario::models::gateway::Gateway;
use stampede_scenario::{Error, Result};
use tower_layer::Layer;

use crate::admission::{admission, AdmissionConfig, AdmissionLayer, AdmissionState, Applicant, ApplicantOf};
use crate::bulkhead::{bulkhead, BulkheadLayer};
use crate::clock::Clock;
use crate::fallback::{fallback, FallbackLayer};
use crate::gate::{AllCritical, GateLayer};
use crate::gates::{BreakerGate, LimitGate};
use crate::outcome::ErrorsFail;
use crate::quota::{quota_over, quota_store, QuotaLayer, QuotaStore};
use crate::retry::{retry, RetryConfig, RetryLayer};
use crate::scenario::choose;
use crate::shared::Shared;
use crate::steps::{Step, StepService, STEPS};
use crate::stream::{provider_stream_error, stream_timeouts, StreamTimeoutLayer, StreamTimeouts};
use crate::timeout::timeout;

/// Every call of a class reads as that class's, from tenant 0, `Critical`, with the
/// class's deadline left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassApplicant {
    /// The call class (its index in the fixture).
    pub class: u16,
    /// The class's deadline, from the call's start.
    pub deadline: Duration,
}

impl<Req> ApplicantOf<Req> for ClassApplicant {
    fn applicant(&self, _: &Req) -> Applicant {
        Applicant { class: self.class, criticality: Criticality::Critical, tenant: 0, time_left: Some(self.deadline) }
    }
}

/// A gateway scenario's stacks, one per call class, over shared state.
#[derive(Debug)]
pub struct GatewayStacks {
    params: GatewayParams,
    admission: AdmissionLayer<ClassApplicant>,
    bulkheads: Vec<BulkheadLayer>,
    /// Per class or per tier, as `limiter_scope` says.
    limiters: Vec<GateLayer<LimitGate, ErrorsFail>>,
    breakers: Vec<GateLayer<BreakerGate, ErrorsFail>>,
    /// Per tier; the token reader is given per class.
    meters: Vec<QuotaLayer<()>>,
    retry: RetryLayer,
}

/// The stacks of the gateway scenario at `path` (or a built-in's name) at grid point
/// `point` (`None`: it must have one). `seed` feeds the jitter and the limiters' draws.
pub fn gateway_from_scenario(path: impl AsRef<Path>, point: Option<usize>, seed: u64) -> Result<GatewayStacks> {
    let point = choose::<Gateway>(path.as_ref(), point, "gateway")?;
    let config = point.model.downcast::<Gateway>().expect("every point has the scenario's model");
    Ok(GatewayStacks::new(config.params(&point.run), seed))
}

impl GatewayStacks {
    /// The stacks for a gateway's parameters (what [`gateway_from_scenario`] reads).
    pub fn new(params: GatewayParams, seed: u64) -> Self {
        let p = &params;
        let nanos = Duration::from_nanos;
        let capacity = p.classes.iter().map(|c| c.pressure_slots).sum::<u32>().max(1);
        // One process is one gateway instance: its meter is the fleet's when the quota is
        // coordinated, its own share when split.
        // Its buckets hold the tier's bursts, as the simulated client meter's do.
        let longest_wait = nanos(p.quota.longest_wait);
        let meters: Vec<QuotaLayer<()>> =
            (0..p.tiers.len()).map(|tier| quota_over(p.quota_meter(tier, p.quota), longest_wait, ())).collect();
        let mut admission = admission(
            AdmissionConfig {
                ladder: p.ladder,
                tenants: p.tenants,
                capacity,
                class_rungs: p.classes.iter().map(|c| c.shed_from_rung).collect(),
                expected: (0..p.classes.len()).map(|class| nanos(p.unloaded_latency(class))).collect(),
            },
            ClassApplicant { class: 0, deadline: nanos(p.classes[0].deadline) },
        );
        for meter in &meters {
            admission = admission.with_quota(meter.meter());
        }
        // A waiter gives up at its class's deadline.
        let bulkheads = (0..p.classes.len())
            .map(|class| bulkhead(p.bulkhead_config(class), nanos(p.classes[class].deadline)))
            .collect();
        let limiter_count = match p.limiter_scope {
            LimiterScope::Class => p.classes.len(),
            LimiterScope::Tier => p.tiers.len(),
        };
        let clock = Clock::new();
        let limiters = (0..limiter_count)
            .map(|index| {
                let gate = LimitGate::new(p.limiter(), seed.wrapping_add(index as u64));
                GateLayer::new(gate, clock, ErrorsFail, AllCritical)
            })
            .collect();
        let breakers = p
            .classes
            .iter()
            .map(|_| GateLayer::new(BreakerGate(CircuitBreaker::new(p.breaker)), clock, ErrorsFail, AllCritical))
            .collect();
        // The gateway's one budget, the model's.
        let budget = p.ratio_budget().map_or(RetryBudget::Unlimited, RetryBudget::Ratio);
        let first = RetryConfig {
            max_attempts: 1,
            backoff: Backoff::Constant { delay: 0 },
            classifier: p.classifier,
            deadline: None,
        };
        let retry = retry(first, budget, seed);
        GatewayStacks { params, admission, bulkheads, limiters, breakers, meters, retry }
    }

    /// The call classes, in the scenario's order (re-sent copies included).
    pub fn classes(&self) -> &[&'static str] {
        &self.params.class_names
    }

    /// The gateway's parameters as the simulator reads them.
    pub fn params(&self) -> &GatewayParams {
        &self.params
    }

    /// The admission every class shares (its refusals, its pressure).
    pub fn admission(&self) -> &Shared<AdmissionState> {
        self.admission.state()
    }

    /// The retry state every class shares (the budget, the counts).
    pub fn retry(&self) -> &RetryLayer {
        &self.retry
    }

    /// Tier `tier`'s quota meter layer (with no token reader; see [`Self::class`]).
    pub fn meter(&self, tier: usize) -> &QuotaLayer<()> {
        &self.meters[tier]
    }

    /// Moves each tier's quota into a store shared with other processes:
    /// `store(tier, meter)` returns where tier `tier`'s buckets live, given the meter
    /// this process would have kept (the tier's limits, headroom and bursts — seed a
    /// Redis store from its numbers). The simulation's coordinated meter
    /// (`coordinated_quota = true`, the default) is one meter for the fleet: its twin
    /// is one store every gateway process shares; admission reads the stores' pressure.
    pub fn share_quota(mut self, mut store: impl FnMut(usize, QuotaMeter) -> Arc<dyn QuotaStore>) -> Self {
        let p = &self.params;
        let wait = Duration::from_nanos(p.quota.longest_wait);
        let stores: Vec<Arc<dyn QuotaStore>> =
            (0..p.tiers.len()).map(|tier| store(tier, p.quota_meter(tier, p.quota))).collect();
        self.meters = stores.iter().map(|s| quota_store(s.clone(), wait, ())).collect();
        self.admission.replace_quota_stores(stores);
        self
    }

    /// The index of class `name`, or an error naming the classes there are.
    fn class_index(&self, name: &str) -> Result<usize> {
        let names = &self.params.class_names;
        names.iter().position(|n| *n == name).ok_or_else(|| {
            Error::bad_input(format!("class {name:?} is not in the scenario; its classes are: {}", names.join(", ")))
        })
    }

    /// Class `name`'s per-attempt bounds (`timeouts_s`: connect, first token, the gap
    /// between tokens, total) as a [`StreamTimeoutLayer`] that also reads the
    /// providers' error events inside a 200 stream ([`provider_stream_error`]). Put it
    /// innermost, around the provider's service: the class's stack outside then sees
    /// the response at its first token, as the simulated gates do. For an unstreamed
    /// class the first "token" is the whole answer, as the simulation reads it.
    pub fn stream_timeouts(&self, name: &str) -> Result<StreamTimeoutLayer> {
        let t = self.params.classes[self.class_index(name)?].timeouts;
        let bounds = StreamTimeouts {
            connect: Some(Duration::from_nanos(t.connect)),
            first_token: Some(Duration::from_nanos(t.first_token)),
            inter_token: t.inter_token.map(Duration::from_nanos),
            total: Some(Duration::from_nanos(t.total)),
        };
        Ok(stream_timeouts(bounds).errors_in_stream(provider_stream_error))
    }

    /// The simulated `no_retry_past_delivered` rule, for a stream that broke after the
    /// response was handed on (an inter-token or total timeout, an in-stream error:
    /// the layers outside saw a success): start the call over only if fewer than that
    /// share of its `expected` output tokens were `delivered` (count them from
    /// [`crate::TimedBody::frames`] or the deltas; `expected` is your estimate, the
    /// simulation knows it exactly).
    pub fn worth_restarting(&self, delivered: u64, expected: u64) -> bool {
        self.params.worth_restarting(delivered, expected)
    }

    /// Where a failed call of class `name` goes when the stack has the `fallback`
    /// gate: `Some(class)` another class's stack (a `NAME_fallback` copy is the same
    /// call on the fallback tier), `None` an answer your product makes locally. An
    /// error when this scenario does not fall back for the class.
    pub fn fallback_class(&self, name: &str) -> Result<Option<&'static str>> {
        let p = &self.params;
        let class = self.class_index(name)?;
        let stack_falls_back = matches!(p.client, Client::Stack) && p.gates.contains(&Gate::Fallback);
        if !(stack_falls_back && p.classes[class].has_fallback) {
            let why = if stack_falls_back { "the class has no fallback" } else { "stack.gates has no \"fallback\"" };
            return Err(Error::bad_input(format!("class {name:?} does not fall back in this scenario: {why}")));
        }
        Ok(p.classes[class].fallback.map(|fallback| p.class_names[fallback]))
    }

    /// The fallback layer of class `name`: outermost, around its stack, sending a call
    /// the stack fails (by `classify`) once to `service` — the stack of
    /// [`Self::fallback_class`] over that tier's provider, or your local answer — and
    /// counting the degraded answers as the simulation's `turns_degraded` does. An
    /// error when this scenario does not fall back for the class.
    pub fn fallback<F, C>(&self, name: &str, service: F, classify: C) -> Result<FallbackLayer<F, C>> {
        self.fallback_class(name)?;
        Ok(fallback(service, classify))
    }

    /// The stack of class `name`, reading a request's input tokens and `max_tokens`,
    /// and an answer's output tokens, with `tokens` (a [`crate::Tokens`]).
    pub fn class<T: Clone>(&self, name: &str, tokens: T) -> Result<ClassStack<ClassApplicant, T>> {
        let p = &self.params;
        let class = self.class_index(name)?;
        let c = &p.classes[class];
        let applicant = ClassApplicant { class: class as u16, deadline: Duration::from_nanos(c.deadline) };
        let mut steps: [Step<ClassApplicant, T, ErrorsFail>; STEPS] = std::array::from_fn(|_| Step::Pass);
        match p.client {
            Client::Naive { attempts, timeout: call_timeout } => {
                // One timeout per call around immediate attempts on any failure.
                steps[0] = Step::Timeout(timeout(Some(Duration::from_nanos(call_timeout))));
                let config = RetryConfig {
                    max_attempts: attempts.max(1),
                    backoff: Backoff::Constant { delay: 0 },
                    classifier: RetryClassifier::EVERY_FAILURE,
                    deadline: None,
                };
                steps[1] = Step::Retry(self.retry.sharing_budget(config));
            }
            Client::Stack => {
                let mut place = 0;
                for gate in &p.gates {
                    let step = match gate {
                        Gate::Admission => Step::Admission(self.admission.applicant(applicant)),
                        Gate::Bulkhead => Step::Bulkhead(self.bulkheads[class].clone()),
                        Gate::Adaptive => Step::Adaptive(
                            self.limiters[match p.limiter_scope {
                                LimiterScope::Class => class,
                                LimiterScope::Tier => c.tier,
                            }]
                            .clone(),
                        ),
                        Gate::Breaker => Step::Breaker(self.breakers[class].clone()),
                        Gate::Quota => Step::Quota(self.meters[c.tier].tokens(tokens.clone())),
                        Gate::Retry => Step::Retry(self.retry.sharing_budget(RetryConfig {
                            max_attempts: c.max_attempts.max(1),
                            backoff: c.backoff,
                            classifier: p.classifier,
                            deadline: Some(Duration::from_nanos(c.deadline)),
                        })),
                        // Outermost, around this stack: `GatewayStacks::fallback`.
                        Gate::Fallback => continue,
                    };
                    steps[place] = step;
                    place += 1;
                }
                debug_assert!(place < STEPS, "six gates and the timeout fit");
                steps[STEPS - 1] = Step::Timeout(timeout(Some(Duration::from_nanos(c.timeouts.total))));
            }
        }
        Ok(ClassStack { steps })
    }
}

/// One call class's stack: [`STEPS`] places, outermost first.
#[derive(Debug)]
pub struct ClassStack<A, T, C = ErrorsFail> {
    /// The places, outermost first; an absent gate is [`Step::Pass`].
    pub steps: [Step<A, T, C>; STEPS],
}

impl<A, T, C: Clone> ClassStack<A, T, C> {
    /// The same stack, reading outcomes with `classify` (e.g. [`crate::HttpStatus`]).
    pub fn classify<C2: Clone>(self, classify: C2) -> ClassStack<A, T, C2> {
        ClassStack { steps: self.steps.map(|step| step.classify(classify.clone())) }
    }

    /// The same stack, admission reading each request's tenant, criticality and time
    /// left with `applicant` (which names the class too).
    pub fn applicant<A2: Clone>(self, applicant: A2) -> ClassStack<A2, T, C> {
        ClassStack { steps: self.steps.map(|step| step.applicant(applicant.clone())) }
    }

    /// The layers in order, outermost first, by their `stack.gates` names.
    pub fn order(&self) -> Vec<&'static str> {
        self.steps.iter().map(Step::name).filter(|name| *name != "none").collect()
    }
}

/// The service a [`ClassStack`] builds around `S`.
pub type ClassService<S, A, T, C = ErrorsFail> = StepService<
    StepService<
        StepService<StepService<StepService<StepService<StepService<S, A, T, C>, A, T, C>, A, T, C>, A, T, C>, A, T, C>,
        A,
        T,
        C,
    >,
    A,
    T,
    C,
>;

impl<S, A: Clone, T: Clone, C: Clone> Layer<S> for ClassStack<A, T, C> {
    type Service = ClassService<S, A, T, C>;

    fn layer(&self, inner: S) -> ClassService<S, A, T, C> {
        let [a, b, c, d, e, f, g] = &self.steps;
        a.layer(b.layer(c.layer(d.layer(e.layer(f.layer(g.layer(inner)))))))
    }
}
