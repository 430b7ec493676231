//! In-process tests of the layers above the models: resolving scenarios, grid
//! expansion, validation messages and verify — without launching the binary.

use stampede_engine::LatencyHistogram;
use stampede_scenario::scenario::builtin::{load_scenario_source, BUILTINS};
use stampede_scenario::{Overrides, Scenario};

/// Every built-in scenario's model reports exactly the metrics and series it declares.
#[test]
fn models_report_what_they_declare() {
    for (name, _) in BUILTINS {
        let overrides =
            Overrides { sets: vec![("run.horizon_s".into(), toml::Value::Float(6.0))], grids: vec![], cases: vec![] };
        let mut source = load_scenario_source(name).unwrap();
        // Faults may start after the shortened horizon; they change no declaration.
        source.remove("faults");
        if let Some(toml::Value::Table(run)) = source.get_mut("run") {
            run.insert("warmup_s".into(), toml::Value::Float(0.5));
        }
        let scenario = Scenario::resolve(source, &overrides).unwrap();
        let point = &scenario.grid_points().unwrap()[0];
        let mut histograms: Vec<LatencyHistogram> =
            point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
        let output = point.model.run_replica(&point.run, 1, 0, &mut histograms);
        assert_eq!(output.metrics.len(), point.model.metrics().len(), "{name}: metrics");
        assert_eq!(output.series.len(), point.model.series().len(), "{name}: series");
        let names: std::collections::HashSet<&str> = point.model.metrics().iter().map(|m| m.name).collect();
        assert_eq!(names.len(), point.model.metrics().len(), "{name}: duplicate metric names");
    }
}

/// A minimal `mmc` scenario, with `extra` appended (more sections, a grid, claims).
fn mmc(extra: &str) -> String {
    format!(
        "name = \"t\"\nmodel = \"mmc\"\n[run]\nhorizon_s = 100.0\nreplicas = 2\n\
         [queue]\narrival_rate_per_s = 1.0\nservice_rate_per_s = 1.5\nservers = 1\n{extra}"
    )
}

/// Resolves `text` with `--set` and `--grid` arguments as the command line would
/// parse them; `Ok` is each grid point as `index: path = value, …`.
fn resolve(text: &str, sets: &[&str], grids: &[&str]) -> stampede_scenario::Result<Vec<String>> {
    use stampede_scenario::scenario::overrides::{parse_grid, parse_set};
    let source = stampede_scenario::base::typing::parse_text(text, "test scenario")?;
    let mut overrides = Overrides::default();
    for set in sets {
        overrides.sets.push(parse_set(set)?);
    }
    for grid in grids {
        overrides.grids.push(parse_grid(grid)?);
    }
    let scenario = Scenario::resolve(source, &overrides)?;
    Ok(scenario
        .grid_points()?
        .iter()
        .map(|p| {
            let params: Vec<String> = p
                .params
                .iter()
                .map(|(k, v)| format!("{k} = {}", stampede_scenario::base::typing::describe(v)))
                .collect();
            format!("{}: {}", p.index, params.join(", "))
        })
        .collect())
}

/// `expected` is either the grid points (`Ok`) or a fragment of the error message
/// with its exit code (`Err`).
fn check(text: &str, sets: &[&str], grids: &[&str], expected: std::result::Result<&[&str], (&str, i32)>) {
    match (resolve(text, sets, grids), expected) {
        (Ok(points), Ok(want)) => assert_eq!(points, want, "scenario:\n{text}"),
        (Err(error), Err((fragment, code))) => {
            assert!(error.to_string().contains(fragment), "{error}\n  should contain: {fragment}");
            assert_eq!(error.exit_code(), code, "{error}");
        }
        (got, want) => panic!("scenario:\n{text}\ngot {got:?}, expected {want:?}"),
    }
}

#[test]
fn grids_expand_row_major_and_overrides_apply_in_order() {
    // No grid: one point with no parameters.
    check(&mmc(""), &[], &[], Ok(&["0: "]));
    // The first axis varies slowest.
    check(
        &mmc("[grid]\n\"queue.servers\" = [1, 2]\n\"run.horizon_s\" = [50.0, 60.0]\n"),
        &[],
        &[],
        Ok(&[
            "0: queue.servers = 1, run.horizon_s = 50.0",
            "1: queue.servers = 1, run.horizon_s = 60.0",
            "2: queue.servers = 2, run.horizon_s = 50.0",
            "3: queue.servers = 2, run.horizon_s = 60.0",
        ]),
    );
    // --grid replaces the file's axis of the same path and adds new ones after it.
    check(
        &mmc("[grid]\n\"queue.servers\" = [1, 2]\n"),
        &[],
        &["queue.servers=3", "queue.service_rate_per_s=2.0,3"],
        Ok(&[
            "0: queue.servers = 3, queue.service_rate_per_s = 2.0",
            "1: queue.servers = 3, queue.service_rate_per_s = 3",
        ]),
    );
    // Nested grid tables name the same paths as quoted dotted keys.
    check(&mmc("[grid.queue]\nservers = [2, 3]\n"), &[], &[], Ok(&["0: queue.servers = 2", "1: queue.servers = 3"]));
    // A case patches several sections and is named by its label.
    check(
        &mmc("[[grid.case]]\nlabel = \"slow\"\nqueue = { service_rate_per_s = 1.1 }\nrun = { horizon_s = 10.0 }\n"),
        &[],
        &[],
        Ok(&["0: case = \"slow\""]),
    );
    // --set applies before validation: an overloaded base made stable.
    check(&mmc(""), &["queue.servers=2", "queue.arrival_rate_per_s=2.5"], &[], Ok(&["0: "]));
}

