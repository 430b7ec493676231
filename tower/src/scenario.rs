//! One configuration, two uses: the stack a scenario simulated, built from the same
//! TOML by the same parser (`stampede_scenario`), so a bad file fails here with
//! the message and exit code `stampede run` gives it.
//!
//! * [`from_scenario`]`(path, "api->payments")`: a graph edge's client side — its
//!   retries (max attempts, backoff, which failures, the budget), its hedges, its
//!   circuit breaker and its per-attempt timeout, in the simulator's order: the retry
//!   loop outside, then each try's hedges, then per attempt the breaker and the timeout.
//! * [`service_from_scenario`]`(path, "payments")`: a graph service's protection, per
//!   instance — its rate limit, its priority shedder (over its workers) and its
//!   concurrency limit, in the order the simulated server checks them.
//!
//! What a scenario says that a process cannot take from it: the network and the
//! balancer (the client's transport's), and a propagated deadline: an inner edge's
//! deadline is what is left of its caller's, which travels with the request in
//! production (a header); the client's own edge takes the workload's deadline (the
//! retry layer checks it; a hedge is not held back by it, where the simulator sends
//! none after the deadline — the timeout bounds it).

use std::path::Path;
use std::time::Duration;

use stampede_engine::models::cluster::RetryPolicy;
use stampede_engine::models::graph::{EdgeParams, Failure, FailureSet, ServiceParams};
use stampede_policy::backoff::Backoff;
use stampede_policy::breaker::{BreakerConfig, CircuitBreaker};
use stampede_policy::classify::{RetryClassifier, RetryDecision};
use stampede_policy::limiter::ConcurrencyLimiter;
use stampede_policy::retry_budget::RetryBudget;
use stampede_policy::shedder::PriorityShedder;
use stampede_policy::token_bucket::TokenBucket;
use stampede_scenario::models::cluster::Cluster;
use stampede_scenario::models::graph::{build, Graph, Topology};
use stampede_scenario::models::ModelSpec;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Error, GridPoint, Overrides, Result, Scenario};
use tower_layer::Layer;

use crate::gate::{AllCritical, FromExtension, GateLayer, Gated};
use crate::gates::{BreakerGate, LimitGate, RateGate, ShedGate};
use crate::hedge::{hedge, Hedge, HedgeLayer, MAX_HEDGES};
use crate::outcome::ErrorsFail;
use crate::retry::{retry, Retry, RetryConfig, RetryLayer};
use crate::timeout::{timeout, Timeout, TimeoutLayer};
use crate::Clock;

/// A graph edge's client-side policies, as layers.
#[derive(Debug)]
pub struct EdgeStack<C = ErrorsFail> {
    /// Retries with the edge's backoff and budget (one attempt without `[retry]`).
    pub retry: RetryLayer<C>,
    /// Without a `[hedge]` section, a pass-through.
    pub hedge: HedgeLayer<C>,
    /// `None` inside when the edge has no breaker.
    pub breaker: GateLayer<Option<BreakerGate>, C>,
    /// The edge's per-attempt timeout.
    pub timeout: TimeoutLayer,
    /// The retry settings as resolved, for display.
    pub retry_config: RetryConfig,
}

/// The service an [`EdgeStack`] builds around `S`.
pub type EdgeService<S, C = ErrorsFail> = Retry<Hedge<Gated<Timeout<S>, Option<BreakerGate>, C, AllCritical>, C>, C>;

impl<C: Clone> EdgeStack<C> {
    /// The same stack, reading outcomes with `classify` (e.g. [`crate::HttpStatus`]).
    pub fn classify<C2: Clone>(self, classify: C2) -> EdgeStack<C2> {
        EdgeStack {
            retry: self.retry.classify(classify.clone()),
            hedge: self.hedge.classify(classify.clone()),
            breaker: self.breaker.classify(classify),
            timeout: self.timeout,
            retry_config: self.retry_config,
        }
    }
}

/// Wraps a service: retries outside, then the hedges of each try, then per attempt
/// the breaker and the timeout.
impl<S, C: Clone> Layer<S> for EdgeStack<C> {
    type Service = EdgeService<S, C>;

    fn layer(&self, inner: S) -> EdgeService<S, C> {
        self.retry.layer(self.hedge.layer(self.breaker.layer(self.timeout.layer(inner))))
    }
}

/// A graph service's protection for one instance, as layers.
#[derive(Debug)]
pub struct ServiceStack<C = ErrorsFail> {
    /// The token-bucket rate limit (`None` inside without one).
    pub rate_limit: GateLayer<Option<RateGate>, C>,
    /// The priority shedder, reading each request's criticality from its extensions.
    pub shedder: GateLayer<Option<ShedGate>, C, FromExtension>,
    /// The concurrency limiter.
    pub limiter: GateLayer<Option<LimitGate>, C>,
}

