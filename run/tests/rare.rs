//! `stampede rare`'s estimator against exact answers: gambler's ruin on an M/M/1
//! queue (the real `mmc` model), where the probability that a busy period reaches K
//! customers is 1 / (r^K − 1)·(r − 1) with r = μ/λ; an M/M/1/K turning a customer
//! away in a busy period at a small load; and plain replicas where the probability is
//! large enough for them.

use stampede_engine::kernel::rng::{RngStream, StreamPurpose};
use stampede_engine::kernel::sim::{Model, Scheduler, Simulation};
use stampede_engine::kernel::splitting::{Forkable, Splittable, Trajectory};
use stampede_engine::kernel::time::{secs_to_nanos, Nanos};
use stampede_engine::LatencyHistogram;
use stampede_run::rare::{estimate, Levels, RareEstimate, RareRequest};
use stampede_scenario::models::rare::{no_output, Observed, Probe};
use stampede_scenario::{Overrides, Scenario};

/// P(an M/M/1 busy period started by one customer reaches `k` in the system).
fn ruin(lambda: f64, mu: f64, k: i32) -> f64 {
    let r = mu / lambda;
    (r - 1.0) / (r.powi(k) - 1.0)
}

fn mm1(lambda: f64, mu: f64) -> Scenario {
    mm1k(lambda, mu, None)
}

/// An M/M/1 queue, with a capacity of `k` customers when given (an M/M/1/K).
fn mm1k(lambda: f64, mu: f64, k: Option<u32>) -> Scenario {
    let capacity = k.map(|k| format!("capacity = {k}\n")).unwrap_or_default();
    let text = format!(
        "name = \"ruin\"\nmodel = \"mmc\"\n[run]\nhorizon_s = 100000.0\nreplicas = 1\n\
         [queue]\narrival_rate_per_s = {lambda}\nservice_rate_per_s = {mu}\nservers = 1\n{capacity}"
    );
    let source = stampede_scenario::base::typing::parse_text(&text, "test").unwrap();
    Scenario::resolve(source, &Overrides::default()).unwrap()
}

fn busy_period_reaching(
    k: u32,
    seed: u64,
    levels: Levels,
    runs: (u32, u32),
    trajectories: u32,
    relative_error: f64,
) -> RareEstimate {
    busy_period_on(k, seed, levels, runs, trajectories, relative_error, 2)
}

/// As [`busy_period_reaching`], on `threads` workers.
fn busy_period_on(
    k: u32,
    seed: u64,
    levels: Levels,
    runs: (u32, u32),
    trajectories: u32,
    relative_error: f64,
    threads: usize,
) -> RareEstimate {
    let probe = (format!("in_system >= {k}"), None);
    mmc_estimate(&mm1(1.0, 2.0), probe, seed, levels, runs, trajectories, relative_error, threads)
}

/// The estimate of `event` (with its score, if named) before `in_system == 0` on an
/// `mmc` scenario.
#[allow(clippy::too_many_arguments)]
fn mmc_estimate(
    scenario: &Scenario,
    (event, score): (String, Option<&str>),
    seed: u64,
    levels: Levels,
    runs: (u32, u32),
    trajectories: u32,
    relative_error: f64,
    threads: usize,
) -> RareEstimate {
    let probe = Probe::parse(&scenario.model.quantities(), &event, score, Some("in_system == 0")).unwrap();
    estimate_on(scenario, probe, seed, levels, runs, trajectories, relative_error, threads)
}

/// The estimate of `probe` on `scenario`'s model, with no budget in events.
#[allow(clippy::too_many_arguments)]
fn estimate_on(
    scenario: &Scenario,
    probe: Probe,
    seed: u64,
    levels: Levels,
    runs: (u32, u32),
    trajectories: u32,
    relative_error: f64,
    threads: usize,
) -> RareEstimate {
    let model = scenario.model.splittable(&scenario.run, seed, probe).expect("the model splits");
    let request = RareRequest {
        horizon: secs_to_nanos(scenario.run.horizon_s),
        trajectories,
        levels,
        relative_error,
        min_runs: runs.0,
        max_runs: runs.1,
        max_events: u64::MAX,
        master_seed: seed,
        shard: None,
    };
    estimate(&*model, &request, threads, &|| {}).unwrap()
}

