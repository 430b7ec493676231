//! One configuration, two uses: stacks built from the TOML `stampede run` simulates,
//! by the same parser, with its errors.

// Builds stacks from scenario files: only with the `scenario` feature (its parser
// brings the simulator's output stack; see Cargo.toml).
#![cfg(feature = "scenario")]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use stampede_policy::backoff::Backoff;
use stampede_policy::classify::RetryDecision;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};
use stampede_tower::{from_scenario, from_scenario_point, service_from_scenario, BoxError, Rejected};
use tower_layer::Layer;
use tower_service::Service;

const SCENARIO: &str = r#"
name = "payments"
model = "graph"

[run]
horizon_s = 10.0
replicas = 2

[services.api]
workers = 8
[services.api.endpoints.pay]
work = { dist = "exponential", mean_s = 0.001 }
steps = [{ call = "payments.charge" }]

[services.payments]
workers = 4
rate_limit = { per_s = 10.0, burst = 3 }
[services.payments.endpoints.charge]
work = { dist = "exponential", mean_s = 0.01 }

[edges."api->payments"]
timeout_s = 0.2
retry = { max_attempts = 3, backoff = "constant", backoff_base_s = 0.05, on = ["timeout"], budget = "ratio" }
breaker = { enabled = true, failure_rate_threshold = 0.5, minimum_calls = 5, window_s = 10.0, open_s = 5.0, half_open_probes = 2 }

[[workload]]
entry = "api.pay"
rate_per_s = 50.0
deadline_s = 1.5
"#;

/// `text` as a scenario file, removed when the returned path is dropped.
fn scenario_file(text: &str) -> tempfile::TempPath {
    let mut file = tempfile::Builder::new().suffix(".toml").tempfile().expect("a temporary file");
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("written");
    file.into_temp_path()
}

#[test]
fn an_edge_stack_carries_the_edges_retry_breaker_and_timeout_as_the_simulator_reads_them() {
    let path = scenario_file(SCENARIO);
    let stack = from_scenario(&path, "api->payments", 1).expect("a valid scenario");
    let config = stack.retry_config;
    assert_eq!(config.max_attempts, 3);
    assert_eq!(config.backoff, Backoff::Constant { delay: 50_000_000 });
    assert_eq!(config.classifier.timeout, RetryDecision::Retry);
    assert_eq!(config.classifier.server_error, RetryDecision::Never, "only timeouts are retried");
    assert_eq!(config.classifier.overloaded, RetryDecision::Never);
    assert_eq!(config.deadline, None, "an inner edge's deadline travels with the request");
    assert!(stack.breaker.policy().read(|b| b.is_some()), "the edge has a breaker");
    // The simulator's own parameters for the same edge, for comparison.
    let source = load_scenario_source(&path.to_string_lossy()).unwrap();
    let scenario = Scenario::resolve(source, &Overrides::default()).unwrap();
    let point = &scenario.grid_points().unwrap()[0];
    let graph = point.model.downcast::<stampede_scenario::models::graph::Graph>().unwrap();
    let topology = stampede_scenario::models::graph::build::build(graph).unwrap();
    let edge = &topology.params.edges[topology.edges.iter().position(|e| e == "api->payments").unwrap()];
    assert_eq!(edge.breaker.expect("the simulator's edge has it too").minimum_calls, 5);
    assert_eq!(edge.max_attempts, config.max_attempts);
    assert_eq!(edge.backoff, config.backoff);
    let client = from_scenario(&path, "client->api", 1).unwrap();
    assert_eq!(
        client.retry_config.deadline,
        Some(Duration::from_secs_f64(1.5)),
        "the client's edge has the workload's deadline"
    );
    assert!(client.breaker.policy().read(|b| b.is_none()));
}

/// Never answers: every attempt times out.
#[derive(Clone, Default)]
struct Silent(Arc<AtomicU32>);

impl Service<()> for Silent {
    type Response = ();
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: ()) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn the_edge_stack_times_out_each_attempt_and_retries_after_the_backoff() {
    let path = scenario_file(SCENARIO);
    let stack = from_scenario(&path, "api->payments", 1).unwrap();
    let inner = Silent::default();
    let mut service = stack.layer(inner.clone());
    let start = tokio::time::Instant::now();
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let error = service.call(()).await.expect_err("it never answers");
    assert!(error.is::<tokio::time::error::Elapsed>(), "the last attempt's timeout: {error}");
    assert_eq!(inner.0.load(Ordering::SeqCst), 3, "three attempts");
    // 200 ms, 50 ms, 200 ms, 50 ms, 200 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(700));
}

