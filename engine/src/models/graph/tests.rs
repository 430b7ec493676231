//! The graph model against theory (Erlang C, Jackson networks, the fan-out law, retry
//! multiplication) and its semantics (cancellation, hedging, quorum, faults).

use super::*;
use crate::components::arrivals::{ArrivalProcess, RateProfile};
use crate::components::distribution::{Distribution, Shape};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::time::{secs_to_nanos, Nanos};
use crate::policy::backoff::Backoff;
use crate::policy::retry_budget::{RatioBudget, RetryBudget};

const MS: Nanos = 1_000_000;

/// A test's name kept for the run (a few bytes per traced test).
fn leak(name: String) -> &'static str {
    Box::leak(name.into_boxed_str())
}

fn exp(mean_s: f64) -> Distribution {
    Distribution::new(Shape::Exponential { mean_s })
}

fn constant(value_s: f64) -> Distribution {
    Distribution::new(Shape::Constant { value_s })
}

/// Builds a `GraphParams` endpoint by endpoint; steps and call sites are flattened at the end.
struct Builder {
    p: GraphParams,
    steps: Vec<Vec<Step>>,
    sites: Vec<Vec<Vec<CallSite>>>,
}

enum S {
    Work(Distribution),
    Calls(Vec<(u32, u32, f64)>, Wait),
}

impl Builder {
    fn new(horizon_s: f64, warmup_s: f64) -> Self {
        Builder {
            p: GraphParams {
                services: vec![],
                endpoints: vec![],
                steps: vec![],
                call_sites: vec![],
                alternatives: Vec::new(),
                edges: vec![],
                workloads: vec![],
                faults: vec![],
                max_depth: 16,
                warmup: secs_to_nanos(warmup_s),
                horizon: secs_to_nanos(horizon_s),
                bucket: 100 * MS,
                recovery_hold: 500 * MS,
            },
            steps: vec![],
            sites: vec![],
        }
    }

    fn service(&mut self, instances: u32, workers: u32, queue_capacity: u32) -> u32 {
        self.p.services.push(ServiceParams::new(instances, workers, queue_capacity));
        self.p.services.len() as u32 - 1
    }

    fn endpoint(&mut self, service: u32, work: Option<Distribution>) -> u32 {
        self.p.endpoints.push(EndpointParams { service, work, first_step: 0, step_count: 0, cache: None });
        self.steps.push(vec![]);
        self.sites.push(vec![]);
        self.p.endpoints.len() as u32 - 1
    }

    fn edge(&mut self, from: Option<u32>, to: u32) -> u32 {
        self.p.edges.push(EdgeParams {
            from,
            to,
            network: None,
            timeout: None,
            adaptive_timeout: None,
            propagate_deadline: true,
            max_attempts: 1,
            backoff: Backoff::Constant { delay: 0 },
            retry_on: FailureSet::of(&Failure::ALL[..3]),
            budget: RetryBudget::Unlimited,
            breaker: None,
            hedge: None,
            outlier: None,
            pool: None,
            hedge_uses_budget: false,
            balance: Balance::RoundRobin,
            fallback_on: FailureSet::NONE,
        });
        self.p.edges.len() as u32 - 1
    }

    fn step(&mut self, endpoint: u32, step: S) {
        match step {
            S::Work(d) => {
                self.steps[endpoint as usize].push(Step::Work(d));
                self.sites[endpoint as usize].push(vec![]);
            }
            S::Calls(calls, wait) => {
                self.steps[endpoint as usize].push(Step::Calls { first_call: 0, calls: calls.len() as u32, wait });
                let sites = calls.iter().map(|&(endpoint, edge, probability)| CallSite { endpoint, edge, probability });
                self.sites[endpoint as usize].push(sites.collect());
            }
        }
    }

    fn poisson(&mut self, endpoint: u32, rate: f64, deadline_s: Option<f64>) {
        let service = self.p.endpoints[endpoint as usize].service;
        let edge = self.edge(None, service);
        self.p.workloads.push(WorkloadParams {
            endpoint,
            edge,
            arrivals: WorkloadArrivals::Open(ArrivalProcess::Poisson(RateProfile::constant(rate))),
            deadline: deadline_s.map(secs_to_nanos),
            slo: None,
            criticality: [0.0, 1.0, 0.0, 0.0],
            keys: 1,
            zipf: None,
        });
    }

    fn build(mut self) -> GraphParams {
        for (e, (steps, sites)) in self.steps.into_iter().zip(self.sites).enumerate() {
            self.p.endpoints[e].first_step = self.p.steps.len() as u32;
            self.p.endpoints[e].step_count = steps.len() as u32;
            for (mut step, sites) in steps.into_iter().zip(sites) {
                if let Step::Calls { first_call, .. } = &mut step {
                    *first_call = self.p.call_sites.len() as u32;
                }
                self.p.call_sites.extend(sites);
                self.p.steps.push(step);
            }
        }
        self.p
    }
}

fn run(p: &GraphParams, replica: u64) -> (GraphResults, GraphSeries) {
    let mut histograms: Vec<LatencyHistogram> = p.workloads.iter().map(|_| LatencyHistogram::new()).collect();
    Graph::new(p.clone(), 7, replica, &mut histograms).run()
}

/// Mean and 95% half-width over `replicas` of `f`.
fn mean_ci(p: &GraphParams, replicas: u64, f: impl Fn(&GraphResults) -> f64) -> (f64, f64) {
    let values: Vec<f64> = (0..replicas).map(|r| f(&run(p, r).0)).collect();
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, t95(values.len() - 1) * (var / n).sqrt())
}

/// Student's t 0.975 quantile for `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const TABLE: [f64; 12] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179];
    TABLE.get(df.saturating_sub(1)).copied().unwrap_or(1.96 + 2.5 / df as f64)
}

fn assert_within(what: &str, (mean, half): (f64, f64), expected: f64, slack: f64) {
    assert!(
        (mean - expected).abs() <= half + slack * expected,
        "{what}: {mean:.6} ± {half:.6}, expected {expected:.6}"
    );
    assert!(half < 0.05 * expected, "{what}: the interval ±{half} is too wide to test anything");
}

#[test]
fn one_service_is_an_m_m_c_queue() {
    let mut g = Builder::new(60.0, 5.0);
    let s = g.service(1, 4, 1_000_000);
    // The work as a step rather than the endpoint's own: the same station.
    let e = g.endpoint(s, None);
    g.step(e, S::Work(exp(0.01)));
    g.poisson(e, 320.0, None);
    let p = g.build();
    let theory = crate::measurement::theory::erlang_c(320.0, 100.0, 4).unwrap();
    assert_within("response", mean_ci(&p, 12, |r| r.entries[0].latency_mean_s()), theory.response_mean_s, 0.01);
    assert_within("utilisation", mean_ci(&p, 12, |r| r.services[0].utilisation), theory.utilization, 0.005);
    // Little's law on the service: L = λW.
    assert_within("present", mean_ci(&p, 12, |r| r.services[0].present_mean), theory.in_system_mean, 0.01);
}