/// `[grid] points` lists the combinations a grid takes (what `optimize` writes):
/// in its order, each an index per axis; `to_toml` keeps it, so the manifest's
/// scenario resolves to the same points; a combination that does not fit is refused.
#[test]
fn a_grid_may_list_its_points() {
    let grid = "[grid]\n\"queue.servers\" = [1, 2, 3]\n\"run.horizon_s\" = [50.0, 60.0]\npoints = [[2, 0], [0, 1]]\n";
    check(
        &mmc(grid),
        &[],
        &[],
        Ok(&["0: queue.servers = 3, run.horizon_s = 50.0", "1: queue.servers = 1, run.horizon_s = 60.0"]),
    );
    let source = stampede_scenario::base::typing::parse_text(&mmc(grid), "t").unwrap();
    let scenario = Scenario::resolve(source, &Overrides::default()).unwrap();
    assert_eq!(scenario.grid_combinations(), Some(&[vec![2, 0], vec![0, 1]][..]));
    let again = stampede_scenario::base::typing::parse_text(&scenario.to_toml(), "t").unwrap();
    assert_eq!(
        Scenario::resolve(again, &Overrides::default()).unwrap().grid_combinations(),
        scenario.grid_combinations()
    );
    for (points, says) in
        [("[[3, 0]]", "grid.points[0] = [3, 0]"), ("[[0]]", "one index per axis"), ("[\"a\"]", "grid.points")]
    {
        let text = mmc(&format!(
            "[grid]\n\"queue.servers\" = [1, 2, 3]\n\"run.horizon_s\" = [50.0, 60.0]\npoints = {points}\n"
        ));
        check(&text, &[], &[], Err((says, 2)));
    }
}

/// A grid whose list of tables (`[[grid.case]]`) comes before a plain axis keeps its
/// axis order through `to_toml` (a TOML writer puts lists of tables last: the
/// manifest of `optimize --across faults` over such a file had its points listed
/// against (case, faults) and read back against (faults, case), and the report
/// labelled point 1 "patient · db errors" where the summary had eager · db latency).
#[test]
fn a_grid_of_cases_before_a_plain_axis_keeps_its_order_through_to_toml() {
    let cases = "[[grid.case]]\nlabel = \"a\"\nqueue = { servers = 3 }\n[[grid.case]]\nlabel = \"b\"\nqueue = { servers = 4 }\n";
    for points in ["", "points = [[1, 0], [0, 1]]\n"] {
        let text = mmc(&format!("{cases}[grid]\n\"run.horizon_s\" = [50.0, 60.0]\n{points}"));
        let source = stampede_scenario::base::typing::parse_text(&text, "t").unwrap();
        let scenario = Scenario::resolve(source, &Overrides::default()).unwrap();
        let again = stampede_scenario::base::typing::parse_text(&scenario.to_toml(), "t")
            .unwrap_or_else(|e| panic!("{e}\n{}", scenario.to_toml()));
        let again = Scenario::resolve(again, &Overrides::default()).unwrap();
        let paths = |s: &Scenario| s.grid.iter().map(|a| a.path.clone()).collect::<Vec<_>>();
        assert_eq!(paths(&again), ["case", "run.horizon_s"], "{}", scenario.to_toml());
        assert_eq!(again.grid_combinations(), scenario.grid_combinations());
        for index in 0..scenario.point_count() {
            let (a, b) = (scenario.grid_point(index).unwrap(), again.grid_point(index).unwrap());
            assert_eq!(a.params, b.params, "grid point {index}");
        }
    }
}