/// Over `seeds` seeds: how many intervals cover `exact`, and the mean estimate / exact.
fn coverage(exact: f64, seeds: u64, estimate_for: impl Fn(u64) -> RareEstimate) -> (u32, f64) {
    let (mut covered, mut ratios) = (0, 0.0);
    for seed in 0..seeds {
        let found = estimate_for(seed);
        covered += u32::from(found.low <= exact && exact <= found.high);
        ratios += found.probability / exact;
    }
    let mean_ratio = ratios / seeds as f64;
    eprintln!("exact {exact:.3e}: covered {covered}/{seeds}; mean estimate / exact = {mean_ratio:.3}");
    (covered, mean_ratio)
}

const AUTO: Levels = Levels::Auto { target: 0.2, max_levels: 60 };

/// A birth–death chain whose state is its count and nothing else: up at rate λ,
/// down at rate μ while above zero, every holding time drawn afresh. The gambler's
/// ruin is exact for it, and no hidden state (such as the M/M/1's queued customers'
/// service times, drawn on arrival) makes clones of one count differ.
struct Chain<'h> {
    count: u64,
    up: f64,
    down: f64,
    rng: RngStream,
    _scratch: &'h mut LatencyHistogram,
}

impl Model for Chain<'_> {
    type Event = ();
    fn handle(&mut self, _now: Nanos, _event: (), scheduler: &mut Scheduler<()>) {
        let down = if self.count > 0 { self.down } else { 0.0 };
        if self.rng.uniform01() * (self.up + down) < self.up {
            self.count += 1;
        } else {
            self.count -= 1;
        }
        let rate = self.up + if self.count > 0 { self.down } else { 0.0 };
        scheduler.after(secs_to_nanos(self.rng.exponential(rate)).max(1), ());
    }
}

impl Forkable for Chain<'_> {
    fn fork_streams(&mut self, salt: u64) {
        self.rng.fork(salt);
    }
}

struct ChainSplitting {
    up: f64,
    down: f64,
    seed: u64,
    probe: Probe,
}

impl Splittable for ChainSplitting {
    fn scratch(&self) -> Vec<LatencyHistogram> {
        vec![LatencyHistogram::new()]
    }
    fn start<'a>(&self, scratch: &'a mut [LatencyHistogram], origin: u64) -> Box<dyn Trajectory + 'a> {
        let mut rng = RngStream::derive(self.seed, origin, StreamPurpose::named("test.chain"));
        let first = secs_to_nanos(rng.exponential(self.up + self.down)).max(1);
        let chain = Chain { count: 1, up: self.up, down: self.down, rng, _scratch: &mut scratch[0] };
        let mut simulation = Simulation::new(chain, 4);
        simulation.scheduler().at(first, ());
        let read = |chain: &Chain<'_>, _: usize| chain.count as f64;
        Box::new(Observed { simulation, probe: self.probe.clone(), read, finish: no_output })
    }
}

fn chain_reaching(k: u32, seed: u64, runs: (u32, u32), relative_error: f64) -> RareEstimate {
    chain_within(k, seed, runs, relative_error, u64::MAX, 2).unwrap()
}