/// An open Jackson network with feedback: A → B, then B calls A again with probability
/// 0.25. Async services (a worker only for local work) make each piece of work one
/// visit to an M/M/c station; the visit ratios are V_A = V_B = 1/(1 − 0.25), and the
/// mean sojourn is Σ V_i W_i with each station an M/M/c at λ V_i (product form).
#[test]
fn an_open_jackson_network_with_feedback_has_its_product_form_sojourn() {
    let mut g = Builder::new(60.0, 5.0);
    let a = g.service(1, 2, 1_000_000);
    let b = g.service(1, 1, 1_000_000);
    g.p.services[0].blocking = false;
    g.p.services[1].blocking = false;
    let ea = g.endpoint(a, Some(exp(0.01)));
    let eb = g.endpoint(b, Some(exp(0.006)));
    let ab = g.edge(Some(a), b);
    let ba = g.edge(Some(b), a);
    g.step(ea, S::Calls(vec![(eb, ab, 1.0)], Wait::All));
    g.step(eb, S::Calls(vec![(ea, ba, 0.25)], Wait::All));
    g.p.max_depth = 200;
    let lambda = 90.0;
    g.poisson(ea, lambda, None);
    let p = g.build();
    let visits = 1.0 / 0.75;
    let wa = crate::measurement::theory::erlang_c(lambda * visits, 100.0, 2).unwrap();
    let wb = crate::measurement::theory::erlang_c(lambda * visits, 1.0 / 0.006, 1).unwrap();
    let sojourn = visits * wa.response_mean_s + visits * wb.response_mean_s;
    assert_within("sojourn", mean_ci(&p, 12, |r| r.entries[0].latency_mean_s()), sojourn, 0.01);
    // Visit ratios: attempts arriving at each service per entry request.
    let ratio = |r: &GraphResults, s: usize| r.services[s].arrivals as f64 / r.entries[0].offered as f64;
    assert_within("visits to A", mean_ci(&p, 12, |r| ratio(r, 0)), visits, 0.005);
    assert_within("visits to B", mean_ci(&p, 12, |r| ratio(r, 1)), visits, 0.005);
    assert_within("utilisation of B", mean_ci(&p, 12, |r| r.services[1].utilisation), wb.utilization, 0.01);
}

/// N leaves, each calling a slow dependency with probability p: a request is slow when
/// any leaf is, 1 − (1 − p)^N of them.
#[test]
fn the_fan_out_law() {
    for (leaves, p_slow) in [(1u32, 0.05), (10, 0.05), (40, 0.01)] {
        let mut g = Builder::new(30.0, 1.0);
        let front = g.service(1, 100_000, 0);
        let leaf = g.service(leaves, 100_000, 0);
        let slow = g.service(1, 100_000, 0);
        let ef = g.endpoint(front, None);
        let el = g.endpoint(leaf, Some(constant(0.001)));
        let es = g.endpoint(slow, Some(constant(0.1)));
        let fl = g.edge(Some(front), leaf);
        let ls = g.edge(Some(leaf), slow);
        g.step(ef, S::Calls((0..leaves).map(|_| (el, fl, 1.0)).collect(), Wait::All));
        g.step(el, S::Calls(vec![(es, ls, p_slow)], Wait::All));
        g.poisson(ef, 200.0, None);
        let p = g.build();
        let expected = 1.0 - (1.0 - p_slow).powi(leaves as i32);
        // The share of requests slower than 50 ms, from the median-free histogram: p50 of
        // the slow share is read as the fraction above the midpoint of the two modes.
        let slow_share = |r: &GraphResults| {
            let h = &r.entries[0].latency;
            let fast = (0..=1000).map(|k| k as f64 / 1000.0).take_while(|&q| h.quantile(q) < 0.05e9).count();
            1.0 - fast as f64 / 1001.0
        };
        let (mean, half) = mean_ci(&p, 8, slow_share);
        assert!((mean - expected).abs() <= half + 0.004, "N = {leaves}: {mean} ± {half} vs {expected}");
    }
}

/// Up to k attempts at every layer, the bottom failing every call: the bottom sees
/// k^depth attempts per entry request. A 10% ratio budget at every layer bounds it.
#[test]
fn retries_multiply_through_layers_and_budgets_bound_them() {
    let build = |budget: bool| {
        let mut g = Builder::new(20.0, 1.0);
        let services: Vec<u32> = (0..4).map(|_| g.service(1, 100_000, 0)).collect();
        let endpoints: Vec<u32> = services.iter().map(|&s| g.endpoint(s, Some(constant(0.0001)))).collect();
        for layer in 0..3 {
            let edge = g.edge(Some(services[layer]), services[layer + 1]);
            g.p.edges[edge as usize].max_attempts = 3;
            if budget {
                g.p.edges[edge as usize].budget = RetryBudget::Ratio(RatioBudget::new(0.1, 10.0, 10.0));
            }
            g.step(endpoints[layer], S::Calls(vec![(endpoints[layer + 1], edge, 1.0)], Wait::All));
        }
        g.poisson(endpoints[0], 100.0, None);
        g.p.faults.push(GraphFault {
            target: FaultTarget::Instances { service: services[3], first: 0, count: 1 },
            kind: FaultKind::Errors { rate: 1.0 },
            start: 0,
            duration: secs_to_nanos(100.0),
        });
        g.build()
    };
    let (results, _) = run(&build(false), 0);
    let entries = results.entries[0].offered as f64;
    let bottom = results.services[3].arrivals as f64 / entries;
    assert!((bottom - 27.0).abs() < 0.2, "3^3 = 27 attempts at the bottom per request, got {bottom}");
    assert_eq!(results.entries[0].failed_by(Failure::Error), results.entries[0].offered);
    let (budgeted, _) = run(&build(true), 0);
    let bottom = budgeted.services[3].arrivals as f64 / budgeted.entries[0].offered as f64;
    // Without successes the ratio budget only has its 10 initial tokens per edge.
    assert!(bottom < 1.05, "a budget at every layer: {bottom} attempts at the bottom per request");
}