#[test]
fn bad_scenarios_name_the_field_the_value_and_what_is_allowed() {
    let bad = |text: &str, sets: &[&str], grids: &[&str], fragment: &str| check(text, sets, grids, Err((fragment, 2)));
    bad(
        &mmc("").replace("mmc\"", "mmm\""),
        &[],
        &[],
        "model = \"mmm\": unknown model; did you mean mmc? The models:\n  mmc         M/M/c(/K): Poisson arrivals",
    );
    bad(&mmc("").replace("mmc\"", "warp\""), &[], &[], "unknown model. The models:\n  mmc   ");
    bad(&mmc("[queues]\nx = 1\n"), &[], &[], "scenario field queues: unknown field for model \"mmc\"; expected one of");
    bad(&mmc(""), &["queue.servers=0"], &[], "queue.servers = 0: must be at least 1");
    bad(&mmc(""), &["queue.arrival_rate_per_s=2.0"], &[], "ρ = λ/(c·μ) = 1.333 is not below 1");
    bad(&mmc(""), &["queue.servers=\"two\""], &[], "scenario field queue.servers: invalid type: string \"two\"");
    bad(&mmc(""), &["queue.extra=1"], &[], "unknown field `extra`, expected one of");
    bad(&mmc(""), &["run.replicas=0"], &[], "run.replicas = 0: must be at least 1");
    bad(&mmc(""), &["run.warmup_s=200.0"], &[], "run.warmup_s = 200: must be at least 0 and below run.horizon_s");
    bad(&mmc(""), &[], &["run.seed=1,2"], "grid axis run.seed: cannot be varied");
    bad(&mmc(""), &["grid.x=1"], &[], "--set grid.x: grid axes are changed with --grid, not --set");
    bad(&mmc("[grid]\n\"queue.servers\" = []\n"), &[], &[], "a grid axis needs at least one value");
    // A bad value at one grid point names the point.
    bad(
        &mmc(""),
        &[],
        &["queue.servers=1,0"],
        "grid point 1 (queue.servers = 0): queue.servers = 0: must be at least 1",
    );
    bad(&mmc("[[grid.case]]\nqueue = { servers = 2 }\n"), &[], &[], "every case needs label");
    // Claims name a point of the file's grid: by index within it, or by a case and
    // axis values it has, once.
    let cases = "[[grid.case]]\nlabel = \"two\"\nqueue = { servers = 2 }\n[[grid.case]]\nlabel = \"three\"\nqueue = { servers = 3 }\n";
    let claim = |selector: &str| {
        mmc(&format!("{cases}[grid]\n\"queue.service_rate_per_s\" = [1.0, 2.0]\n[[verify]]\n{selector}\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nat_most = 5.0\n"))
    };
    bad(&claim("grid_point = 4"), &[], &[], "verify[0].grid_point = 4: the scenario's grid has 4 point(s) (0 to 3)");
    bad(&claim("case = \"four\""), &[], &[], "verify[0].case = \"four\": no such case; the cases: \"two\", \"three\"");
    bad(&claim("case = \"two\""), &[], &[], "verify[0]: case = \"two\" is 2 points of the scenario's grid; name the other axes' values too: point = { \"queue.service_rate_per_s\" = … }");
    bad(
        &claim("case = \"two\"\ngrid_point = 1"),
        &[],
        &[],
        "verify[0]: grid_point = 1 and case/point name the point twice",
    );
    bad(&claim("point = { \"queue.servers\" = 2 }"), &[], &[], "verify[0].point: \"queue.servers\" is not an axis of the scenario's grid; its axes: case, queue.service_rate_per_s");
    check(
        &claim("case = \"three\"\npoint = { \"queue.service_rate_per_s\" = 2 }"),
        &[],
        &[],
        Ok(&[
            "0: case = \"two\", queue.service_rate_per_s = 1.0",
            "1: case = \"two\", queue.service_rate_per_s = 2.0",
            "2: case = \"three\", queue.service_rate_per_s = 1.0",
            "3: case = \"three\", queue.service_rate_per_s = 2.0",
        ]),
    );
    bad(&mmc("").replace("name = \"t\"", "name = \"a/b\""), &[], &[], "name = \"a/b\": must be letters, digits");
    // Names parsed through the engine's enums list the names allowed.
    let mg1 = "name = \"g\"\nmodel = \"mg1\"\n[run]\nhorizon_s = 10.0\nreplicas = 2\n\
               [queue]\narrival_rate_per_s = 0.5\nservice = \"gamma\"\nservice_mean_s = 1.0\n";
    bad(mg1, &[], &[], "\"gamma\" is not a service shape; allowed: deterministic, exponential, lognormal, hyperexponential, or a distribution value");
    // A distribution value names its field, the value and what is allowed.
    let with = |service: &str| {
        format!("name = \"g\"\nmodel = \"mg1\"\n[run]\nhorizon_s = 10.0\nreplicas = 2\n[queue]\narrival_rate_per_s = 0.5\nservice = {service}\n")
    };
    bad(
        &with("{ dist = \"gama\", mean_s = 1.0 }"),
        &[],
        &[],
        "queue.service.dist = \"gama\": not a distribution; allowed: constant, exponential",
    );
    bad(
        &with("{ dist = \"gamma\", mean_s = 1.0 }"),
        &[],
        &[],
        "queue.service: dist = \"gamma\" takes either mean_s and scv, or shape and scale_s",
    );
    bad(
        &with("{ dist = \"weibull\", shape = 2.0, scale_s = 1.0, column = \"x\" }"),
        &[],
        &[],
        "queue.service.column: dist = \"weibull\" does not take column; it takes shape, scale_s, scale, shift_s",
    );
    bad(
        &with("{ dist = \"exponential\", mean_s = -1.0 }"),
        &[],
        &[],
        "queue.service.mean_s = -1: a duration must be from 0 to 1.8e10 seconds",
    );
    bad(
        &with("{ dist = \"exponential\", mean_s = 0.5, scale = 0.0 }"),
        &[],
        &[],
        "queue.service.scale = 0: must be a positive factor",
    );
    bad(
        &with("{ dist = \"quantiles\", p50_s = 0.2, p90_s = 0.1, max_s = 1.0 }"),
        &[],
        &[],
        "queue.service.p90_s = 0.1: below p50_s = 0.2; quantiles must not decrease",
    );
    bad(&with("{ dist = \"quantiles\", p50_s = 0.2 }"), &[], &[], "needs max_s (where the distribution ends), or fit");
    bad(
        &with("{ dist = \"empirical\", file = \"/nonexistent/lat.csv\" }"),
        &[],
        &[],
        "/nonexistent/lat.csv: cannot read it",
    );
    bad(
        &(with("{ dist = \"exponential\", mean_s = 0.5 }") + "service_mean_s = 1.0\n"),
        &[],
        &[],
        "queue.service_mean_s = 1: a distribution value in queue.service carries its own parameters",
    );
    bad(mg1, &["queue.service=\"deterministic\"", "queue.service_scv=2.0"], &[], "a deterministic service fixes its");
    bad(mg1, &["queue.service=\"hyperexponential\"", "queue.service_scv=0.5"], &[], "needs a number of at least 1");
}