#[tokio::test(start_paused = true)]
async fn a_service_stack_rate_limits_as_the_simulated_service_does() {
    let path = scenario_file(SCENARIO);
    let stack = service_from_scenario(&path, None, "payments", 1).unwrap();
    #[derive(Clone)]
    struct Ok_;
    impl Service<http::Request<()>> for Ok_ {
        type Response = ();
        type Error = BoxError;
        type Future = std::future::Ready<Result<(), BoxError>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok(()))
        }
    }
    let mut service = stack.layer(Ok_);
    let mut answered = 0;
    for _ in 0..5 {
        match service.call(http::Request::new(())).await {
            Ok(()) => answered += 1,
            Err(error) => assert_eq!(error.downcast_ref::<Rejected>(), Some(&Rejected::RateLimited)),
        }
    }
    assert_eq!(answered, 3, "a burst of 3");
    tokio::time::advance(Duration::from_millis(100)).await;
    assert!(service.call(http::Request::new(())).await.is_ok(), "10 a second: one token per 100 ms");
}

#[test]
fn bad_scenarios_fail_with_the_parsers_own_message_and_exit_code() {
    // A misspelt field: the same words `stampede run` prints.
    let bad = scenario_file(&SCENARIO.replace("timeout_s = 0.2", "timeout_secs = 0.2"));
    let ours = from_scenario(&bad, "api->payments", 1).expect_err("an unknown field");
    let source = load_scenario_source(&bad.to_string_lossy()).unwrap();
    let parser = Scenario::resolve(source, &Overrides::default()).and_then(|s| s.grid_points()).expect_err("the same");
    assert_eq!(ours.to_string(), parser.to_string());
    assert_eq!(ours.exit_code(), 2);
    assert!(ours.to_string().contains("timeout_secs"), "{ours}");
    // An edge that is not there names the ones that are.
    let path = scenario_file(SCENARIO);
    let missing = from_scenario(&path, "api->ledger", 1).expect_err("no such edge").to_string();
    assert!(missing.contains("\"api->ledger\"") && missing.contains("api->payments"), "{missing}");
    // A grid: choose a point.
    let grid = from_scenario("graph-three-tier", "api->cache", 1).expect_err("three points").to_string();
    assert!(grid.contains("3 points"), "{grid}");
    let chosen = from_scenario_point("graph-three-tier", Some(2), "api->cache", 1).expect("point 2");
    assert_eq!(chosen.retry_config.max_attempts, 3, "retry only above the failure: the cache edge retries");
    let not_graph = from_scenario("mmc", "a->b", 1).expect_err("not a graph").to_string();
    assert!(not_graph.contains("model = \"graph\""), "{not_graph}");
}

#[tokio::test(start_paused = true)]
async fn a_cluster_scenarios_retry_section_builds_the_same_client() {
    use stampede_policy::retry_budget::RetryBudget;
    use stampede_tower::from_cluster_scenario;
    // retry-storm's two points: naive retries without a budget, backoff with a ratio budget.
    let naive = from_cluster_scenario("retry-storm", Some(0), 1).expect("point 0");
    assert_eq!(naive.retry_config.max_attempts, 5);
    assert_eq!(naive.retry_config.backoff, Backoff::Constant { delay: 0 }, "naive retries at once");
    assert!(naive.retry.state().read(|s| matches!(s.budget, RetryBudget::Unlimited)));
    let budgeted = from_cluster_scenario("retry-storm", Some(1), 1).expect("point 1");
    assert_eq!(budgeted.retry_config.backoff, Backoff::FullJitter { base: 10_000_000, cap: 1_000_000_000 });
    assert!(budgeted.retry.state().read(|s| matches!(s.budget, RetryBudget::Ratio(_))));
    assert!(budgeted.breaker.policy().read(|b| b.is_none()), "its breaker is disabled");
    // The client's 50 ms timeout per attempt, every failure retried: five attempts.
    let inner = Silent::default();
    let mut service = naive.layer(inner.clone());
    let start = tokio::time::Instant::now();
    assert!(service.call(()).await.is_err());
    assert_eq!(inner.0.load(Ordering::SeqCst), 5);
    assert_eq!(start.elapsed(), Duration::from_millis(250));
    let graph = from_cluster_scenario("graph-three-tier", Some(0), 1).expect_err("not a cluster").to_string();
    assert!(graph.contains("model = \"cluster\""), "{graph}");
}