/// As [`chain_reaching`], within a budget of `max_events`, on `threads` workers.
fn chain_within(
    k: u32,
    seed: u64,
    runs: (u32, u32),
    relative_error: f64,
    max_events: u64,
    threads: usize,
) -> stampede_scenario::Result<RareEstimate> {
    let names = vec!["count".to_string()];
    let probe = Probe::parse(&names, &format!("count >= {k}"), None, Some("count == 0")).unwrap();
    let model = ChainSplitting { up: 1.0, down: 2.0, seed, probe };
    let request = RareRequest {
        horizon: secs_to_nanos(1e5),
        trajectories: 100,
        levels: AUTO,
        relative_error,
        min_runs: runs.0,
        max_runs: runs.1,
        max_events,
        master_seed: seed,
        shard: None,
    };
    estimate(&model, &request, threads, &|| {})
}

#[test]
fn shards_combine_into_the_estimate_one_process_makes() {
    let names = vec!["count".to_string()];
    let probe = Probe::parse(&names, "count >= 16", None, Some("count == 0")).unwrap();
    let model = ChainSplitting { up: 1.0, down: 2.0, seed: 3, probe };
    let request = RareRequest {
        horizon: secs_to_nanos(1e5),
        trajectories: 50,
        levels: AUTO,
        relative_error: 0.0,
        min_runs: 7,
        max_runs: 7,
        max_events: u64::MAX,
        master_seed: 3,
        shard: None,
    };
    let whole = estimate(&model, &request, 2, &|| {}).unwrap();
    let shards: Vec<RareEstimate> = (0..3)
        .map(|index| {
            let shard = Some(stampede_run::plan::Shard { index, count: 3 });
            estimate(&model, &RareRequest { shard, ..request.clone() }, 1, &|| {}).unwrap()
        })
        .collect();
    assert_eq!(shards.iter().map(|part| part.runs.len()).collect::<Vec<_>>(), [3, 2, 2]);
    let combined = stampede_run::rare::combine(shards.clone()).unwrap();
    assert_eq!(combined, whole, "the shards' runs are the whole's, and so is every figure");
    let twice = stampede_run::rare::combine(vec![shards[0].clone(), shards[0].clone()]).unwrap_err();
    assert!(twice.to_string().contains("a shard was given twice"), "{twice}");
}

#[test]
fn a_budget_of_events_stops_the_runs_the_same_way_on_any_thread_count() {
    let free = chain_reaching(20, 5, (4, 4), 0.0);
    let per_run = free.run_events() / 4;
    let before_runs = free.events - free.run_events();
    // Room for the first 4 runs and about 6 more: the estimate stops short of 1%.
    let budget = before_runs + 10 * per_run;
    let one = chain_within(20, 5, (4, 5000), 0.01, budget, 1).unwrap();
    let two = chain_within(20, 5, (4, 5000), 0.01, budget, 2).unwrap();
    assert_eq!(one, two, "the budget cut the runs at the same place");
    assert!(one.budget_spent && one.relative_error > 0.01, "{one:?}");
    assert!((4..=14).contains(&one.runs.len()), "{} runs in a budget of about 10", one.runs.len());
    assert!(one.events <= budget, "{} events in a budget of {budget}", one.events);
    // Too small for the pilot: an error naming the flag, exit 2.
    let error = chain_within(20, 5, (4, 5000), 0.01, 1000, 2).unwrap_err();
    assert!(error.to_string().contains("the pilot") && error.to_string().contains("--max-events 1000"), "{error}");
    assert_eq!(error.exit_code(), 2);
}

#[test]
fn intervals_cover_a_one_in_two_million_ruin_in_at_least_nine_of_ten_seeds() {
    let exact = ruin(1.0, 2.0, 21);
    assert!(exact < 1e-6, "{exact}");
    let seeds = 50;
    let mut covered = 0;
    let mut ratios = Vec::new();
    for seed in 0..seeds {
        let found = chain_reaching(21, seed, (30, 30), 0.0);
        covered += u32::from(found.low <= exact && exact <= found.high);
        ratios.push(found.probability / exact);
    }
    let mean_ratio = ratios.iter().sum::<f64>() / ratios.len() as f64;
    eprintln!("covered {covered}/{seeds}; mean estimate / exact = {mean_ratio:.3}");
    assert!(covered >= 45, "95% intervals covered the exact value in {covered} of {seeds} seeds");
    // 50 seeds × 20 runs of an unbiased estimator with ~20% relative error per seed.
    assert!((mean_ratio - 1.0).abs() < 0.1, "mean estimate / exact = {mean_ratio}");
}