/// A client timeout of 50 ms on work of 200 ms: without cancellation the worker keeps
/// working (all of it wasted); with it, the worker is freed at the timeout.
#[test]
fn cancellation_frees_the_worker_and_no_cancellation_wastes_it() {
    let build = |cancel: bool| {
        let mut g = Builder::new(20.0, 1.0);
        let front = g.service(1, 100_000, 0);
        let back = g.service(1, 50, 1_000);
        g.p.services[1].cancel_abandoned = cancel;
        let ef = g.endpoint(front, None);
        let eb = g.endpoint(back, Some(constant(0.2)));
        let fb = g.edge(Some(front), back);
        g.p.edges[fb as usize].timeout = Some(50 * MS);
        g.p.edges[fb as usize].fallback_on = FailureSet::of(&[Failure::Timeout]);
        g.step(ef, S::Calls(vec![(eb, fb, 1.0)], Wait::All));
        g.poisson(ef, 100.0, None);
        g.build()
    };
    let (kept, _) = run(&build(false), 0);
    let (cancelled, _) = run(&build(true), 0);
    let back = |r: &GraphResults| r.services[1].clone();
    assert!(back(&kept).wasted_s > 0.95 * back(&kept).busy_s, "{:?}", back(&kept));
    // λ × 200 ms = 20 busy workers kept; cancelled at 50 ms, 5.
    assert!((back(&kept).utilisation * 50.0 / 20.0 - 1.0).abs() < 0.1, "{}", back(&kept).utilisation);
    assert!((back(&cancelled).utilisation * 50.0 / 5.0 - 1.0).abs() < 0.1, "{}", back(&cancelled).utilisation);
    assert!(back(&cancelled).cancelled > 0 && back(&kept).cancelled == 0);
    let entry = &kept.entries[0];
    assert!(entry.successes == 0 && entry.degraded + 10 > entry.offered, "every answer is the fallback: {entry:?}");
}

/// A long-tailed leaf read through a hedge at the running p95: the tail is cut, for
/// about 5% more attempts.
#[test]
fn a_hedge_at_the_p95_cuts_the_tail_for_a_few_percent_more_load() {
    let build = |hedge: Option<crate::policy::hedge::HedgeConfig>| {
        let mut g = Builder::new(30.0, 2.0);
        let front = g.service(1, 100_000, 0);
        let store = g.service(4, 100_000, 0);
        let ef = g.endpoint(front, None);
        let es = g.endpoint(store, Some(Distribution::new(Shape::Lognormal { mu: (0.005f64).ln(), sigma: 1.2 })));
        let fs = g.edge(Some(front), store);
        g.p.edges[fs as usize].hedge = hedge;
        g.p.edges[fs as usize].timeout = Some(secs_to_nanos(5.0));
        g.step(ef, S::Calls(vec![(es, fs, 1.0)], Wait::All));
        g.poisson(ef, 200.0, None);
        g.build()
    };
    use crate::policy::hedge::{HedgeConfig, HedgeDelay};
    let (plain, _) = run(&build(None), 0);
    let config = HedgeConfig { delay: HedgeDelay::Quantile(0.95), max_hedges: 1, min_samples: 50 };
    let (hedged, _) = run(&build(Some(config)), 0);
    let p99 = |r: &GraphResults| r.entries[0].latency.quantile(0.99);
    assert!(p99(&hedged) < 0.6 * p99(&plain), "p99 {} vs {}", p99(&hedged), p99(&plain));
    // Edge 0 is front → store (the clients' edge comes last).
    let extra = hedged.edges[0].attempts as f64 / hedged.edges[0].calls as f64 - 1.0;
    assert!((0.03..0.08).contains(&extra), "{extra} extra attempts per call");
    assert!(hedged.edges[0].hedge_wins > 0 && hedged.edges[0].hedge_wins <= hedged.edges[0].hedges);
}

/// A quorum of 2 of 3 waits for the second-fastest, all of 3 for the slowest.
#[test]
fn a_quorum_waits_for_the_kth_answer() {
    let build = |wait: Wait| {
        let mut g = Builder::new(20.0, 1.0);
        let front = g.service(1, 100_000, 0);
        let replica = g.service(3, 100_000, 0);
        let ef = g.endpoint(front, None);
        let er = g.endpoint(replica, Some(exp(0.01)));
        let fr = g.edge(Some(front), replica);
        g.step(ef, S::Calls(vec![(er, fr, 1.0); 3], wait));
        g.poisson(ef, 100.0, None);
        g.build()
    };
    // Order statistics of three exponentials of mean m: m/3, m/3 + m/2, m/3 + m/2 + m.
    for (wait, expected) in [
        (Wait::FirstSuccess, 0.01 / 3.0),
        (Wait::Quorum(2), 0.01 * (1.0 / 3.0 + 0.5)),
        (Wait::All, 0.01 * (1.0 / 3.0 + 0.5 + 1.0)),
    ] {
        let got = mean_ci(&build(wait), 12, |r| r.entries[0].latency_mean_s());
        assert_within(&format!("{wait:?}"), got, expected, 0.01);
    }
}

/// A detached call (fire-and-forget) loads its callee and not its caller's answer: the
/// front answers in its own M/M/2 response time while the audit service it notifies
/// is an M/M/3 at the same rate (utilisation λ·S/c), each call counted on its edge.
/// Waited for, the same call would add the audit's response to every answer.
#[test]
fn a_detached_call_loads_its_callee_and_not_its_callers_latency() {
    let build = |wait: Wait| {
        let mut g = Builder::new(60.0, 5.0);
        let front = g.service(1, 2, 1_000_000);
        let audit = g.service(1, 3, 1_000_000);
        let ef = g.endpoint(front, Some(exp(0.004)));
        let ea = g.endpoint(audit, Some(exp(0.02)));
        let fa = g.edge(Some(front), audit);
        g.step(ef, S::Calls(vec![(ea, fa, 1.0)], wait));
        g.poisson(ef, 100.0, None);
        g.build()
    };
    let detached = build(Wait::Detached);
    let front = crate::measurement::theory::erlang_c(100.0, 250.0, 2).unwrap();
    let audit = crate::measurement::theory::erlang_c(100.0, 50.0, 3).unwrap();
    assert_within(
        "the caller's latency",
        mean_ci(&detached, 12, |r| r.entries[0].latency_mean_s()),
        front.response_mean_s,
        0.01,
    );
    assert_within(
        "the callee's utilisation",
        mean_ci(&detached, 12, |r| r.services[1].utilisation),
        audit.utilization,
        0.01,
    );
    // Edge 0 is front->audit (the workload's own edge is built after it).
    let per_request = |r: &GraphResults| r.edges[0].calls as f64 / r.entries[0].offered as f64;
    assert_within("calls per request", mean_ci(&detached, 12, per_request), 1.0, 0.01);
    // Waited for, the front holds its worker through the audit: far slower.
    let waited = mean_ci(&build(Wait::All), 12, |r| r.entries[0].latency_mean_s()).0;
    assert!(waited > front.response_mean_s + audit.response_mean_s * 0.9, "{waited}");
}

