//! Instruction counts under Valgrind (gungraun): deterministic to the instruction, so
//! a merge can be gated on them on a busy machine where wall-clock time moves by tens
//! of percent. `.ci/instruction-gate` runs this and compares every benchmark with the
//! committed baseline `benches/instructions.baseline.json`.
//!
//! `cargo bench -p stampede-benches --bench instructions` (needs valgrind and
//! `cargo install gungraun-runner --version 0.20.0`).
//!
//! `STAMPEDE_BENCH_SLOWDOWN=1` makes the kernel-hold benchmarks do their work twice:
//! the deliberate slowdown the gate's own test must catch.

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main, LibraryBenchmarkConfig};
use stampede_benches::kernel_hold;
use stampede_engine::models::cluster::{Cluster, ClusterParams};
use stampede_engine::models::gateway::{Gateway, GatewayParams};
use stampede_engine::models::graph::{Graph, GraphParams};
use stampede_engine::models::mmc::{Mmc, MmcParams};
use stampede_engine::policy::breaker::{BreakerConfig, CircuitBreaker, SlidingWindow};
use stampede_engine::policy::classify::Outcome;
use stampede_engine::policy::retry_budget::{RatioBudget, RetryBudget};
use stampede_engine::policy::token_bucket::TokenBucket;
use stampede_engine::{secs_to_nanos, LatencyHistogram, RngStream, StreamPurpose};
use stampede_scenario::models::gateway::Gateway as GatewayModel;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{GridPoint, Overrides, Scenario};

const HOLDS: usize = 10_000;

fn holds() -> usize {
    HOLDS * stampede_benches::slowdown_factor()
}

#[library_benchmark]
#[bench::pending_1e3(kernel_hold(1_000))]
#[bench::pending_1e4(kernel_hold(10_000))]
#[bench::pending_1e5(kernel_hold(100_000))]
fn hold(mut simulation: stampede_engine::Simulation<stampede_benches::Hold>) {
    for _ in 0..holds() {
        simulation.step();
    }
    black_box(simulation);
}

fn mmc_params() -> MmcParams {
    MmcParams {
        arrival_rate_per_s: 1_600.0,
        service_rate_per_s: 1_000.0,
        servers: 2,
        capacity: None,
        warmup: secs_to_nanos(5.0),
        horizon: secs_to_nanos(50.0),
    }
}

#[library_benchmark]
fn mmc_replica() -> u64 {
    let mut histogram = LatencyHistogram::new();
    black_box(Mmc::new(mmc_params(), 1, 0, &mut histogram).run().events)
}

#[library_benchmark]
fn cluster_every_policy_replica() -> u64 {
    let mut histogram = LatencyHistogram::new();
    black_box(Cluster::new(ClusterParams::every_policy_on(), 1, 0, std::slice::from_mut(&mut histogram)).run().0.events)
}

// The service graph with every client policy on (`GraphParams::three_tier_every_policy`),
// 4 simulated seconds. (gungraun takes no doc comment on a benchmark.)
#[library_benchmark]
fn graph_three_tier_replica() -> u64 {
    let mut histograms = [LatencyHistogram::new()];
    let params = GraphParams::three_tier_every_policy(2_000.0, secs_to_nanos(4.0), secs_to_nanos(2.0));
    black_box(Graph::new(params, 1, 0, &mut histograms).run().0.events)
}

/// `llm-stack`'s grid point `index` (0: naive, 1: stack).
fn llm_stack(index: usize) -> GatewayParams {
    let source = load_scenario_source("llm-stack").expect("built-in");
    let scenario = Scenario::resolve(source, &Overrides::default()).expect("valid");
    let point = &scenario.grid_points().expect("valid")[index];
    point.model.downcast::<GatewayModel>().expect("a gateway scenario").params(&point.run)
}

/// `llm-stack`'s grid point `index` and the latency histograms it records into, built
/// outside the count: a runner's worker lends the same histograms to every replica, and
/// building nine of them was a sixth of this benchmark's instructions. With their
/// counts, as the runner gives a model of few latencies (`LatencyHistogram::with_counts`).
fn llm_stack_and_histograms(index: usize) -> (GatewayParams, Vec<LatencyHistogram>) {
    let params = llm_stack(index);
    let histograms = (0..params.latency_histograms()).map(|_| LatencyHistogram::with_counts()).collect();
    (params, histograms)
}

