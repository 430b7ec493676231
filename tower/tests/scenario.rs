//! One configuration, two uses: stacks built from the TOML `stampede run` simulates,
//! by the same parser, with its errors.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use stampede_engine::policy::backoff::Backoff;
use stampede_engine::policy::classify::RetryDecision;
use stampede_experiments::scenario::builtin::load_scenario_source;
use stampede_experiments::{Overrides, Scenario};
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
    let graph = point.model.downcast::<stampede_experiments::models::graph::Graph>().unwrap();
    let topology = stampede_experiments::models::graph::build::build(graph).unwrap();
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
    use stampede_engine::policy::retry_budget::RetryBudget;
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
        stampede_engine::policy::retry_budget::RetryBudget::Ratio(budget) => budget.tokens(),
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