#[test]
fn claims_are_checked_against_the_grid_and_the_metrics() {
    let claim = |body: &str| mmc(&format!("[[verify]]\n{body}\n"));
    let bad = |text: &str, fragment: &str| check(text, &[], &[], Err((fragment, 2)));
    check(
        &claim("grid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nat_most = 5.0"),
        &[],
        &[],
        Ok(&["0: "]),
    );
    let claim_with = |statistic: &str, rest: &str| {
        claim(&format!("grid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"{statistic}\"\n{rest}"))
    };
    bad(&claim_with("mean", "at_least = 5.0\nat_most = 1.0"), "verify[0]: at_least = 5 is above at_most = 1");
    bad(&claim_with("mean", "at_most = nan"), "verify[0].at_most = nan: a bound must be a number");
    bad(&claim_with("fraction_ci_lo", "at_least = 0.9"), "a fraction of replicas needs replica_at_least");
    bad(&claim_with("p95", "replica_at_most = 1.0\nat_most = 2.0"), "replica_at_most only apply to statistic");
    bad(
        &claim_with("fraction", "replica_at_least = 3.0\nreplica_at_most = 1.0\nat_least = 0.5"),
        "replica_at_least = 3 is above",
    );
    bad(
        &claim("grid_point = 0\nmetric = \"wait_s\"\nstatistic = \"mean\"\nat_most = 5.0"),
        "verify[0].metric = \"wait_s\": not a metric of model mmc; its metrics: wait_mean_s",
    );
    bad(
        &claim("grid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"mean\""),
        "verify[0]: needs at least one of at_least, at_most, above, below",
    );
    bad(
        &claim("grid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nabove = { grid_point = 0, statistic = \"mean\", factor = -1.0 }"),
        "verify[0].above.factor = -1: must be a positive number",
    );
    bad(
        &claim("grid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"median\"\nat_most = 1.0"),
        "unknown variant `median`",
    );
}

/// A claim without `grid_point` is about the run's only grid point (and `show` writes
/// it as 0); with several points it is refused, saying which there are.
#[test]
fn a_claim_may_leave_out_the_grid_point_of_a_one_point_run() {
    let unnamed = "[[verify]]\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nat_most = 5.0\n";
    let resolve = |text: &str| {
        Scenario::resolve(stampede_scenario::base::typing::parse_text(text, "t").unwrap(), &Overrides::default())
    };
    let one = resolve(&mmc(unnamed)).unwrap();
    assert_eq!(one.verify[0].grid_point, 0);
    assert!(one.to_toml().contains("grid_point = 0"), "{}", one.to_toml());
    assert_eq!(one.claims_to_check().unwrap().0.len(), 1);
    let two = resolve(&mmc(&format!("[grid]\n\"queue.servers\" = [1, 2]\n{unnamed}"))).unwrap_err();
    assert_eq!(
        two.to_string(),
        "verify[0]: no grid_point, and this run's grid has 2 points (0 to 1): say which one the claim is about \
         (grid_point = 0, …)"
    );
}