#[tokio::test(start_paused = true)]
async fn an_edges_hedge_section_hedges_each_try_and_too_many_hedges_are_refused() {
    // (A breaker that needs 50 calls, so that it stays closed here.)
    let hedged = SCENARIO
        .replace("budget = \"ratio\" }", "budget = \"ratio\" }\nhedge = { after_s = 0.05, max = 2 }")
        .replace("minimum_calls = 5,", "minimum_calls = 50,");
    let path = scenario_file(&hedged);
    let stack = from_scenario(&path, "api->payments", 1).expect("a valid scenario");
    let inner = Silent::default();
    let mut service = stack.layer(inner.clone());
    let start = tokio::time::Instant::now();
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    assert!(service.call(()).await.is_err(), "it never answers");
    // Each of three tries: the attempt at 0, hedges at 50 and 100 ms, each timing out
    // 200 ms after it was sent (the try fails at 300 ms), then the 50 ms backoff.
    assert_eq!(inner.0.load(Ordering::SeqCst), 9, "three attempts per try");
    assert_eq!(start.elapsed(), Duration::from_millis(3 * 300 + 2 * 50));
    let counts = stack.hedge.state().expect("the edge hedges").read(|s| s.counts);
    assert_eq!((counts.calls, counts.hedges, counts.denied_by_budget), (3, 6, 0));
    // Eight of the ratio budget's ten tokens went to six hedges and two retries.
    let tokens = stack.retry.state().read(|s| match &s.budget {
        stampede_policy::retry_budget::RetryBudget::Ratio(budget) => budget.tokens(),
        _ => unreachable!(),
    });
    assert_eq!(tokens, 2.0);
    // The simulator allows any number of hedges; a process here at most four per try.
    let many = scenario_file(&hedged.replace("max = 2", "max = 5"));
    let error = from_scenario(&many, "api->payments", 1).expect_err("five hedges");
    assert_eq!(error.exit_code(), 2);
    assert!(
        error.to_string().starts_with("edge \"api->payments\": hedge.max = 5: stampede-tower sends at most 4"),
        "{error}"
    );
}

/// An LLM request and answer, as a client of a metered API sends and reads them.
#[derive(Clone, Copy, Debug)]
struct Prompt {
    input_tokens: u64,
    max_tokens: u64,
}

#[derive(Debug)]
struct Completion {
    output_tokens: u64,
}

/// The provider's refusal: a 429.
#[derive(Debug)]
struct TooManyRequests;

impl std::fmt::Display for TooManyRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "429")
    }
}
impl std::error::Error for TooManyRequests {}

/// Answers 300 output tokens after 2 s; its first call is refused with a 429.
#[derive(Clone, Default)]
struct Provider(Arc<AtomicU32>);

impl Service<Prompt> for Provider {
    type Response = Completion;
    type Error = TooManyRequests;
    type Future = Pin<Box<dyn Future<Output = Result<Completion, TooManyRequests>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), TooManyRequests>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Prompt) -> Self::Future {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n == 0 {
                return Err(TooManyRequests);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(Completion { output_tokens: 300 })
        })
    }
}

/// A 429 (boxed by a layer further in, or the provider's own) is rate limited.
fn llm_outcomes(
) -> impl stampede_tower::Classify<Completion, BoxError> + stampede_tower::Classify<Completion, TooManyRequests> {
    #[derive(Clone, Copy)]
    struct Llm;
    impl stampede_tower::Classify<Completion, TooManyRequests> for Llm {
        fn classify(&self, result: Result<&Completion, &TooManyRequests>) -> stampede_tower::Classified {
            use stampede_policy::classify::Outcome;
            match result {
                Ok(_) => stampede_tower::Classified::of(Outcome::Success),
                Err(_) => stampede_tower::Classified::of(Outcome::RateLimited),
            }
        }
    }
    impl stampede_tower::Classify<Completion, BoxError> for Llm {
        fn classify(&self, result: Result<&Completion, &BoxError>) -> stampede_tower::Classified {
            use stampede_policy::classify::Outcome;
            match result {
                Ok(_) => stampede_tower::Classified::of(Outcome::Success),
                Err(error) if error.is::<TooManyRequests>() => stampede_tower::Classified::of(Outcome::RateLimited),
                Err(error) => stampede_tower::ErrorsFail.classify(Err::<&Completion, _>(error)),
            }
        }
    }
    Llm
}