/// The service a [`ServiceStack`] builds around `S`.
pub type ProtectedService<S, C = ErrorsFail> = Gated<
    Gated<Gated<S, Option<LimitGate>, C, AllCritical>, Option<ShedGate>, C, FromExtension>,
    Option<RateGate>,
    C,
    AllCritical,
>;

/// Wraps a service: the rate limit outside, then the shedder, then the limit.
impl<S, C: Clone> Layer<S> for ServiceStack<C> {
    type Service = ProtectedService<S, C>;

    fn layer(&self, inner: S) -> ProtectedService<S, C> {
        self.rate_limit.layer(self.shedder.layer(self.limiter.layer(inner)))
    }
}

/// The client side of edge `edge` (`caller->callee`, or `client->entry`) of the graph
/// scenario at `path` (or a built-in scenario's name), which has one grid point.
/// `seed` feeds the jitter.
pub fn from_scenario(path: impl AsRef<Path>, edge: &str, seed: u64) -> Result<EdgeStack> {
    from_scenario_point(path, None, edge, seed)
}

/// [`from_scenario`] at grid point `point` (`stampede show` lists them; `None`: the
/// scenario must have one).
pub fn from_scenario_point(path: impl AsRef<Path>, point: Option<usize>, edge: &str, seed: u64) -> Result<EdgeStack> {
    let (topology, deadline) = resolve(path.as_ref(), point)?;
    let index = find(&topology.edges, edge, "edge")?;
    let params = &topology.params.edges[index];
    // The client's own edge carries the workload's deadline.
    let deadline = params.from.is_none().then_some(deadline).flatten();
    edge_stack(params, deadline, seed).map_err(|error| error.context(format_args!("edge {edge:?}")))
}

/// The protection of service `service` of the graph scenario at `path` (at grid
/// point `point`, as in [`from_scenario_point`]), for one of its instances. `seed`
/// feeds the draws some limiters make.
pub fn service_from_scenario(
    path: impl AsRef<Path>,
    point: Option<usize>,
    service: &str,
    seed: u64,
) -> Result<ServiceStack> {
    let (topology, _) = resolve(path.as_ref(), point)?;
    let index = find(&topology.services, service, "service")?;
    Ok(service_stack(&topology.params.services[index], seed))
}

/// The edge's policies as layers (the scenario's meaning of each field). A hedge of
/// more than [`MAX_HEDGES`] per try is refused.
pub fn edge_stack(params: &EdgeParams, deadline: Option<Duration>, seed: u64) -> Result<EdgeStack> {
    if let Some(config) = params.hedge.filter(|config| config.max_hedges > MAX_HEDGES) {
        return Err(Error::bad_input(format!(
            "hedge.max = {}: stampede-tower sends at most {MAX_HEDGES} hedges per try (gRPC's limit: maxAttempts 5)",
            config.max_hedges
        )));
    }
    if params.adaptive_timeout.is_some() {
        return Err(Error::bad_input(
            "timeout_s = \"pNN\": stampede-tower's per-attempt timeout is fixed; give this edge timeout_s in seconds",
        ));
    }
    let retry_config = RetryConfig {
        max_attempts: params.max_attempts.max(1),
        backoff: params.backoff,
        classifier: retry_classifier(params.retry_on),
        deadline,
    };
    let attempt_timeout = params.timeout.map(Duration::from_nanos);
    let mut stack = client_stack(retry_config, params.budget.clone(), params.breaker, attempt_timeout, seed);
    stack.hedge = hedge(params.hedge).with_retry(&stack.retry, params.hedge_uses_budget);
    Ok(stack)
}

/// Retries around a breaker around a per-attempt timeout, no hedging: a graph edge's
/// client and a cluster's.
fn client_stack(
    retry_config: RetryConfig,
    budget: RetryBudget,
    breaker: Option<BreakerConfig>,
    attempt_timeout: Option<Duration>,
    seed: u64,
) -> EdgeStack {
    let breaker = breaker.map(|config| BreakerGate(CircuitBreaker::new(config)));
    let retry = retry(retry_config, budget, seed);
    EdgeStack {
        hedge: hedge(None).with_retry(&retry, false),
        retry,
        breaker: GateLayer::new(breaker, Clock::new(), ErrorsFail, AllCritical),
        timeout: timeout(attempt_timeout),
        retry_config,
    }
}

/// The service's protection as layers, for one instance (the simulator's are per instance).
pub fn service_stack(params: &ServiceParams, seed: u64) -> ServiceStack {
    let clock = Clock::new();
    let rate = params.rate_limit.map(|(per_s, burst)| RateGate(TokenBucket::per_second(per_s, burst)));
    let shedder = params.shedder.map(|marks| ShedGate(PriorityShedder::new(params.workers, marks)));
    let limiter = params.limiter.map(|kind| LimitGate::new(ConcurrencyLimiter::new(kind), seed));
    ServiceStack {
        rate_limit: GateLayer::new(rate, clock, ErrorsFail, AllCritical),
        shedder: GateLayer::new(shedder, clock, ErrorsFail, FromExtension),
        limiter: GateLayer::new(limiter, clock, ErrorsFail, AllCritical),
    }
}