/// `run` ignores claims it does not check; `verify` skips claims whose grid point a
/// narrowed grid lost, and refuses intervals with one replica before running.
#[test]
fn verify_skips_claims_a_narrowed_grid_lost_and_refuses_intervals_of_one_replica() {
    let text = mmc("[grid]\n\"queue.servers\" = [1, 2]\n\
         [[verify]]\ngrid_point = 1\nmetric = \"wait_mean_s\"\nstatistic = \"ci_hi\"\nat_most = 5.0\n\
         [[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nat_most = 5.0\n");
    let resolve = |sets: &[&str], grids: &[&str]| {
        let overrides = Overrides {
            sets: sets.iter().map(|s| stampede_scenario::scenario::overrides::parse_set(s).unwrap()).collect(),
            grids: grids.iter().map(|g| stampede_scenario::scenario::overrides::parse_grid(g).unwrap()).collect(),
            cases: vec![],
        };
        Scenario::resolve(stampede_scenario::base::typing::parse_text(&text, "t").unwrap(), &overrides)
    };
    let full = resolve(&[], &[]).unwrap();
    let (checked, skipped) = full.claims_to_check().unwrap();
    assert_eq!((checked.len(), skipped.len()), (2, 0));
    // Narrowed to servers = 2: the claim about grid point 1 (servers = 2) follows it to
    // the run's point 0; the claim about servers = 1 is skipped, not applied to 2.
    let narrowed = resolve(&[], &["queue.servers=2"]).expect("run accepts a narrowed grid");
    let (checked, skipped) = narrowed.claims_to_check().unwrap();
    assert_eq!(checked.iter().map(|(i, c)| (*i, c.grid_point)).collect::<Vec<_>>(), [(0, 0)]);
    assert_eq!(skipped[0].index, 1);
    assert_eq!(skipped[0].why, "grid point 0 of the scenario (queue.servers = 1) is not in this run's grid");
    // --set on the axis narrows it the same way.
    let set = resolve(&["queue.servers=2"], &[]).unwrap();
    assert_eq!(set.claims_to_check().unwrap().0.iter().map(|(i, c)| (*i, c.grid_point)).collect::<Vec<_>>(), [(0, 0)]);
    // An axis the command line adds makes the file's point two of the run's: skipped.
    let crossed = resolve(&[], &["queue.arrival_rate_per_s=1.0,1.2"]).unwrap();
    let (checked, skipped) = crossed.claims_to_check().unwrap();
    assert!(checked.is_empty() && skipped.len() == 2, "{skipped:?}");
    assert!(skipped[0].why.contains("is 2 points of this run's grid"), "{}", skipped[0].why);
    let one = resolve(&["run.replicas=1"], &[]).unwrap();
    let error = one.claims_to_check().unwrap_err();
    assert!(error.to_string().contains("verify[0].statistic = \"ci_hi\": a 95% interval needs at least 2"), "{error}");
}

/// `verify::check` passes and fails claims on the statistics, fixed or relative.
#[test]
fn verify_checks_bounds_on_means_and_interval_ends() {
    use crate::report::{PointReport, RunReport};
    use crate::stats::Summary;
    let text = mmc(
        "[grid]\n\"queue.servers\" = [1, 2]\n\
         [[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"ci_lo\"\nat_least = 1.0\n\
         [[verify]]\ngrid_point = 1\nmetric = \"wait_mean_s\"\nstatistic = \"ci_hi\"\nbelow = { grid_point = 0, statistic = \"ci_lo\", factor = 0.5 }\n\
         [[verify]]\ngrid_point = 1\nmetric = \"wait_mean_s\"\nstatistic = \"mean\"\nat_least = 0.5\nat_most = 0.6\n",
    );
    let scenario =
        Scenario::resolve(stampede_scenario::base::typing::parse_text(&text, "t").unwrap(), &Overrides::default())
            .unwrap();
    let metrics = scenario.model.metrics().len();
    let wait = |index: u32, mean: f64, half: f64| {
        let mut summaries = vec![Summary { mean: 0.0, sd: 0.0, ci_lo: 0.0, ci_hi: 0.0 }; metrics];
        summaries[0] = Summary { mean, sd: 1.0, ci_lo: mean - half, ci_hi: mean + half };
        PointReport {
            index,
            params: Vec::new(),
            summaries,
            latencies: Vec::new(),
            replica_values: Default::default(),
            latency_claims: Default::default(),
            compute_s: 0.0,
            covered: vec![10; metrics],
            replicas: 10,
        }
    };
    let report = |first: f64, second: f64| RunReport {
        points: vec![wait(0, first, 0.2), wait(1, second, 0.1)],
        scenario: scenario.clone(),
        output_dir: "out".into(),
        wall_time_s: 0.0,
        threads: 1,
    };
    let passed = |r: &RunReport| crate::verify::check(r).iter().map(|c| c.passed).collect::<Vec<_>>();
    // Point 0: ci_lo 1.4 ≥ 1; point 1: ci_hi 0.65 < 0.5 × 1.4; mean 0.55 within [0.5, 0.6].
    assert_eq!(passed(&report(1.6, 0.55)), [true, true, true]);
    // Point 0's ci_lo 0.9 < 1; 0.5 × 0.9 = 0.45 < point 1's ci_hi 0.65; 0.55 still fine.
    assert_eq!(passed(&report(1.1, 0.55)), [false, false, true]);
    // A NaN statistic never passes.
    assert_eq!(passed(&report(1.6, f64::NAN)), [true, false, false]);
    // A FAIL line is a verdict: what was expected, what was measured, with its interval.
    let failing = report(1.1, 0.55);
    let verdicts = crate::verify::verdicts::Verdicts::new(&failing, Vec::new());
    let rendered = verdicts.render();
    let first = format!(
        "FAIL  {} #0 wait_mean_s: expected ci_lo ≥ 1, got 0.9000 (mean 1.1000, 95% [0.9000, 1.3000])",
        failing.scenario.name
    );
    assert!(rendered.lines().next() == Some(first.as_str()), "{rendered}");
    assert!(rendered.contains("wait_mean_s: expected ci_hi < 0.5 × #0 ci_lo (0.4500), got 0.6500"), "{rendered}");
    assert!(rendered.ends_with("1 passed, 2 failed\n"), "{rendered}");
    // The JSON document says the same, with the run's identity and the counts.
    let json = verdicts.to_json();
    assert_eq!((json["verdict"].as_str(), json["counts"]["failed"].as_u64()), (Some("fail"), Some(2)));
    assert_eq!(json["checks"][0]["expected"], "ci_lo ≥ 1");
    assert_eq!(json["checks"][0]["verdict"], "fail");
    assert_eq!(json["checks"][2]["verdict"], "pass");
    // On GitHub Actions each failed claim is one `::error` line, and only those.
    let annotations = verdicts.github_annotations();
    assert_eq!(annotations.lines().count(), 2, "{annotations}");
    assert!(annotations.lines().all(|l| l.starts_with("::error title=stampede verify ")), "{annotations}");
}