#[library_benchmark]
#[bench::stack(args = (1), setup = llm_stack_and_histograms)]
#[bench::naive(args = (0), setup = llm_stack_and_histograms)]
fn llm_replica(input: (GatewayParams, Vec<LatencyHistogram>)) -> (u64, Vec<LatencyHistogram>) {
    let (params, mut histograms) = input;
    let events = Gateway::new(params, 1, 0, &mut histograms).run().events;
    black_box((events, histograms))
}

/// A built-in's grid point as `stampede run` runs it — the scenario's own layout
/// (answered, degraded and failed latencies apart), its latency windows and every
/// metric it reports, through the same `run_replica` the runner calls — with `sets`
/// (`--set`) shortening the run, and the histograms a runner's worker lends (their
/// counts up front for a model of few latencies), built outside the count.
fn as_run(name: &str, index: usize, sets: &[(&str, f64)]) -> (GridPoint, Vec<LatencyHistogram>) {
    let source = load_scenario_source(name).expect("built-in");
    let sets = sets.iter().map(|(path, value)| (path.to_string(), toml::Value::Float(*value))).collect();
    let scenario = Scenario::resolve(source, &Overrides { sets, ..Overrides::default() }).expect("valid");
    let point = scenario.grid_points().expect("valid").swap_remove(index);
    let histograms = stampede_run::runner::lent_histograms(point.model.latencies().len());
    (point, histograms)
}

fn llm_stack_as_run(index: usize) -> (GridPoint, Vec<LatencyHistogram>) {
    as_run("llm-stack", index, &[])
}

fn mmc_as_run() -> (GridPoint, Vec<LatencyHistogram>) {
    as_run("mmc", 0, &[])
}

fn graph_as_run() -> (GridPoint, Vec<LatencyHistogram>) {
    // The budgeted point (retries at every layer, a 10% budget), to 4 s into the brownout.
    as_run("graph-three-tier", 1, &[("run.horizon_s", 16.0)])
}

fn cluster_as_run() -> (GridPoint, Vec<LatencyHistogram>) {
    // The jittered, budgeted client.
    as_run("baltor", 1, &[])
}

// What a user's run costs: a built-in's grid point through the scenario's
// `run_replica`, as the runner calls it (beside the bare engine's benchmarks above,
// which lend answered-only histograms and keep latency windows off).
#[library_benchmark]
#[bench::llm_stack(args = (1), setup = llm_stack_as_run)]
#[bench::llm_naive(args = (0), setup = llm_stack_as_run)]
#[bench::mmc(setup = mmc_as_run)]
#[bench::graph_three_tier(setup = graph_as_run)]
#[bench::baltor(setup = cluster_as_run)]
fn replica_as_run(input: (GridPoint, Vec<LatencyHistogram>)) -> (usize, Vec<LatencyHistogram>) {
    let (point, mut histograms) = input;
    let output = point.model.run_replica(&point.run, 1, 0, &mut histograms);
    black_box((output.metrics.len(), histograms))
}

#[library_benchmark]
fn policy_decisions() {
    let mut now = 0u64;
    let mut bucket = TokenBucket::per_minute(600_000);
    let mut budget = RetryBudget::Ratio(RatioBudget::new(0.1, 100.0, 100.0));
    let mut rng = RngStream::derive(1, 0, StreamPurpose::named("bench.instructions"));
    let mut breaker = CircuitBreaker::new(BreakerConfig {
        window: SlidingWindow::Time { window: 60_000_000_000, buckets: 60 },
        minimum_calls: 20,
        failure_rate_threshold: 0.3,
        ..BreakerConfig::default()
    });
    for call in 0..10_000u64 {
        now += 1_000;
        black_box(bucket.try_take(now, 1));
        budget.on_outcome(now, true);
        black_box(budget.try_retry(now, 10, 0, &mut rng));
        let outcome = if call.is_multiple_of(10) { Outcome::ServerError } else { Outcome::Success };
        if let Some(permit) = breaker.try_acquire(now) {
            breaker.record(now, permit, outcome, 5_000_000);
        }
    }
}

library_benchmark_group!(name = kernel; benchmarks = hold);
library_benchmark_group!(name = models; benchmarks = mmc_replica, cluster_every_policy_replica, graph_three_tier_replica, llm_replica);
library_benchmark_group!(name = as_run; benchmarks = replica_as_run);
library_benchmark_group!(name = policies; benchmarks = policy_decisions);
main!(
    // The benchmarks run with a cleared environment; the deliberate slowdown must pass.
    config = LibraryBenchmarkConfig::default().pass_through_env("STAMPEDE_BENCH_SLOWDOWN");
    library_benchmark_groups = kernel, models, as_run, policies
);