#[test]
fn where_plain_replicas_can_see_it_they_agree() {
    let exact = ruin(1.0, 2.0, 9);
    assert!(exact > 1e-3);
    let split = busy_period_reaching(9, 7, AUTO, (20, 20), 100, 0.0);
    // No levels: each run is 20,000 plain replicas.
    let plain = busy_period_reaching(9, 7, Levels::Fixed(Vec::new()), (20, 20), 20_000, 0.0);
    for found in [&split, &plain] {
        assert!(found.low <= exact && exact <= found.high, "{exact} outside [{}, {}]", found.low, found.high);
    }
    assert!(split.low <= plain.high && plain.low <= split.high, "split {split:?} and plain {plain:?} disagree");
    assert!(plain.levels.is_empty() && split.levels.len() >= 2, "levels {:?}", split.levels);
}

#[test]
fn a_run_is_the_same_for_any_thread_count_and_levels_increase() {
    let a = busy_period_on(15, 3, AUTO, (6, 6), 50, 0.0, 1);
    let b = busy_period_on(15, 3, AUTO, (6, 6), 50, 0.0, 3);
    assert_eq!(a, b);
    assert!(a.levels.windows(2).all(|pair| pair[0] < pair[1]), "{:?}", a.levels);
    assert!(a.probability > 0.0 && a.hits() > 0);
}

#[test]
fn the_real_mm1_finds_a_one_in_thirty_thousand_ruin_within_its_intervals() {
    // The M/M/1 draws each customer's service on arrival, so clones of one count
    // differ in the work queued: more variance than the chain's, the same answer.
    let exact = ruin(1.0, 2.0, 15);
    for seed in 0..4 {
        let found = busy_period_reaching(15, seed, AUTO, (20, 400), 100, 0.15);
        eprintln!(
            "seed {seed}: {:.3} [{:.3}, {:.3}] of exact, {} runs",
            found.probability / exact,
            found.low / exact,
            found.high / exact,
            found.runs.len()
        );
        assert!(
            found.low <= exact && exact <= found.high,
            "seed {seed}: {exact:e} outside [{:e}, {:e}]",
            found.low,
            found.high
        );
        assert!(found.relative_error <= 0.15, "{}", found.relative_error);
    }
}

#[test]
fn near_one_in_a_million_splitting_needs_a_hundred_times_fewer_events_than_plain_replicas() {
    let exact = ruin(1.0, 2.0, 20);
    let found = chain_reaching(20, 11, (20, 5000), 0.1);
    let (needed, spent) = (found.plain_events_needed(), found.events);
    eprintln!(
        "p = {:.3e} (exact {exact:.3e}), relative error {:.3}, {} runs: {spent} events against {needed:.3e} for plain replicas ({:.0}×)",
        found.probability,
        found.relative_error,
        found.runs.len(),
        found.speedup()
    );
    assert!(found.relative_error <= 0.1 && found.low <= exact && exact <= found.high);
    assert!(found.speedup() >= 100.0, "only {:.1}× fewer events", found.speedup());
}

/// P(an M/M/1/K busy period started by one customer turns an arrival away). The
/// jump chain steps up with p = λ/(λ+μ), down with q = 1 − p; h₀ = 0 and
/// hᵢ = p·hᵢ₊₁ + q·hᵢ₋₁ give hᵢ = c·(1 − (q/p)ⁱ), and at K an arrival is turned
/// away (p) or a service ends (q): h_K = p + q·h_{K−1} fixes c.
fn blocking_in_busy_period(lambda: f64, mu: f64, k: i32) -> f64 {
    let p = lambda / (lambda + mu);
    let q = 1.0 - p;
    let g = |i: i32| 1.0 - (q / p).powi(i);
    let c = p / (g(k) - q * g(k - 1));
    c * g(1)
}