/// Quantiles and fractions across replicas read every replica's value; a replica
/// without a value (NaN) ranks last and never meets a bound.
#[test]
fn claims_over_replicas_read_every_replica() {
    use crate::report::{PointReport, RunReport};
    use crate::stats::Summary;
    let text = mmc("[[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"p50\"\nat_most = 1.2\n\
                    [[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"max\"\nat_most = 100.0\n\
                    [[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"fraction\"\nreplica_at_most = 1.5\nat_least = 0.6\n\
                    [[verify]]\ngrid_point = 0\nmetric = \"wait_mean_s\"\nstatistic = \"fraction_ci_lo\"\nreplica_at_most = 1.5\nat_least = 0.2\n");
    let scenario =
        Scenario::resolve(stampede_scenario::base::typing::parse_text(&text, "t").unwrap(), &Overrides::default())
            .unwrap();
    assert_eq!(scenario.replica_metrics(), [(0, 0)], "only the metric the claims read is kept per replica");
    let summaries = vec![Summary { mean: 1.0, sd: 0.5, ci_lo: 0.5, ci_hi: 1.5 }; scenario.model.metrics().len()];
    let replica_values = [(0, vec![0.5, 1.0, 1.2, 2.0, f64::NAN])].into_iter().collect();
    let point = PointReport {
        index: 0,
        params: Vec::new(),
        covered: vec![10; summaries.len()],
        replicas: 10,
        summaries,
        latencies: Vec::new(),
        replica_values,
        latency_claims: Default::default(),
        compute_s: 0.0,
    };
    let report = RunReport { scenario, points: vec![point], output_dir: "out".into(), wall_time_s: 0.0, threads: 1 };
    let checks = crate::verify::check(&report);
    let values: Vec<f64> = checks.iter().map(|c| c.value).collect();
    assert_eq!(values[0], 1.2, "p50 of five values is the third");
    assert!(values[1].is_nan(), "the replica without a value is the maximum, so max is undefined");
    assert_eq!(values[2], 0.6, "three of five replicas are within 1.5");
    let (lo, _) = crate::verify::wilson(3, 5);
    assert_eq!(values[3], lo);
    assert_eq!(checks.iter().map(|c| c.passed).collect::<Vec<_>>(), [true, false, true, true]);
}

/// `--grid` takes a TOML array (tables, lists); `--set` of a table merges into the
/// section; `--set` on an axis's path replaces the axis; only grid points are validated.
#[test]
fn overrides_merge_tables_replace_axes_and_validate_only_the_points() {
    // A table-valued axis from the command line: commas inside the tables are not separators.
    check(
        &mmc(""),
        &[],
        &["queue=[{servers = 2, arrival_rate_per_s = 2.5}, {servers = 3}]"],
        Ok(&["0: queue = { servers = 2, arrival_rate_per_s = 2.5 }", "1: queue = { servers = 3 }"]),
    );
    check(&mmc(""), &[], &["queue.servers=[2, 3]"], Ok(&["0: queue.servers = 2", "1: queue.servers = 3"]));
    check(&mmc(""), &[], &["queue.servers=[]"], Err(("the list of values is empty", 2)));
    check(&mmc(""), &[], &["queue.servers=[2, 3"], Err(("starts with '[' but is not a TOML array", 2)));
    // --set of a table merges: the other fields of [queue] stay.
    check(&mmc(""), &["queue={servers = 2, arrival_rate_per_s = 2.5}"], &[], Ok(&["0: "]));
    // --set on an axis's path replaces the axis with the one value.
    check(&mmc("[grid]\n\"queue.servers\" = [1, 2, 3]\n"), &["queue.servers=2"], &[], Ok(&["0: queue.servers = 2"]));
    // The base is overloaded (ρ = 2.5/1.5 with one server), every point is not: accepted.
    check(
        &mmc(""),
        &["queue.arrival_rate_per_s=2.5"],
        &["queue.servers=2,3"],
        Ok(&["0: queue.servers = 2", "1: queue.servers = 3"]),
    );
    // Without a grid, the base is the one point and is validated.
    check(&mmc(""), &["queue.arrival_rate_per_s=2.5"], &[], Err(("is not below 1", 2)));
}