/// The graph's failure names as the retry classifier's outcomes: `timeout` a timeout,
/// `refused` an overloaded or rate-limited answer (after the server's retry-after),
/// `error` a server error; a client error is never retried.
pub fn retry_classifier(on: FailureSet) -> RetryClassifier {
    let decide = |failure: Failure, yes: RetryDecision| if on.contains(failure) { yes } else { RetryDecision::Never };
    RetryClassifier {
        rate_limited: decide(Failure::Refused, RetryDecision::RetryAfterServerDelay),
        overloaded: decide(Failure::Refused, RetryDecision::RetryAfterServerDelay),
        server_error: decide(Failure::Error, RetryDecision::Retry),
        timeout: decide(Failure::Timeout, RetryDecision::Retry),
        client_error: RetryDecision::Never,
    }
}

/// The scenario's graph, resolved as `stampede run` resolves it, and its first
/// workload's deadline.
fn resolve(path: &Path, point: Option<usize>) -> Result<(Topology, Option<Duration>)> {
    let point = choose::<Graph>(path, point, "graph")?;
    let config = point.model.downcast::<Graph>().expect("every point has the scenario's model");
    let topology = build::build(config)?;
    let deadline = topology.params.workloads.first().and_then(|w| w.deadline).map(Duration::from_nanos);
    Ok((topology, deadline))
}

/// The grid point `point` of the scenario at `path` (the only one when `None`), which
/// must be a `model` scenario.
pub(crate) fn choose<M: ModelSpec>(path: &Path, point: Option<usize>, model: &str) -> Result<GridPoint> {
    let argument = path.to_string_lossy();
    let source = load_scenario_source(&argument)?;
    let scenario = Scenario::resolve(source, &Overrides::default())?;
    let mut points = scenario.grid_points()?;
    let describe = || {
        let each = points.iter().map(|p| {
            let params: Vec<String> = p.params.iter().map(|(axis, value)| format!("{axis} = {value}")).collect();
            format!("{}: {}", p.index, params.join(", "))
        });
        each.collect::<Vec<_>>().join("; ")
    };
    if let Some(first) = points.first().filter(|p| p.model.downcast::<M>().is_none()) {
        return Err(Error::bad_input(format!(
            "{argument}: this stack is built from a {model} scenario (model = \"{model}\"); this one is model = {:?}",
            first.model.name()
        )));
    }
    let index = match point {
        None if points.len() == 1 => 0,
        None => {
            return Err(Error::bad_input(format!(
                "{argument}: a stack is built from one configuration, and this scenario's grid has {} points ({})",
                points.len(),
                describe()
            ))
            .with_hint("choose one with from_scenario_point(path, Some(INDEX), …)"));
        }
        Some(index) if index < points.len() => index,
        Some(index) => {
            return Err(Error::bad_input(format!(
                "{argument}: grid point {index} does not exist; its points are {}",
                describe()
            )));
        }
    };
    Ok(points.swap_remove(index))
}

/// The cluster scenario's client (`[retry]`, `[retry.breaker]`, `attempt_timeout_s`) at
/// grid point `point` (`None`: the scenario must have one), as the stack
/// [`from_scenario`] builds for a graph edge: retries around the breaker around the
/// timeout. The cluster retries every failure (timeouts, refusals, errors; never a
/// client error), without a deadline; `naive` retries at once. Its breaker is one per
/// shard: put one stack in front of each upstream host.
pub fn from_cluster_scenario(path: impl AsRef<Path>, point: Option<usize>, seed: u64) -> Result<EdgeStack> {
    let point = choose::<Cluster>(path.as_ref(), point, "cluster")?;
    let config = point.model.downcast::<Cluster>().expect("every point has the scenario's model");
    let params = config.params(&point.run);
    let (max_attempts, backoff) = match params.retry {
        RetryPolicy::None => (1, Backoff::Constant { delay: 0 }),
        RetryPolicy::Naive { max_attempts } => (max_attempts, Backoff::Constant { delay: 0 }),
        RetryPolicy::Backoff { max_attempts, backoff } => (max_attempts, backoff),
    };
    let retry_config = RetryConfig {
        max_attempts: max_attempts.max(1),
        backoff,
        classifier: RetryClassifier::EVERY_FAILURE,
        deadline: None,
    };
    let attempt_timeout = Some(Duration::from_nanos(params.attempt_timeout));
    Ok(client_stack(retry_config, params.budget, params.breaker, attempt_timeout, seed))
}

fn find(names: &[String], wanted: &str, what: &str) -> Result<usize> {
    names.iter().position(|name| name == wanted).ok_or_else(|| {
        Error::bad_input(format!("{what} {wanted:?} is not in the scenario; its {what}s are: {}", names.join(", ")))
    })
}
