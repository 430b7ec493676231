//! `stampede map`: the stability map finds a known sharp boundary within its
//! tolerance, draws retry-storm's (the docs' picture), says when a level is never
//! crossed, is the same on any thread count, and refuses bad input writing nothing.

use std::path::Path;

use super::common::{files_below, stampede, stderr, stdout};
use serde_json::Value;

fn map_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("map.json")).unwrap()).unwrap()
}

/// Even arrivals, constant work: a D/D/1 queue. Below 1/work requests per second no
/// request ever waits; above it the queue grows by (λ − μ) a second, so over a run of
/// T seconds from empty its time-averaged depth is (λ − μ)·T/2 — a depth of L is
/// crossed at exactly λ = μ + 2L/T.
const DD1: &str = r#"name = "dd1"
description = "even arrivals, constant work: stable exactly below 1/work requests per second"
model = "graph"

[run]
horizon_s = 100.0
replicas = 3
seed = 1

[services.api]
workers = 1
queue = { capacity = 1000000 }

[services.api.endpoints.get]
work = { dist = "constant", value_s = 0.01 }

[[workload]]
entry = "api.get"
rate_per_s = 100.0
arrivals = "even"
"#;

#[test]
fn a_sharp_boundary_is_found_within_the_bisection_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dd1.toml");
    std::fs::write(&file, DD1).unwrap();
    let out = dir.path().join("out");
    let output = stampede(&[
        "map",
        file.to_str().unwrap(),
        "--x",
        "workload.0.rate_per_s=85..115",
        "--y",
        "services.api.endpoints.get.work.value_s=0.009..0.011",
        "--ys",
        "5",
        "--metric",
        "api.queue_depth_mean",
        "--level",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let map = map_json(&out.join("dd1-map"));
    let tolerance = 30.0 / 64.0;
    let rows = map["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for row in rows {
        let work = row["y"].as_f64().unwrap();
        let theory = 1.0 / work + 2.0 * 5.0 / 100.0;
        let found = row["boundary_x"].as_f64().unwrap();
        assert!((found - theory).abs() <= tolerance, "work {work}: boundary {found}, theory {theory}");
        // Every replica is the same run: the band is the last bracket, and holds the theory.
        let band: Vec<f64> = row["band"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(band[0] <= theory && theory <= band[1], "work {work}: band {band:?}, theory {theory}");
        // (the bracket's ends are rounded to 6 significant digits)
        assert!(band[1] - band[0] <= tolerance * 1.001, "work {work}: band {band:?}");
        assert_eq!(row["below_boundary"], "below");
    }
    // Cheaper than the full grid of the same resolution, and it says by how much.
    let (run, full) = (map["evaluations_run"].as_u64().unwrap(), map["full_grid_evaluations"].as_u64().unwrap());
    assert_eq!(full, 5 * 65);
    assert!(run <= 5 * 8, "{run} evaluations");
    assert!(stdout(&output).contains(&format!("the full grid at this resolution would be {full} evaluations")));
}

/// The docs' map: retry-storm's naive client has a boundary inside the range, the
/// budgeted one none. The command is the one `docs/src/stability-map.md` shows (its
/// `sh,map` block), and the picture there is this run's (`STAMPEDE_UPDATE_FIGURES=1`
/// writes it).
#[test]
fn retry_storms_map_has_a_boundary_for_the_naive_client_and_none_for_the_budgeted_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chapter = std::fs::read_to_string(root.join("docs/src/stability-map.md")).unwrap();
    let block = chapter.split("```sh,map\n").nth(1).expect("the chapter's sh,map block").split("```").next().unwrap();
    let line = block.lines().find(|l| l.starts_with("stampede map")).unwrap();
    let words: Vec<String> =
        line.split(" #").next().unwrap().split_whitespace().skip(1).map(|w| w.trim_matches('\'').to_string()).collect();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
    let out_index = args.iter().position(|a| *a == "--out").expect("the docs' command names --out");
    args[out_index + 1] = out.to_str().unwrap();
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let folder = out.join("retry-storm-map");
    let map = map_json(&folder);
    let rows = map["rows"].as_array().unwrap();
    let naive: Vec<&Value> = rows.iter().filter(|r| r["grid_point"] == 0).collect();
    let budgeted: Vec<&Value> = rows.iter().filter(|r| r["grid_point"] == 1).collect();
    let crossed: Vec<f64> =
        naive.iter().filter(|r| r["crossed"] == true).map(|r| r["boundary_x"].as_f64().unwrap()).collect();
    assert!(crossed.len() >= naive.len() / 2, "{naive:?}");
    assert!(crossed.iter().all(|x| *x > 0.01 && *x < 0.5), "{crossed:?}");
    // A stronger spike needs a shorter one to tip the naive client over.
    assert!(crossed.windows(2).all(|w| w[1] <= w[0]), "the boundary moves left as the factor grows: {crossed:?}");
    assert!(budgeted.iter().all(|r| r["crossed"] == false && r["side"] == "above"), "{budgeted:?}");
    // Each band edge inside the range is bisected like the boundary: a sure evaluation
    // on the edge, an unsure one (its interval straddling 0.5) within the tolerance
    // (1/64 of the log range) on the boundary's side of it.
    let unit = |x: f64| (x / 0.01).ln() / (0.5f64 / 0.01).ln();
    let evaluations = map["evaluations"].as_array().unwrap();
    for row in naive.iter().filter(|r| r["crossed"] == true) {
        let row_evaluations: Vec<&Value> =
            evaluations.iter().filter(|e| e["grid_point"] == 0 && e["y"] == row["y"]).collect();
        let band: Vec<f64> = row["band"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        for (edge, inward) in [(band[0], 1.0), (band[1], -1.0)] {
            if edge <= 0.01 || edge >= 0.5 {
                continue; // open to the range's end
            }
            let unsure_within = row_evaluations.iter().any(|e| {
                let (x, lo, hi) =
                    (e["x"].as_f64().unwrap(), e["ci_lo"].as_f64().unwrap(), e["ci_hi"].as_f64().unwrap());
                let step = (unit(x) - unit(edge)) * inward;
                lo < 0.5 && 0.5 <= hi && step > 0.0 && step <= 1.001 / 64.0
            });
            assert!(unsure_within, "factor {}: band edge {edge} is not bisected: {row_evaluations:?}", row["y"]);
        }
    }
    let said = stdout(&output);
    assert!(said.contains("no boundary in range: recovered_ratio ≥ 0.5 (better) at every faults.0.factor"), "{said}");
    for file in
        ["map.parquet", "evaluations.parquet", "map.json", "map-0.svg", "map-1.svg", "map.html", "manifest.json"]
    {
        assert!(folder.join(file).is_file(), "{file}");
    }
    // The docs show this run's picture of the naive client.
    let picture = root.join("docs/src/images/retry-storm-map.svg");
    let drawn = std::fs::read_to_string(folder.join("map-0.svg")).unwrap();
    if std::env::var_os("STAMPEDE_UPDATE_FIGURES").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::create_dir_all(picture.parent().unwrap()).unwrap();
        std::fs::write(&picture, &drawn).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&picture).unwrap_or_default(),
        drawn,
        "docs/src/images/retry-storm-map.svg is another run's (STAMPEDE_UPDATE_FIGURES=1 rewrites it)"
    );
    // The same map on one thread; a second map replaces the folder it wrote.
    let again = stampede(&[&args[..], &["--threads", "1", "--quiet"]].concat());
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(map_json(&folder), map);
}