/// `one_of` makes exactly one call, chosen by the probabilities: a (0.3) or b (0.5), or
/// neither (0.2) — never both. Each takes 10 ms: every request ends within 10 ms (p90
/// = 10 ms), while the same probabilities as two independent steps make 15% of
/// requests call both (p90 = 20 ms). Calls per request match the probabilities.
#[test]
fn one_of_makes_exactly_one_call_by_the_probabilities() {
    let build = |alternatives: bool| {
        let mut g = Builder::new(60.0, 5.0);
        let front = g.service(1, 100_000, 0);
        let back = g.service(1, 100_000, 0);
        let ef = g.endpoint(front, None);
        let (ea, eb) = (g.endpoint(back, Some(constant(0.01))), g.endpoint(back, Some(constant(0.01))));
        let fb = g.edge(Some(front), back);
        if alternatives {
            g.step(ef, S::Calls(vec![(ea, fb, 0.3), (eb, fb, 0.5)], Wait::OneOf));
        } else {
            g.step(ef, S::Calls(vec![(ea, fb, 0.3)], Wait::All));
            g.step(ef, S::Calls(vec![(eb, fb, 0.5)], Wait::All));
        }
        g.poisson(ef, 200.0, None);
        g.build()
    };
    let p90 = |r: &GraphResults| r.entries[0].latency.quantile(0.9) / 1e9;
    let one_of = build(true);
    assert_within("p90 of one_of", mean_ci(&one_of, 12, p90), 0.01, 0.01);
    let per_request = |r: &GraphResults| r.edges[0].calls as f64 / r.entries[0].offered as f64;
    assert_within("calls per request", mean_ci(&one_of, 12, per_request), 0.8, 0.01);
    let independent = mean_ci(&build(false), 12, p90).0;
    assert!((independent - 0.02).abs() < 0.001, "independent steps call both in 15%: p90 {independent}");
}

/// A crash of one instance of two: requests to it are refused until it restarts; a
/// partition that times out costs the timeout; after both, the graph recovers.
#[test]
fn crashes_and_partitions() {
    let mut g = Builder::new(20.0, 1.0);
    let front = g.service(1, 100_000, 0);
    let back = g.service(2, 100, 100);
    let ef = g.endpoint(front, None);
    let eb = g.endpoint(back, Some(exp(0.005)));
    let fb = g.edge(Some(front), back);
    g.p.edges[fb as usize].timeout = Some(100 * MS);
    g.step(ef, S::Calls(vec![(eb, fb, 1.0)], Wait::All));
    g.poisson(ef, 200.0, None);
    g.p.faults.push(GraphFault {
        target: FaultTarget::Instances { service: back, first: 1, count: 1 },
        kind: FaultKind::Crash,
        start: secs_to_nanos(5.0),
        duration: secs_to_nanos(2.0),
    });
    g.p.faults.push(GraphFault {
        target: FaultTarget::Edge(fb),
        kind: FaultKind::Partition { fail_fast: false },
        start: secs_to_nanos(10.0),
        duration: secs_to_nanos(1.0),
    });
    let p = g.build();
    let (r, _) = run(&p, 0);
    let offered = r.entries[0].offered as f64;
    // Round robin: half the requests of 2 s go to the crashed instance (refused: down);
    // all of 1 s time out in the partition. The front answers both with an error.
    let refused = r.services[1].refused_by(Refusal::Down) as f64;
    let timeouts = r.edges[0].timeouts as f64;
    assert!((refused / (200.0 * 2.0 * 0.5) - 1.0).abs() < 0.15, "{refused} refused");
    assert!((timeouts / 200.0 - 1.0).abs() < 0.15, "{timeouts} timed out");
    assert_eq!(r.entries[0].failed_by(Failure::Error), (refused + timeouts) as u64);
    assert!(r.recovered);
    assert!(r.entries[0].successes as f64 > offered - refused - timeouts - 5.0);
}

/// Faults on one target compose when their windows overlap (issue 44, item 1): two
/// crashes of 5–15 s and 10–20 s keep the instance down until 20 s (not 15 s); two
/// slowdowns multiply, two added latencies add, two error rates combine as
/// 1 − (1 − r₁)(1 − r₂), two partitions hold the edge until the later ends. Each is
/// measured against the same fault given once as its composition.
#[test]
fn overlapping_faults_on_one_target_compose() {
    let fault = |target, kind, from: f64, to: f64| GraphFault {
        target,
        kind,
        start: secs_to_nanos(from),
        duration: secs_to_nanos(to - from),
    };
    let build = |faults: &dyn Fn(u32, u32) -> Vec<GraphFault>| {
        let mut g = Builder::new(30.0, 1.0);
        let front = g.service(1, 100_000, 0);
        let back = g.service(1, 100, 100);
        let ef = g.endpoint(front, None);
        let eb = g.endpoint(back, Some(exp(0.002)));
        let fb = g.edge(Some(front), back);
        g.p.edges[fb as usize].timeout = Some(50 * MS);
        g.step(ef, S::Calls(vec![(eb, fb, 1.0)], Wait::All));
        g.poisson(ef, 100.0, None);
        g.p.faults.extend(faults(back, fb));
        run(&g.build(), 0).0
    };
    let instances = |back| FaultTarget::Instances { service: back, first: 0, count: 1 };
    // Crashes: down from 5 s to 20 s, as one crash of 5–20 s.
    let two = build(&|back, _| {
        vec![fault(instances(back), FaultKind::Crash, 5.0, 15.0), fault(instances(back), FaultKind::Crash, 10.0, 20.0)]
    });
    let one = build(&|back, _| vec![fault(instances(back), FaultKind::Crash, 5.0, 20.0)]);
    let refused = |r: &GraphResults| r.services[1].refused_by(Refusal::Down);
    assert_eq!(refused(&two), refused(&one), "the instance stays down until the last crash ends");
    assert!((refused(&two) as f64 / (100.0 * 15.0) - 1.0).abs() < 0.1, "{} refused over 15 s", refused(&two));
    // Errors: 0.2 and 0.5 overlapping on 5–15 s is 0.6 there.
    let errors = |r: &GraphResults| r.entries[0].failed_by(Failure::Error);
    let two = build(&|back, _| {
        vec![
            fault(instances(back), FaultKind::Errors { rate: 0.2 }, 5.0, 15.0),
            fault(instances(back), FaultKind::Errors { rate: 0.5 }, 5.0, 15.0),
        ]
    });
    let one = build(&|back, _| vec![fault(instances(back), FaultKind::Errors { rate: 0.6 }, 5.0, 15.0)]);
    assert_eq!(errors(&two), errors(&one), "1 − 0.8 × 0.5 = 0.6");
    // Slowdowns multiply and latencies add: the same draws give the same results.
    let two = build(&|back, _| {
        vec![
            fault(instances(back), FaultKind::Slowdown { factor: 2.0 }, 5.0, 15.0),
            fault(instances(back), FaultKind::Slowdown { factor: 3.0 }, 5.0, 15.0),
            fault(instances(back), FaultKind::Latency { added: 2 * MS }, 5.0, 15.0),
            fault(instances(back), FaultKind::Latency { added: 3 * MS }, 5.0, 15.0),
        ]
    });
    let one = build(&|back, _| {
        vec![
            fault(instances(back), FaultKind::Slowdown { factor: 6.0 }, 5.0, 15.0),
            fault(instances(back), FaultKind::Latency { added: 5 * MS }, 5.0, 15.0),
        ]
    });
    assert_eq!(two.entries[0].successes, one.entries[0].successes);
    assert_eq!(two.entries[0].failed_by(Failure::Timeout), one.entries[0].failed_by(Failure::Timeout));
    // Partitions: the edge is cut until the later one ends.
    let timeouts = |r: &GraphResults| r.edges[0].timeouts;
    let two = build(&|_, fb| {
        vec![
            fault(FaultTarget::Edge(fb), FaultKind::Partition { fail_fast: false }, 5.0, 15.0),
            fault(FaultTarget::Edge(fb), FaultKind::Partition { fail_fast: false }, 10.0, 20.0),
        ]
    });
    let one = build(&|_, fb| vec![fault(FaultTarget::Edge(fb), FaultKind::Partition { fail_fast: false }, 5.0, 20.0)]);
    assert_eq!(timeouts(&two), timeouts(&one));
}