#[tokio::test(start_paused = true)]
async fn a_gateway_scenarios_stack_builds_each_class_in_its_order_over_shared_state() {
    use stampede_engine::models::gateway::Client;
    use stampede_tower::{gateway_from_scenario, TokensWith};
    let tokens = TokensWith(|p: &Prompt| (p.input_tokens, p.max_tokens), |c: &Completion| c.output_tokens);
    // llm-stack's second point: the seven gates, outermost first.
    let stacks = gateway_from_scenario("llm-stack", Some(1), 7).expect("point 1");
    assert_eq!(stacks.params().client, Client::Stack);
    assert!(stacks.classes().contains(&"answer"), "{:?}", stacks.classes());
    let answer = stacks.class("answer", tokens).expect("a class");
    assert_eq!(answer.order(), ["admission", "bulkhead", "adaptive", "breaker", "quota", "retry", "timeout"]);
    // Admission: the classes' rungs and unloaded latencies, as the simulator's.
    let p = stacks.params();
    let index = stacks.classes().iter().position(|c| *c == "answer").unwrap();
    let expected = stacks.admission().read(|s| s.expected.clone());
    assert_eq!(expected[index], p.unloaded_latency(index));
    // One call: admitted, a slot, the limiter, the breaker, the tier's meter; a 429
    // retried after the class's backoff; the answer reconciles the meter.
    let provider = Provider::default();
    let mut service = answer.classify(llm_outcomes()).layer(provider.clone());
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let prompt = Prompt { input_tokens: 1_000, max_tokens: p.classes[index].max_tokens };
    let completion = service.call(prompt).await.expect("the retry answers");
    assert_eq!(completion.output_tokens, 300);
    assert_eq!(provider.0.load(Ordering::SeqCst), 2, "the 429 was retried");
    assert_eq!(stacks.retry().state().read(|s| s.counts.retries), 1);
    assert_eq!(stacks.admission().read(|s| s.in_flight), 0, "admission let the call go");
    let tier = p.classes[index].tier;
    let pressure = stacks.meter(tier).meter().lock().pressure(0);
    assert!(pressure > 0.0, "the tier's meter holds what the calls used: {pressure}");
    // The naive client.
    let naive = gateway_from_scenario("llm-stack", Some(0), 7).expect("point 0");
    let naive_answer = naive.class("answer", tokens).unwrap();
    assert_eq!(naive_answer.order(), ["timeout", "retry"], "one timeout per call around immediate retries");
    let missing = stacks.class("poem", tokens).err().expect("no such class").to_string();
    assert!(missing.contains("\"poem\"") && missing.contains("answer"), "{missing}");
    let not_gateway = gateway_from_scenario("mmc", None, 1).expect_err("not a gateway").to_string();
    assert!(not_gateway.contains("model = \"gateway\""), "{not_gateway}");
}

#[test]
fn a_gateway_stack_keeps_the_scenarios_order_and_leaves_out_the_gates_it_does_not_list() {
    use stampede_tower::{gateway_from_scenario, TokensWith};
    let tokens = TokensWith(|p: &Prompt| (p.input_tokens, p.max_tokens), |c: &Completion| c.output_tokens);
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenario/scenarios/llm-stack.toml"))
        .expect("the built-in");
    let reordered = source
        .replace(
            r#"gates = ["admission", "bulkhead", "adaptive", "breaker", "quota", "retry", "fallback"]"#,
            r#"gates = ["retry", "quota", "breaker"]"#,
        )
        .replace("\"stack.client\" = [\"naive\", \"stack\"]", "\"stack.client\" = [\"stack\"]");
    // The built-in's claims name its two points; this one-point file keeps none.
    let reordered = reordered.split("[[verify]]").next().expect("text before the claims");
    let path = scenario_file(reordered);
    let stacks = gateway_from_scenario(&path, None, 1).expect("one point");
    assert_eq!(stacks.class("answer", tokens).unwrap().order(), ["retry", "quota", "breaker", "timeout"]);
}