#[test]
fn a_level_never_crossed_is_said_and_bad_input_exits_2_writing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dd1.toml");
    std::fs::write(&file, DD1).unwrap();
    let dd1 = file.to_str().unwrap();
    let out = dir.path().join("out");
    let x = "workload.0.rate_per_s=50..90";
    let y = "services.api.endpoints.get.work.value_s=0.009..0.011";
    let output = stampede(&[
        "map",
        dd1,
        "--x",
        x,
        "--y",
        y,
        "--ys",
        "2",
        "--metric",
        "api.queue_depth_mean",
        "--level",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(said.contains("no boundary in range: api.queue_depth_mean < 5 at every"), "{said}");
    assert!(said.contains("the level 5 is never crossed in this range"), "{said}");
    std::fs::remove_dir_all(&out).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["map", "retry-storm", "--x", "retry.policy=1..2", "--y", y], "the scenario's grid sets it"),
        (
            &[
                "map",
                "mmck",
                "--x",
                "queue.servers=1..6",
                "--y",
                "queue.arrival_rate_per_s=1..2",
                "--metric",
                "wait_mean_s",
            ],
            "the field is an integer (4); map it as one",
        ),
        (
            &[
                "map",
                "mmc",
                "--x",
                "queue.arrival_rate_per_s=0.5..1.4",
                "--y",
                "queue.service_rate_per_s=1.5..2",
                "--metric",
                "nope",
            ],
            "--metric nope: not a metric of model mmc",
        ),
        (
            &[
                "map",
                dd1,
                "--x",
                "services.api.endpoints.get.work.dist=1..2",
                "--y",
                y,
                "--metric",
                "api.queue_depth_mean",
            ],
            "not a number (the scenario has \"constant\")",
        ),
        (&["map", dd1, "--x", x, "--y", x, "--metric", "api.queue_depth_mean"], "map two different fields"),
        (
            &["map", dd1, "--x", "services.api.speed=1..2", "--y", y, "--metric", "api.queue_depth_mean"],
            "services.api.speed: unknown field `speed`",
        ),
        (&["map", dd1, "--x", "rate", "--y", y], "--x \"rate\": expected PATH=LO..HI"),
        (&["map", dd1, "--x", x, "--y", "a=2..1"], "--y \"a=2..1\": the range is empty"),
        (&["map", dd1, "--x", x, "--y", y, "--metric", "api.queue_depth_mean", "--ys", "1"], "--ys 1: from 2"),
        (
            &["map", dd1, "--x", x, "--y", y, "--metric", "api.queue_depth_mean", "--tolerance", "0.6"],
            "--tolerance 0.6",
        ),
        (
            &["map", dd1, "--x", x, "--y", y, "--metric", "api.queue_depth_mean", "--level", "nan"],
            "--level NaN: must be a number",
        ),
    ];
    for (args, expected) in cases {
        let mut args = args.to_vec();
        args.extend(["--out", out.to_str().unwrap()]);
        let output = stampede(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{args:?}: {}", stderr(&output));
        assert!(!out.exists(), "{args:?} wrote {:?}", files_below(&out));
    }
}