#[test]
fn replicas_are_deterministic() {
    let mut g = Builder::new(10.0, 1.0);
    let s = g.service(2, 2, 10);
    let e = g.endpoint(s, Some(exp(0.01)));
    g.poisson(e, 300.0, Some(0.5));
    let p = g.build();
    let (a, sa) = run(&p, 3);
    let (b, sb) = run(&p, 3);
    assert_eq!(sa, sb);
    assert_eq!(a.edges, b.edges);
    assert_eq!(a.entries[0].successes, b.entries[0].successes);
}

/// A traced replica gives the same results, and its spans form trees: every parent is a
/// span of the trace, every attempt's parent is a call, every root is an entry request,
/// and the hedges and retries counted per edge are the trace's.
#[test]
fn a_trace_is_a_forest_of_request_trees_that_adds_up_to_the_results() {
    use crate::measurement::trace::{TraceKind, NONE};
    use crate::policy::hedge::{HedgeConfig, HedgeDelay};
    let mut g = Builder::new(8.0, 1.0);
    let front = g.service(1, 100_000, 0);
    let store = g.service(3, 4, 20);
    let ef = g.endpoint(front, None);
    let es = g.endpoint(store, Some(Distribution::new(Shape::Lognormal { mu: (0.004f64).ln(), sigma: 1.0 })));
    let fs = g.edge(Some(front), store);
    g.p.edges[fs as usize].timeout = Some(30 * MS);
    g.p.edges[fs as usize].max_attempts = 3;
    g.p.edges[fs as usize].backoff = Backoff::FullJitter { base: MS, cap: 10 * MS };
    g.p.edges[fs as usize].hedge =
        Some(HedgeConfig { delay: HedgeDelay::Fixed(10 * MS), max_hedges: 1, min_samples: 0 });
    g.step(ef, S::Calls(vec![(es, fs, 1.0), (es, fs, 0.5)], Wait::FirstSuccess));
    g.poisson(ef, 600.0, Some(0.2));
    let p = g.build();
    let mut histograms = [LatencyHistogram::new()];
    let (results, series, trace) = Graph::new(p.clone(), 7, 0, &mut histograms)
        .traced(TraceNames::new(vec!["front.search", "store.get"], vec!["front", "store"], leak))
        .run_traced();
    let trace = trace.expect("traced");
    let (plain, plain_series) = run(&p, 0);
    assert_eq!(series, plain_series);
    assert_eq!(results.edges, plain.edges);
    let kind_of: std::collections::HashMap<u32, TraceKind> = trace.rows.iter().map(|r| (r.span, r.kind)).collect();
    assert_eq!(kind_of.len(), trace.rows.len(), "span numbers are unique");
    for row in &trace.rows {
        match row.kind {
            TraceKind::Call if row.parent == NONE => assert_eq!(row.class, "front.search"),
            TraceKind::Call => {
                assert_eq!(kind_of[&row.parent], TraceKind::Attempt, "a child call hangs off an attempt")
            }
            TraceKind::Attempt => assert_eq!(kind_of[&row.parent], TraceKind::Call),
            TraceKind::Wait | TraceKind::Refusal => assert!(kind_of.contains_key(&row.parent)),
            _ => {}
        }
        assert!(row.end >= row.start);
    }
    let count = |f: &dyn Fn(&crate::measurement::trace::TraceRow) -> bool| {
        trace.rows.iter().filter(|r| r.counted && f(r)).count() as u64
    };
    assert_eq!(count(&|r| r.kind == TraceKind::Call && r.parent == NONE), results.entries[0].offered);
    let edge = &results.edges[fs as usize];
    assert_eq!(count(&|r| r.kind == TraceKind::Attempt && r.gate == "hedge"), edge.hedges);
    assert_eq!(count(&|r| r.kind == TraceKind::Attempt && r.class == "store.get"), edge.attempts);
    assert_eq!(count(&|r| r.kind == TraceKind::Attempt && r.outcome == "timeout"), edge.timeouts);
    assert!(edge.hedges > 0 && edge.retries > 0 && edge.timeouts > 0, "{edge:?}");
    let waits = count(&|r| r.kind == TraceKind::Wait && r.outcome == "queue");
    assert!(waits > 0 && count(&|r| r.kind == TraceKind::Wait && r.outcome == "backoff") > 0);
}

/// Dice for a generated graph: each roll takes the next number (cycling).
struct Dice<'a>(&'a [u32], usize);

impl Dice<'_> {
    /// A whole number below `n`.
    fn below(&mut self, n: u32) -> u32 {
        self.1 += 1;
        self.0[(self.1 - 1) % self.0.len()] % n
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }
}