/// The pieces of a gateway a process cannot take from its class stacks: each class's
/// stream bounds (its `timeouts_s`), where its failed calls go (`fallback`), and the
/// quota moved into a store every gateway process shares — the coordinated meter's twin.
#[tokio::test(start_paused = true)]
async fn a_gateway_scenario_gives_its_stream_bounds_its_fallbacks_and_a_shared_quota() {
    use stampede_policy::quota::QuotaMeter;
    use stampede_tower::{gateway_from_scenario, ErrorsFail, QuotaStore, Shared, StreamTimeouts, TokensWith};
    let stacks = gateway_from_scenario("llm-stack", Some(1), 7).expect("point 1");
    let p = stacks.params();
    let think = stacks.classes().iter().position(|c| *c == "think").unwrap();
    let t = p.classes[think].timeouts;
    let secs = Duration::from_nanos;
    assert_eq!(
        stacks.stream_timeouts("think").unwrap().timeouts(),
        StreamTimeouts {
            connect: Some(secs(t.connect)),
            first_token: Some(secs(t.first_token)),
            inter_token: t.inter_token.map(secs),
            total: Some(secs(t.total)),
        }
    );
    // think falls back to answer (the fixture's `fallback`).
    assert_eq!(stacks.fallback_class("think").unwrap(), Some("answer"));
    let naive = gateway_from_scenario("llm-stack", Some(0), 7).expect("point 0");
    let no_gate = naive.fallback_class("think").unwrap_err().to_string();
    assert!(no_gate.contains("stack.gates has no \"fallback\""), "{no_gate}");
    assert!(stacks.fallback("poem", (), ErrorsFail).is_err());

    // Two gateway processes, one store per tier: a call metered by the first is in
    // the bucket the second reads.
    let mut made: Vec<Arc<dyn QuotaStore>> = Vec::new();
    let first = gateway_from_scenario("llm-stack", Some(1), 7).unwrap().share_quota(|_, meter: QuotaMeter| {
        let store: Arc<dyn QuotaStore> = Arc::new(Shared::new(meter));
        made.push(store.clone());
        store
    });
    let second = gateway_from_scenario("llm-stack", Some(1), 8).unwrap().share_quota(|tier, _| made[tier].clone());
    let answer = first.classes().iter().position(|c| *c == "answer").unwrap();
    let tier = first.params().classes[answer].tier;
    assert!(Arc::ptr_eq(&first.meter(tier).store(), &second.meter(tier).store()));
    assert_eq!(second.meter(tier).store().pressure_at_least(0, 0.0), 0.0);
    let tokens = TokensWith(|p: &Prompt| (p.input_tokens, p.max_tokens), |c: &Completion| c.output_tokens);
    let provider = Provider(Arc::new(AtomicU32::new(1)));
    let mut service = first.meter(tier).tokens(tokens).classify(llm_outcomes()).layer(provider);
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let call = service.call(Prompt { input_tokens: 50_000, max_tokens: 4_000 });
    let mut call = std::pin::pin!(call);
    assert!(futures_poll_once(call.as_mut()).await.is_none(), "the provider takes 2 s");
    let seen = second.meter(tier).store().pressure_at_least(0, 0.0);
    assert!(seen > 0.0, "the second process sees the first's reservation: {seen}");
}

/// Polls `future` once: `Some` if it finished.
async fn futures_poll_once<F: Future + Unpin>(mut future: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        Poll::Ready(match Pin::new(&mut future).poll(cx) {
            Poll::Ready(value) => Some(value),
            Poll::Pending => None,
        })
    })
    .await
}

/// A stream broken after the response was handed on is started over only below the
/// scenario's `no_retry_past_delivered` share, as the simulated retry loop decides.
#[test]
fn a_broken_stream_is_restarted_only_below_the_delivered_share() {
    let stacks = stampede_tower::gateway_from_scenario("llm-stack", Some(1), 7).expect("point 1");
    let share = stacks.params().no_retry_past_delivered;
    assert!(share > 0.0 && share < 1.0, "{share}");
    let at = (share * 1000.0) as u64;
    assert!(stacks.worth_restarting(at - 1, 1000));
    assert!(!stacks.worth_restarting(at, 1000));
    assert!(!stacks.worth_restarting(1000, 1000));
}