/// Issue 73, item 2: a range that crosses the stability limit is mapped, not refused.
/// An M/M/c's mean wait (μ = 100/s) over arrival rate 50..390/s × servers 1..4: the
/// rates at or past c·μ have no steady state (the model refuses them as overloaded),
/// so they count beyond the level, drawn as crosses and named; every row's boundary is
/// where Erlang C's Wq reaches the level. A map whose every point is refused exits 2.
#[test]
fn a_range_across_the_stability_limit_is_mapped_and_matches_erlang_c() {
    use stampede_engine::measurement::theory::erlang_c;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queue.toml");
    let shown = stdout(&stampede(&["show", "mmc"]));
    std::fs::write(&file, shown.split("[grid]").next().unwrap()).unwrap();
    let queue = file.to_str().unwrap();
    let out = dir.path().join("out");
    let level = 0.02;
    let mut args = vec![
        "map",
        queue,
        "--x",
        "queue.arrival_rate_per_s=50..390",
        "--y",
        "queue.servers=1..4:int",
        "--metric",
        "wait_mean_s",
        "--level",
        "0.02",
        "--replicas",
        "10",
        "--set",
        "run.horizon_s=200",
        "--set",
        "run.warmup_s=20",
        "--out",
        out.to_str().unwrap(),
    ];
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(said.contains("refused as overloaded and counted beyond the level"), "{said}");
    let map = map_json(&out.join("mmc-map"));
    let refused: Vec<&Value> =
        map["evaluations"].as_array().unwrap().iter().filter(|e| e.get("refused").is_some()).collect();
    assert!(!refused.is_empty(), "{map}");
    for e in &refused {
        let (x, c) = (e["x"].as_f64().unwrap(), e["y"].as_f64().unwrap());
        assert!(x >= 100.0 * c, "only points at ρ ≥ 1 are refused: {e}");
    }
    for row in map["rows"].as_array().unwrap() {
        let c = row["y"].as_f64().unwrap() as u32;
        assert_eq!(row["crossed"], true, "{row}");
        assert_eq!(row["monotone"], true, "the wait grows with the rate: {row}");
        // Erlang C: the rate at which its Wq reaches the level.
        let wq = |lambda: f64| erlang_c(lambda, 100.0, c).map_or(f64::INFINITY, |m| m.wait_mean_s);
        let (mut lo, mut hi) = (1.0, f64::from(c) * 100.0 - 1e-9);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if wq(mid) < level {
                lo = mid
            } else {
                hi = mid
            }
        }
        let x = row["boundary_x"].as_f64().unwrap();
        assert!((x - lo).abs() <= 0.03 * lo, "c = {c}: boundary {x}, Erlang C {lo:.2}");
    }
    let page = std::fs::read_to_string(out.join("mmc-map/map.html")).unwrap();
    assert!(page.contains("refused as overloaded (no steady state)"), "the crosses are drawn");
    // Every point past the limit: nothing to map, exit 2, nothing written.
    let everywhere = dir.path().join("everywhere");
    args[3] = "queue.arrival_rate_per_s=400..500";
    let last = args.len() - 1;
    args[last] = everywhere.to_str().unwrap();
    let output = stampede(&args);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stderr(&output).contains("refuses every point it tried as overloaded"), "{}", stderr(&output));
    assert!(files_below(dir.path()).iter().all(|f| !f.starts_with(&everywhere)));
}