/// A random layered graph (each service calls later ones) with retries, hedges,
/// timeouts, parallel groups with every wait, probabilities, cancellation, async
/// services, deadlines and faults of every kind, short and overloaded at times.
fn random_graph(rolls: &[u32]) -> GraphParams {
    use crate::policy::hedge::{HedgeConfig, HedgeDelay};
    let mut dice = Dice(rolls, 0);
    let mut g = Builder::new(3.0, 0.5);
    let count = 2 + dice.below(4);
    let services: Vec<u32> = (0..count)
        .map(|_| {
            let s = g.service(1 + dice.below(3), 1 + dice.below(8), dice.below(20));
            g.p.services[s as usize].cancel_abandoned = dice.chance(50);
            g.p.services[s as usize].blocking = dice.chance(70);
            s
        })
        .collect();
    let endpoints: Vec<u32> = services
        .iter()
        .map(|&s| {
            let mean_s = 0.0005 * f64::from(1 + dice.below(20));
            g.endpoint(s, dice.chance(80).then(|| exp(mean_s)))
        })
        .collect();
    for caller in 0..count as usize - 1 {
        for _ in 0..1 + dice.below(2) {
            let mut calls = vec![];
            for _ in 0..1 + dice.below(3) {
                let callee = caller + 1 + dice.below(count - caller as u32 - 1) as usize;
                let edge = g.edge(Some(services[caller]), services[callee]);
                let e = &mut g.p.edges[edge as usize];
                e.timeout = dice.chance(70).then(|| MS * u64::from(2 + dice.below(40)));
                e.max_attempts = 1 + dice.below(3);
                e.backoff = Backoff::FullJitter { base: MS, cap: 5 * MS };
                e.propagate_deadline = dice.chance(50);
                if dice.chance(40) {
                    let delay = if dice.chance(50) {
                        HedgeDelay::Fixed(MS * u64::from(1 + dice.below(10)))
                    } else {
                        HedgeDelay::Quantile(0.9)
                    };
                    e.hedge = Some(HedgeConfig { delay, max_hedges: 1 + dice.below(2), min_samples: 0 });
                }
                let probability = if dice.chance(50) { 1.0 } else { 0.3 };
                calls.push((endpoints[callee], edge, probability));
            }
            let wait = match dice.below(3) {
                0 => Wait::All,
                1 => Wait::FirstSuccess,
                _ => Wait::Quorum(1 + dice.below(calls.len() as u32)),
            };
            g.step(endpoints[caller], S::Calls(calls, wait));
        }
    }
    let rate = f64::from(50 + dice.below(400));
    let deadline = dice.chance(50).then(|| 0.005 * f64::from(1 + dice.below(40)));
    g.poisson(endpoints[0], rate, deadline);
    for _ in 0..dice.below(4) {
        let service = services[dice.below(count) as usize];
        let kind = match dice.below(5) {
            0 => FaultKind::Slowdown { factor: 5.0 },
            1 => FaultKind::Latency { added: 20 * MS },
            2 => FaultKind::Errors { rate: 0.5 },
            3 => FaultKind::Crash,
            _ => FaultKind::Partition { fail_fast: dice.chance(50) },
        };
        let target = match kind {
            FaultKind::Partition { .. } => FaultTarget::Edge(dice.below(g.p.edges.len() as u32)),
            _ => FaultTarget::Instances { service, first: 0, count: 1 },
        };
        let start = secs_to_nanos(0.1 * f64::from(dice.below(20)));
        g.p.faults.push(GraphFault {
            target,
            kind,
            start,
            duration: secs_to_nanos(0.1 * f64::from(1 + dice.below(15))),
        });
    }
    g.build()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: std::env::var("STAMPEDE_PROPERTY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Whatever the graph: span numbers are unique, every span but an entry request has
    /// its parent in the trace (a call under an attempt, an attempt under a call, a wait
    /// or refusal under a span), and only entry requests are roots — including calls a
    /// job makes after its caller stopped waiting for it (a timeout, a hedge's loser).
    #[test]
    fn every_span_of_a_trace_has_its_parent_in_the_trace(rolls in proptest::collection::vec(0u32..1_000_000, 97)) {
        use crate::measurement::trace::{TraceKind, NONE};
        let p = random_graph(&rolls);
        let names = |n: usize, prefix: &str| -> Vec<&'static str> { (0..n).map(|i| leak(format!("{prefix}{i}"))).collect() };
        let mut histograms = [LatencyHistogram::new()];
        let (results, _, trace) = Graph::new(p.clone(), 11, 0, &mut histograms)
            .traced(TraceNames::new(names(p.endpoints.len(), "e"), names(p.services.len(), "s"), leak))
            .run_traced();
        let trace = trace.expect("traced");
        let kind_of: std::collections::HashMap<u32, TraceKind> = trace.rows.iter().map(|r| (r.span, r.kind)).collect();
        proptest::prop_assert_eq!(kind_of.len(), trace.rows.len(), "span numbers are unique");
        for row in &trace.rows {
            let parent = kind_of.get(&row.parent).copied();
            match row.kind {
                TraceKind::Call if row.parent == NONE => proptest::prop_assert_eq!(row.class, "e0", "only entry requests are roots"),
                TraceKind::Call => proptest::prop_assert_eq!(parent, Some(TraceKind::Attempt), "{:?}", row),
                TraceKind::Attempt => proptest::prop_assert_eq!(parent, Some(TraceKind::Call), "{:?}", row),
                _ => proptest::prop_assert!(parent.is_some(), "{:?}", row),
            }
        }
        // Every failed or degraded entry request has one root cause, in the results
        // and on its trace row alike.
        let entry = &results.entries[0];
        proptest::prop_assert_eq!(entry.failed_by_cause.total(), entry.failed_total());
        proptest::prop_assert_eq!(entry.degraded_by_service.total(), entry.degraded);
        proptest::prop_assert_eq!(entry.caused_by.total(), entry.failed_total());
        proptest::prop_assert_eq!(entry.slow_caused_by.total(), entry.slow);
        for row in trace.rows.iter().filter(|r| r.kind == TraceKind::Call && r.parent == NONE && r.outcome != "in_flight") {
            let plain = matches!(row.outcome, "success" | "cancelled");
            proptest::prop_assert_eq!(row.cause.is_empty(), plain, "{:?}", row);
        }
        let traced_causes = trace.rows.iter().filter(|r| r.counted && r.parent == NONE && r.kind == TraceKind::Call && !r.cause.is_empty()).count() as u64;
        proptest::prop_assert_eq!(traced_causes, entry.failed_total() + entry.degraded);
    }
}

/// The root cause crosses hops. edge → orders → payments, payments failing every call
/// from 2 s to 8 s with a breaker on orders→payments: the entry sees orders' errors,
/// but each failed request names payments — `error` before the breaker opens, then
/// `breaker_open` (the incident's signature the entry's reason hides). Causes add up
/// to the failures, and a deeper refusal (a crashed bottom tier behind a fallback)
/// shows as the service the fallback answered for.
#[test]
fn a_failure_keeps_its_root_cause_across_hops() {
    use crate::policy::breaker::BreakerConfig;
    let mut g = Builder::new(10.0, 1.0);
    let edge = g.service(1, 100_000, 0);
    let orders = g.service(1, 100_000, 0);
    let payments = g.service(1, 100_000, 0);
    let ledger = g.service(1, 100_000, 0);
    let ee = g.endpoint(edge, Some(constant(0.0001)));
    let eo = g.endpoint(orders, Some(constant(0.0001)));
    let ep = g.endpoint(payments, Some(constant(0.001)));
    let el = g.endpoint(ledger, Some(constant(0.001)));
    let to_orders = g.edge(Some(edge), orders);
    let to_payments = g.edge(Some(orders), payments);
    let to_ledger = g.edge(Some(orders), ledger);
    g.p.edges[to_payments as usize].breaker =
        Some(BreakerConfig { minimum_calls: 20, open_duration: secs_to_nanos(30.0), ..BreakerConfig::default() });
    g.p.edges[to_ledger as usize].fallback_on = FailureSet::of(&Failure::ALL);
    g.step(ee, S::Calls(vec![(eo, to_orders, 1.0)], Wait::All));
    g.step(eo, S::Calls(vec![(el, to_ledger, 1.0)], Wait::All));
    g.step(eo, S::Calls(vec![(ep, to_payments, 1.0)], Wait::All));
    g.poisson(ee, 200.0, None);
    let (start, duration) = (secs_to_nanos(2.0), secs_to_nanos(6.0));
    let everyone = |service| FaultTarget::Instances { service, first: 0, count: 1 };
    g.p.faults.push(GraphFault { target: everyone(payments), kind: FaultKind::Errors { rate: 1.0 }, start, duration });
    g.p.faults.push(GraphFault {
        target: everyone(ledger),
        kind: FaultKind::Crash,
        start: secs_to_nanos(1.2),
        duration: secs_to_nanos(0.7),
    });
    let p = g.build();
    let (results, _) = run(&p, 0);
    let entry = &results.entries[0];
    let by = |service, failure| entry.failed_by_cause(Cause::at(service, failure));
    assert_eq!(entry.failed_by(Failure::Error), entry.failed_total(), "the entry sees only orders' errors");
    assert_eq!(entry.failed_by_cause.total(), entry.failed_total(), "every failure has one cause");
    assert_eq!(entry.degraded_by_service.total(), entry.degraded);
    let (errors, refusals) = (by(payments, Failure::Error), by(payments, Failure::BreakerOpen));
    assert!(errors >= 20 && refusals > 1_000, "payments: {errors} errors, {refusals} breaker refusals");
    assert_eq!(errors + refusals, entry.failed_total(), "{:?}", entry.failed_by_cause);
    assert_eq!(by(orders, Failure::Error), 0, "orders only passed payments' failures up");
    // The ledger crashed for 0.7 s before the incident, behind a fallback: degraded, for the ledger.
    let degraded_by_ledger = entry.degraded_by_service(ledger);
    assert!(degraded_by_ledger > 100 && degraded_by_ledger == entry.degraded, "{:?}", entry.degraded_by_service);
}

/// The culprit is the cause, not the hop that failed: the shop's browse requests
/// (edge → inventory, never payments) are refused at edge while payments is slowed 40×
/// from 3 s to 9 s, because edge's workers all wait on checkout, whose workers all wait
/// on payments. `failed_by` names edge (where they failed); `caused_by` names payments
/// for ≥ 90% of them, and for ≥ 90% of the browse requests slower than their 50 ms SLO
/// (queued at edge behind the blocked workers). Each failure has one culprit. Before the
/// slowdown nothing fails; when edge's own work is what saturates it (no fault, 55 ms
/// per request), edge is the culprit.
#[test]
fn a_slow_leaf_behind_saturated_callers_is_the_culprit() {
    let run_shop = |slowdown: bool, edge_work_s: f64| {
        let mut g = Builder::new(12.0, 1.0);
        let edge = g.service(1, 16, 16);
        let checkout = g.service(1, 8, 8);
        let payments = g.service(1, 4, 8);
        let inventory = g.service(1, 8, 64);
        let browse = g.endpoint(edge, Some(exp(edge_work_s)));
        let buy = g.endpoint(edge, Some(exp(0.0005)));
        let ec = g.endpoint(checkout, Some(exp(0.001)));
        let ep = g.endpoint(payments, Some(exp(0.004)));
        let ei = g.endpoint(inventory, Some(exp(0.002)));
        let to_checkout = g.edge(Some(edge), checkout);
        let to_payments = g.edge(Some(checkout), payments);
        let to_inventory = g.edge(Some(edge), inventory);
        g.step(browse, S::Calls(vec![(ei, to_inventory, 1.0)], Wait::All));
        g.step(buy, S::Calls(vec![(ec, to_checkout, 1.0)], Wait::All));
        g.step(ec, S::Calls(vec![(ep, to_payments, 1.0)], Wait::All));
        g.poisson(browse, 300.0, None);
        g.poisson(buy, 60.0, None);
        g.p.workloads[0].slo = Some(50 * MS);
        if slowdown {
            g.p.faults.push(GraphFault {
                target: FaultTarget::Instances { service: payments, first: 0, count: 1 },
                kind: FaultKind::Slowdown { factor: 40.0 },
                start: secs_to_nanos(3.0),
                duration: secs_to_nanos(6.0),
            });
        }
        let p = g.build();
        let (results, _) = run(&p, 0);
        (results, edge, payments)
    };
    let (calm, ..) = run_shop(false, 0.0005);
    assert_eq!(calm.entries[0].failed_total(), 0, "nothing fails before the slowdown");
    let (busy, edge, _) = run_shop(false, 0.055);
    let (failed, own) = (busy.entries[0].failed_total(), busy.entries[0].caused_by(edge));
    assert!(failed > 200 && own as f64 >= 0.9 * failed as f64, "edge's own work caused {own} of {failed}");
    let (results, edge, payments) = run_shop(true, 0.0005);
    let browse = &results.entries[0];
    let failed = browse.failed_total();
    assert!(failed > 200, "browse requests fail in the slowdown: {failed}");
    assert_eq!(browse.caused_by.total(), failed, "each failure has one culprit");
    let refused_at_edge = browse.failed_by_cause(Cause::at(edge, Failure::Refused));
    assert!(refused_at_edge as f64 > 0.9 * failed as f64, "failed_by names edge: {:?}", browse.failed_by_cause);
    let blamed = browse.caused_by(payments);
    assert!(blamed as f64 >= 0.9 * failed as f64, "payments caused {blamed} of {failed}: {:?}", browse.caused_by);
    assert!(browse.slow > 100, "browse requests slower than 50 ms: {}", browse.slow);
    assert_eq!(browse.slow_caused_by.total(), browse.slow);
    let slow_blamed = browse.slow_caused_by(payments);
    assert!(
        slow_blamed as f64 >= 0.9 * browse.slow as f64,
        "payments caused {slow_blamed} of {} slow: {:?}",
        browse.slow,
        browse.slow_caused_by
    );
    let buy = &results.entries[1];
    assert!(buy.caused_by(payments) as f64 >= 0.9 * buy.failed_total() as f64, "{:?}", buy.caused_by);
}

/// `timeout_s = "p99"`: a callee of exponential latency (mean 10 ms, far from
/// overload) times out about 1% of attempts once the running p99 is read; `"p95 * 2"`
/// about e^(−2 ln 20) = 0.25%. Until 20 answers, the ceiling holds.
#[test]
fn an_adaptive_timeout_cuts_the_share_its_quantile_says() {
    use crate::policy::adaptive_timeout::AdaptiveTimeoutConfig;
    let share = |quantile: f64, multiple: f64| {
        let mut g = Builder::new(60.0, 5.0);
        let front = g.service(1, 100_000, 0);
        let back = g.service(1, 100_000, 0);
        let ef = g.endpoint(front, None);
        let eb = g.endpoint(back, Some(exp(0.01)));
        let fb = g.edge(Some(front), back);
        g.p.edges[fb as usize].adaptive_timeout =
            Some(AdaptiveTimeoutConfig { quantile, multiple, floor: MS, ceiling: 1_000 * MS, min_samples: 20 });
        g.step(ef, S::Calls(vec![(eb, fb, 1.0)], Wait::All));
        g.poisson(ef, 400.0, None);
        let p = g.build();
        let (results, _) = run(&p, 0);
        let edge = &results.edges[fb as usize];
        edge.timeouts as f64 / edge.attempts as f64
    };
    let p99 = share(0.99, 1.0);
    assert!((0.007..0.014).contains(&p99), "p99: {p99} of attempts timed out");
    let doubled = share(0.95, 2.0);
    assert!((0.001..0.0045).contains(&doubled), "p95 × 2: {doubled}");
}

/// Each call site counts its own calls: checkout calls inventory always and payments
/// for 30% of requests; payments fails every call, so its site's calls all fail while
/// inventory's all succeed, and the payments site made 30% ± 3σ of the entry's.
#[test]
fn a_call_site_has_its_own_outcomes() {
    let mut g = Builder::new(20.0, 1.0);
    let front = g.service(1, 100_000, 0);
    let inventory = g.service(1, 100_000, 0);
    let payments = g.service(1, 100_000, 0);
    let ef = g.endpoint(front, None);
    let ei = g.endpoint(inventory, Some(exp(0.002)));
    let ep = g.endpoint(payments, Some(exp(0.002)));
    let fi = g.edge(Some(front), inventory);
    let fp = g.edge(Some(front), payments);
    g.step(ef, S::Calls(vec![(ei, fi, 1.0)], Wait::All));
    g.step(ef, S::Calls(vec![(ep, fp, 0.3)], Wait::All));
    g.poisson(ef, 200.0, None);
    g.p.faults.push(GraphFault {
        target: FaultTarget::Instances { service: payments, first: 0, count: 1 },
        kind: FaultKind::Errors { rate: 1.0 },
        start: 0,
        duration: secs_to_nanos(100.0),
    });
    let p = g.build();
    let (results, _) = run(&p, 0);
    let entry = &results.entries[0];
    let (inv, pay) = (&results.sites[0], &results.sites[1]);
    assert_eq!(results.sites.len(), 2);
    assert_eq!(inv.successes, inv.offered, "inventory answers every call");
    assert!(inv.latency.quantile(0.5) > 0.0 && inv.latency_mean_s() > 0.0015, "{}", inv.latency_mean_s());
    assert_eq!(pay.failed_by(Failure::Error), pay.offered, "payments fails every call");
    assert_eq!(pay.successes, 0);
    let n = entry.offered as f64;
    let sd = (n * 0.3 * 0.7).sqrt();
    assert!((pay.offered as f64 - 0.3 * n).abs() < 3.0 * sd, "{} of {n}", pay.offered);
    assert_eq!(entry.failed_by(Failure::Error), pay.offered, "each failed payment failed its request");
}

/// An HPA on CPU sees the CPU: a service doing 1 ms of work per request and then
/// waiting 1 s on a downstream call holds ~20 of its 64 threads at 20 requests/s
/// (occupancy 0.31) but works 0.02 of them (CPU 0.0003). On occupancy with target 0.25
/// it scales from 2 to 3; on CPU with target 0.25 it goes down to its minimum, 1. A
/// CPU-bound service (10 ms per request at 150/s on 2 × 4 workers: 1.5 busy, CPU ≈
/// occupancy ≈ 0.19 against a target of 0.1; 75 requests/s per instance on rps) scales
/// up either way, to its maximum, 4.
/// `cpu_utilisation` is the work share the theory gives (λ·s / workers), and the
/// desired-count series records every decision.
#[test]
fn autoscaling_on_cpu_sees_work_and_not_threads_blocked_on_calls() {
    use crate::policy::autoscale::AutoscaleConfig;
    let scaled = |metric: ScaleMetric, io_bound: bool| {
        let mut g = Builder::new(120.0, 10.0);
        let front = g.service(4, if io_bound { 32 } else { 4 }, 1_000);
        let back = g.service(1, 1_000, 0);
        let (work, rate) = if io_bound { (0.001, 20.0) } else { (0.01, 150.0) };
        let ef = g.endpoint(front, Some(constant(work)));
        let eb = g.endpoint(back, Some(constant(1.0)));
        if io_bound {
            let fb = g.edge(Some(front), back);
            g.step(ef, S::Calls(vec![(eb, fb, 1.0)], Wait::All));
        }
        g.poisson(ef, rate, None);
        g.p.services[front as usize].autoscale = Some(Autoscale {
            config: AutoscaleConfig {
                target: if io_bound { 0.25 } else { 0.1 },
                min: 1,
                max: 4,
                sync_period: secs_to_nanos(5.0),
                tolerance: 0.1,
                scale_down_window: secs_to_nanos(10.0),
                scale_up_window: 0,
            },
            metric,
            initial: 2,
            provisioning: constant(1.0),
            cold_start: 0,
            cold_start_factor: 1.0,
        });
        let p = g.build();
        let (results, series) = run(&p, 0);
        (results.services[front as usize].clone(), series.desired_area[front as usize].clone())
    };
    let (on_occupancy, _) = scaled(ScaleMetric::Utilisation, true);
    let (on_cpu, desired) = scaled(ScaleMetric::Cpu, true);
    assert!(on_occupancy.instances_mean > 2.8, "occupancy scales up: {}", on_occupancy.instances_mean);
    assert!(on_cpu.instances_mean < 1.3, "CPU scales down: {}", on_cpu.instances_mean);
    let work_share = 20.0 * 0.001 / (32.0 * on_cpu.instances_mean);
    assert!((on_cpu.cpu_utilisation / work_share - 1.0).abs() < 0.2, "{} vs {work_share}", on_cpu.cpu_utilisation);
    assert!(on_cpu.utilisation > 100.0 * on_cpu.cpu_utilisation, "threads held, not working");
    // The decisions on record: the last one asked for the minimum.
    let bucket_ns = 100.0 * MS as f64;
    assert_eq!((*desired.last().unwrap() as f64 / bucket_ns).round(), 1.0, "{:?}", &desired[desired.len() - 5..]);
    for metric in [ScaleMetric::Cpu, ScaleMetric::Utilisation, ScaleMetric::Rps] {
        let (bound, _) = scaled(metric, false);
        assert!(bound.instances_mean > 3.5, "{metric:?}: {}", bound.instances_mean);
        assert!((bound.cpu_utilisation - bound.utilisation).abs() < 1e-9, "no blocking: CPU = occupancy");
    }
}