#[test]
fn an_mm1k_at_a_quarter_load_turns_a_customer_away_as_often_as_the_jump_chain_says() {
    let (k, lambda, mu) = (10, 1.0, 4.0);
    let exact = blocking_in_busy_period(lambda, mu, k);
    assert!((1e-7..1e-6).contains(&exact), "{exact}");
    assert!((blocking_in_busy_period(1.0, 4.0, 1) - 0.2).abs() < 1e-12, "K = 1: an arrival before the service ends");
    let scenario = mm1k(lambda, mu, Some(k as u32));
    let seeds = 8;
    let (covered, mean_ratio) = coverage(exact, seeds, |seed| {
        let probe = ("rejected >= 1".to_string(), Some("in_system"));
        mmc_estimate(&scenario, probe, seed, AUTO, (20, 2000), 100, 0.15, 2)
    });
    // The model draws each customer's service on arrival and schedules its departure
    // then, so the clones of one state share the departure in progress: runs vary more
    // than the chain's, and each seed runs until 15% relative error (7 of 8 covered,
    // mean 0.948, when written). A correct interval misses in 3 or more of 8 seeds with
    // probability under 4% at 90% coverage; a model 30% off fails the mean.
    assert!(covered >= 6, "95% intervals covered the exact value in {covered} of {seeds} seeds");
    assert!((mean_ratio - 1.0).abs() < 0.15, "mean estimate / exact = {mean_ratio}");
}

/// P(an M/M/1/K that starts empty turns an arrival away by `t` seconds), exactly:
/// the chain on 0..=K with an absorbing "turned away" state, solved by
/// uniformisation (Λ = λ + μ; Poisson-weighted powers of I + Q/Λ, summed until the
/// weights left are below 1e-15).
fn blocked_by(lambda: f64, mu: f64, k: usize, t: f64) -> f64 {
    let rate = lambda + mu;
    let mut state = vec![0.0; k + 2];
    state[0] = 1.0;
    let (mut weight, mut left, mut blocked) = ((-rate * t).exp(), 1.0, 0.0);
    for n in 0.. {
        blocked += weight * state[k + 1];
        left -= weight;
        if left < 1e-15 && n as f64 > rate * t {
            break;
        }
        let mut next = vec![0.0; k + 2];
        for (i, &p) in state.iter().enumerate().take(k + 1) {
            let (up, down) = (lambda / rate, if i > 0 { mu / rate } else { 0.0 });
            next[if i == k { k + 1 } else { i + 1 }] += p * up;
            if i > 0 {
                next[i - 1] += p * down;
            }
            next[i] += p * (1.0 - up - down);
        }
        next[k + 1] += state[k + 1];
        state = next;
        weight *= rate * t / (n + 1) as f64;
    }
    blocked
}

/// The estimate of `event` (with its score, if named) on `scenario` parsed as
/// `stampede rare` parses it (metrics judged at the end included), no stop condition.
fn point_estimate(
    scenario: &Scenario,
    (event, score): (&str, Option<&str>),
    seed: u64,
    runs: (u32, u32),
    relative_error: f64,
) -> RareEstimate {
    let probe = scenario.model.probe(&scenario.run, event, score, None).unwrap();
    estimate_on(scenario, probe, seed, AUTO, runs, 100, relative_error, 2)
}