/// The gateway's backoff is chosen per class, by name, through the fixture's class
/// overrides; a coordinator outage needs no tier.
#[test]
fn gateway_backoff_is_per_class_and_a_coordinator_outage_has_no_tier() {
    use stampede_engine::models::gateway::IncidentKind;
    // The shipped fixture lists guard first and answer third.
    const GUARD: usize = 0;
    const ANSWER: usize = 2;
    use stampede_engine::policy::backoff::Backoff;
    let text = "name = \"g\"\nmodel = \"gateway\"\n[run]\nhorizon_s = 10.0\nreplicas = 2\n\
                [workload]\nturns_per_s = 1.0\n[classes.answer]\nbackoff = \"equal_jitter\"\n\
                [[incidents]]\nkind = \"coordinator_outage\"\nstart_s = 1.0\nduration_s = 2.0\n";
    let scenario =
        Scenario::resolve(stampede_scenario::base::typing::parse_text(text, "t").unwrap(), &Overrides::default())
            .unwrap();
    let point = scenario.grid_point(0).unwrap();
    let params = point.model.downcast::<stampede_scenario::models::gateway::Gateway>().unwrap().params(&point.run);
    assert!(
        matches!(params.classes[ANSWER].backoff, Backoff::EqualJitter { .. }),
        "{:?}",
        params.classes[ANSWER].backoff
    );
    assert!(matches!(params.classes[GUARD].backoff, Backoff::FullJitter { .. }), "the default");
    assert_eq!(params.incidents[0].kind, IncidentKind::CoordinatorOutage);
    let bad = text.replace("equal_jitter", "wobbly");
    check(
        &bad,
        &[],
        &[],
        Err(("unknown variant `wobbly`, expected one of `constant`, `exponential`, `full_jitter`", 2)),
    );
    let tiered = text.replace("kind = \"coordinator_outage\"", "tier = \"sonnet\"\nkind = \"coordinator_outage\"");
    check(&tiered, &[], &[], Err(("a coordinator_outage strikes the quota coordinator, not a tier", 2)));
}

/// Warnings are gathered once per scenario over its grid points: one that holds for
/// some points says which, one that holds for every point says none.
#[test]
fn warnings_name_the_grid_points_they_hold_for() {
    let resolve = |name: &str| Scenario::resolve(load_scenario_source(name).unwrap(), &Overrides::default()).unwrap();
    let breaker = resolve("llm-breaker");
    let haiku: Vec<&String> = breaker.warnings().iter().filter(|w| w.contains("tier haiku")).collect();
    assert_eq!(haiku.len(), 1, "{:?}", breaker.warnings());
    assert!(haiku[0].starts_with("grid points 0, 1: tier haiku: 60 turns/s ask its ITPM meter"), "{}", haiku[0]);
    let naive = resolve("llm-naive");
    assert_eq!(naive.warnings().len(), 1);
    assert!(naive.warnings()[0].starts_with("tier opus: 20 turns/s"), "{:?}", naive.warnings());
    assert!(resolve("mmc").warnings().is_empty());
}