#[test]
fn a_metric_judged_at_the_end_and_the_state_event_it_implies_both_find_the_exact_transient_answer() {
    // `rejected_ratio > 0` at the end holds exactly when `rejected >= 1` happened on
    // the way: two estimators (hits counted at the horizon in the stage a trajectory
    // ended in, or when the state first holds), one exact answer.
    let (lambda, mu, k, t) = (1.0, 4.0, 8, 20.0);
    let exact = blocked_by(lambda, mu, k, t);
    assert!((1e-4..1e-3).contains(&exact), "{exact}");
    assert!((blocked_by(1.0, 4.0, 0, 1.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-12, "K = 0: the first arrival");
    let text = format!(
        "name = \"mm1k\"\nmodel = \"mmc\"\n[run]\nhorizon_s = {t}\nwarmup_s = 0.0\nreplicas = 1\n\
         [queue]\narrival_rate_per_s = {lambda}\nservice_rate_per_s = {mu}\nservers = 1\ncapacity = {k}\n"
    );
    let source = stampede_scenario::base::typing::parse_text(&text, "test").unwrap();
    let scenario = Scenario::resolve(source, &Overrides::default()).unwrap();
    // The end's default score is in_system; the state event's would be `rejected`,
    // flat until the event, so it is named.
    for probe in [("rejected_ratio > 0", None), ("rejected >= 1", Some("in_system"))] {
        let event = probe.0;
        eprint!("{event}: ");
        let (covered, mean_ratio) = coverage(exact, 6, |seed| point_estimate(&scenario, probe, seed, (20, 1000), 0.15));
        // Each seed at 15% relative error: a correct 95% interval misses in 3 or more
        // of 6 seeds with probability under 1%; a model 30% off fails the mean.
        assert!(covered >= 4, "{event}: covered the exact value in {covered} of 6 seeds");
        assert!((mean_ratio - 1.0).abs() < 0.15, "{event}: mean estimate / exact = {mean_ratio}");
    }
}

#[test]
fn a_graphs_p99_judged_at_the_end_agrees_with_plain_replicas() {
    let text = "name = \"api\"\nmodel = \"graph\"\n[run]\nhorizon_s = 30.0\nwarmup_s = 0.0\nreplicas = 1\n\
                [services.api]\nworkers = 4\n[services.api.endpoints.get]\n\
                work = { dist = \"exponential\", mean_s = 0.1 }\n[edges.\"client->api\"]\ntimeout_s = 1.0\n\
                [[workload]]\nentry = \"api.get\"\nrate_per_s = 30.0\n";
    let source = stampede_scenario::base::typing::parse_text(text, "test").unwrap();
    let scenario = Scenario::resolve(source, &Overrides::default()).unwrap();
    let metric = scenario.model.metrics().iter().position(|m| m.name == "api.get.p99_all_s").unwrap();
    // Plain replicas fix the threshold their 95th percentile p99 passes: P ≈ 5%.
    let replicas = 600u64;
    let mut histograms: Vec<LatencyHistogram> =
        scenario.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
    let mut p99s: Vec<f64> = (0..replicas)
        .map(|replica| scenario.model.run_replica(&scenario.run, 99, replica, &mut histograms).metrics[metric])
        .collect();
    p99s.sort_by(f64::total_cmp);
    let threshold = p99s[(replicas as usize * 95) / 100];
    let plain = p99s.iter().filter(|&&p99| p99 > threshold).count() as f64 / replicas as f64;
    let plain_half_width = 1.96 * (plain * (1.0 - plain) / replicas as f64).sqrt();
    let event = format!("api.get.p99_all_s > {threshold}");
    let split = point_estimate(&scenario, (&event, None), 5, (10, 200), 0.1);
    eprintln!(
        "p99 > {threshold:.3} s: plain {plain:.4} ± {plain_half_width:.4}; split {:.4} [{:.4}, {:.4}]",
        split.probability, split.low, split.high
    );
    assert!(
        split.low <= plain + plain_half_width && plain - plain_half_width <= split.high,
        "split {split:?} and plain {plain} ± {plain_half_width} disagree"
    );
    assert!(!split.levels.is_empty() && split.hits() > 0, "the score led somewhere: {:?}", split.levels);
}