/// Every table whose fields the docs list with defaults takes those defaults when
/// written with one field — every model: the table replaces the built-in's whole (no
/// merge hides a missing field), the scenario resolves, and the resolved TOML (what
/// `stampede show` prints) holds a documented default of a field left out.
#[test]
fn a_table_written_with_one_field_takes_the_documented_defaults() {
    // (built-in, path to the table, its one field, a default the resolved table shows)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, (&'a str, &'a str));
    let cases: &[Case] = &[
        ("graph-three-tier", &["services", "cache", "queue"], "order = \"lifo\"", ("capacity", "1000")),
        ("graph-three-tier", &["services", "cache", "shedder"], "shed_low_at = 0.5", ("shed_normal_at", "0.9")),
        ("graph-three-tier", &["services", "cache", "rate_limit"], "per_s = 5000.0", ("burst", "1")),
        ("graph-three-tier", &["edges", "api->cache", "retry"], "max_attempts = 3", ("backoff_base_s", "0.01")),
        ("graph-three-tier", &["edges", "api->cache", "breaker"], "enabled = true", ("minimum_calls", "20")),
        ("graph-three-tier", &["edges", "api->cache", "hedge"], "after_s = 0.01", ("min_samples", "20")),
        ("graph-three-tier", &["series"], "bucket_s = 0.5", ("recovery_hold_s", "0.2")),
        ("baltor", &["retry"], "policy = \"backoff\"", ("max_attempts", "3")),
        ("baltor", &["retry", "breaker"], "enabled = true", ("minimum_calls", "20")),
        ("baltor", &["series"], "bucket_s = 0.5", ("recovery_hold_s", "0.2")),
        ("dependency-slowdown", &["protection"], "policy = \"shedder\"", ("breaker_minimum_calls", "20")),
        ("dependency-slowdown", &["series"], "recovery_hold_s = 0.5", ("bucket_s", "0.01")),
        // The gateway's fixture overrides are shown as written (the fixture resolves them):
        // that they resolve is the check; fixture.rs tests each field's default.
        ("llm-retries", &["classes", "answer", "timeouts_s"], "connect = 1.0", ("", "")),
        ("llm-retries", &["tiers", "sonnet"], "rpm = 100", ("", "")),
    ];
    for &(builtin, path, field, (default, value)) in cases {
        let mut source = load_scenario_source(builtin).unwrap();
        source.remove("grid");
        source.remove("verify");
        let (last, parents) = path.split_last().unwrap();
        let mut table = &mut source;
        for part in parents {
            table =
                table.entry(part.to_string()).or_insert(toml::Value::Table(toml::Table::new())).as_table_mut().unwrap();
        }
        table.insert(last.to_string(), toml::Value::Table(field.parse().unwrap()));
        let what = format!("{builtin}: {} = {{ {field} }}", path.join("."));
        let scenario = Scenario::resolve(source, &Overrides::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
        if default.is_empty() {
            continue;
        }
        let shown: toml::Table = scenario.to_toml().parse().unwrap();
        let mut resolved = &shown;
        for part in path {
            resolved = resolved.get(*part).and_then(toml::Value::as_table).unwrap_or_else(|| panic!("{what}: {shown}"));
        }
        let got = resolved.get(default).map(|v| v.to_string()).unwrap_or_default();
        assert!(
            got == value || got.parse::<f64>().ok() == value.parse::<f64>().ok(),
            "{what}: {default} = {got:?}, documented {value}"
        );
    }
}

/// Each field `stampede fit` says to paste a distribution value into takes one, in a
/// built-in of that model (the graph's written for one endpoint of it).
#[test]
fn the_fields_fit_names_take_a_distribution_value() {
    use stampede_scenario::inputs::fit::DISTRIBUTION_FIELDS;
    let value = stampede_scenario::scenario::overrides::parse_cli_value(
        "{ dist = \"lognormal\", median_s = 0.002, sigma = 0.6 }",
    );
    let builtins = [
        ("mg1", "mg1"),
        ("cluster", "baltor"),
        ("dependency", "dependency-slowdown"),
        ("graph", "graph-three-tier"),
        ("gateway", "llm-retries"),
    ];
    for (model, field) in DISTRIBUTION_FIELDS {
        let builtin = builtins.iter().find(|(m, _)| *m == model).expect("a built-in per model").1;
        let path = match model {
            "graph" => "services.cache.endpoints.get.work".to_string(),
            "gateway" => field.replace("NAME", "sonnet"),
            _ => field.split(' ').next().unwrap().to_string(),
        };
        let overrides = Overrides { sets: vec![(path.clone(), value.clone())], grids: vec![], cases: vec![] };
        let mut source = load_scenario_source(builtin).unwrap();
        // The value carries its own parameters: a shape's scalar beside it is refused.
        if let Some(toml::Value::Table(shards)) = source.get_mut("shards") {
            shards.remove("service_s");
            shards.remove("service_sigma");
        }
        if let Some(toml::Value::Table(dependency)) = source.get_mut("dependency") {
            dependency.remove("healthy_latency_s");
        }
        let scenario = Scenario::resolve(source, &overrides).unwrap_or_else(|e| panic!("{model}: {path}: {e}"));
        assert_eq!(scenario.model.name(), model);
        scenario.grid_points().unwrap_or_else(|e| panic!("{model}: {path}: {e}"));
    }
}

/// `cancellable_scope`: a set flag stops every grid run inside it on this thread; the
/// scope ends with the call (a later run is not cancelled), and a clear flag changes
/// nothing.
#[test]
fn a_cancellable_scope_stops_the_grids_inside_it() {
    use crate::runner::{cancellable_scope, run_grid, Sinks};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let scenario = Scenario::resolve(load_scenario_source("mmc").unwrap(), &Overrides::default()).unwrap();
    let plan = crate::plan::Plan::new(scenario.point_count(), scenario.run.replicas, None);
    let run = || {
        let (mut records, mut points) = (0usize, 0usize);
        let mut count_records = |r: &[crate::runner::ReplicaRecord]| {
            records += r.len();
            Ok(())
        };
        let mut count_points = |_: &stampede_scenario::resolved::GridPoint, _| {
            points += 1;
            Ok(())
        };
        let outcome =
            run_grid(&scenario, &plan, 2, &|| {}, Sinks { records: &mut count_records, point: &mut count_points });
        (outcome, records, points)
    };
    let (outcome, records, points) = cancellable_scope(Arc::new(AtomicBool::new(true)), run);
    let error = outcome.expect_err("cancelled");
    assert_eq!(error.message, "the run was cancelled");
    assert_eq!((records, points), (0, 0), "nothing reached the sinks");
    let (outcome, records, points) = run();
    outcome.expect("the scope is over");
    assert_eq!((records, points), (scenario.run.replicas as usize * 3, 3));
    let (outcome, records, _) = cancellable_scope(Arc::new(AtomicBool::new(false)), run);
    outcome.expect("a clear flag changes nothing");
    assert_eq!(records, scenario.run.replicas as usize * 3);
}
