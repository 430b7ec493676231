//! Bad input gets a clear message naming the field, the value and what is allowed,
//! exits 2 (3 for an unwritable folder), and writes nothing.

use crate::common::{files_below, stampede, stderr, stdout};

/// Runs `stampede run` with `args` plus an output folder in a scratch directory,
/// asserts the exit code, that every `expected` fragment is in the message, and
/// that nothing was written.
fn refuse(args: &[&str], code: i32, expected: &[&str]) {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let mut full = vec!["run"];
    if args.first().is_none_or(|a| a.starts_with("--")) {
        full.push("mmc"); // the field paths below are the mmc model's
    }
    full.extend_from_slice(args);
    full.extend_from_slice(&["--out", out.to_str().unwrap(), "--quiet"]);
    if !args.iter().any(|arg| arg.contains("replicas")) {
        full.extend_from_slice(&["--replicas", "2"]);
    }
    let output = stampede(&full);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(code), "args {args:?}: {message}");
    for fragment in expected {
        assert!(message.contains(fragment), "args {args:?}: {fragment:?} missing from {message:?}");
    }
    assert!(message.starts_with("stampede: error: ") || message.contains("error:"), "{message}");
    assert!(files_below(scratch.path()).is_empty(), "args {args:?} wrote {:?}", files_below(scratch.path()));
}

fn scenario_file(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

const VALID: &str = r#"
name = "tiny"
model = "mmc"
[run]
horizon_s = 10.0
replicas = 2
[queue]
arrival_rate_per_s = 5.0
service_rate_per_s = 10.0
servers = 1
"#;

#[test]
fn unknown_field_names_it_and_lists_the_allowed_ones() {
    refuse(&["--set", "queue.servrs=3"], 2, &["queue.servrs", "unknown field", "servers"]);
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(dir.path(), &format!("{VALID}\ncolour = \"red\"\n"));
    refuse(&[&file], 2, &["colour", "expected one of", "queue"]);
}

#[test]
fn wrong_type_names_field_and_value() {
    refuse(&["--set", "queue.servers=two"], 2, &["queue.servers", "\"two\"", "a whole number from 0 to 4294967295"]);
    refuse(&["--set", "run.horizon_s=\"long\""], 2, &["run.horizon_s", "long"]);
}

#[test]
fn non_positive_rates_are_refused() {
    refuse(&["--set", "queue.arrival_rate_per_s=-1"], 2, &["queue.arrival_rate_per_s = -1", "positive rate"]);
    refuse(&["--set", "queue.service_rate_per_s=0"], 2, &["queue.service_rate_per_s = 0", "positive rate"]);
    refuse(&["--set", "queue.arrival_rate_per_s=nan"], 2, &["queue.arrival_rate_per_s = nan", "must be a number"]);
}

#[test]
fn zero_servers_and_zero_replicas_are_refused() {
    refuse(&["--set", "queue.servers=0"], 2, &["queue.servers = 0", "at least 1"]);
    // The grid of the showcase varies servers; a bad grid value names its point.
    refuse(&["--grid", "queue.servers=2,0"], 2, &["grid point 1", "queue.servers = 0", "at least 1"]);
    refuse(&["--set", "run.replicas=0"], 2, &["run.replicas = 0", "at least 1"]);
    refuse(&["--replicas", "0"], 2, &["--replicas 0", "at least 1", "a run setting"]);
}

#[test]
fn unstable_infinite_queue_is_refused_with_a_way_out() {
    refuse(
        &["--set", "queue.arrival_rate_per_s=500", "--grid", "queue.servers=2"],
        2,
        &["queue.arrival_rate_per_s = 500", "ρ = λ/(c·μ) = 2.500", "no steady state", "queue.capacity"],
    );
}

#[test]
fn capacity_below_servers_is_refused() {
    refuse(&["mmck", "--grid", "queue.capacity=2"], 2, &["queue.capacity = 2", "at least queue.servers (4)"]);
}

#[test]
fn warmup_past_horizon_is_refused() {
    refuse(&["--set", "run.warmup_s=5000"], 2, &["run.warmup_s = 5000", "below run.horizon_s"]);
}

#[test]
fn unknown_scenario_and_unknown_model() {
    refuse(&["no-such-scenario"], 2, &["unknown scenario \"no-such-scenario\"", "mmc", "stampede list"]);
    refuse(&["--set", "model=warp"], 2, &["model = \"warp\"", "unknown model", "mmc"]);
}

#[test]
fn malformed_set_and_grid() {
    refuse(&["--set", "queue.servers"], 2, &["--set \"queue.servers\"", "PATH=VALUE"]);
    refuse(&["--set", "queue..servers=3"], 2, &["dotted field path"]);
    refuse(&["--set", "queue.servers="], 2, &["empty"]);
    refuse(&["--grid", "queue.servers"], 2, &["--grid \"queue.servers\"", "PATH=V1,V2"]);
    refuse(&["--grid", "queue.servers=1,,2"], 2, &["non-empty"]);
    refuse(&["--grid", "run.seed=1,2"], 2, &["grid axis run.seed", "cannot be varied"]);
    refuse(&["--set", "grid.x=1"], 2, &["--grid"]);
}

#[test]
fn invalid_toml_reports_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario_file(dir.path(), "name = \"x\"\nmodel = \n");
    refuse(&[&file], 2, &["is not valid TOML", "line 2"]);
}

#[test]
fn zero_threads_is_refused() {
    refuse(&["--threads", "0"], 2, &["--threads 0"]);
}

#[test]
fn usage_errors_exit_2() {
    let output = stampede(&["run", "--replicas", "many"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--replicas"));
}

#[test]
fn unwritable_output_folder_exits_3_and_writes_nothing() {
    // A path below a regular file cannot be a folder, even for root.
    let scratch = tempfile::tempdir().unwrap();
    let blocker = scratch.path().join("blocker");
    std::fs::write(&blocker, "not a folder").unwrap();
    let out = blocker.join("out");
    let output = stampede(&["run", "--replicas", "2", "--quiet", "--out", out.to_str().unwrap()]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(message.contains("cannot create output folder") && message.contains("blocker"), "{message}");
    assert_eq!(files_below(scratch.path()), vec![std::path::PathBuf::from("blocker")]);
}

#[test]
fn a_run_that_cannot_fit_is_refused_with_its_estimate() {
    // 3 points × 4 billion replicas: about a terabyte of replica rows.
    refuse(&["--replicas", "4000000000"], 2, &["this run writes up to", "before compression", "free; nothing was run"]);
}

#[test]
fn a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("list")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader went away, as `| head -0` does
    let mut errors = String::new();
    child.stderr.take().unwrap().read_to_string(&mut errors).unwrap();
    let status = child.wait().unwrap();
    assert!(!errors.contains("panicked"), "{errors}");
    assert_ne!(status.code(), Some(101), "no panic exit");
}

#[test]
fn a_negative_seed_is_told_seeds_are_unsigned() {
    let output = stampede(&["run", "mmc", "--seed", "-1", "--out", "/nonexistent/never"]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("seeds are unsigned 64-bit integers, 0 to 18446744073709551615"), "{message}");
    assert!(!message.contains("-- -1"), "no tip that would make -1 the scenario: {message}");
}

#[test]
fn zero_replicas_is_a_run_setting_not_a_grid_point() {
    let output = stampede(&["run", "baltor", "--replicas", "0", "--out", "/nonexistent/never"]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("--replicas 0: must be at least 1 (a run setting"), "{message}");
    assert!(!message.contains("grid point 0"), "{message}");
    // The same in a file, or by --set: named as the run setting, before any grid point.
    let output = stampede(&["show", "baltor", "--set", "run.replicas=0"]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.starts_with("stampede: error: run.replicas = 0: must be at least 1"), "{message}");
}

#[test]
fn list_entries_are_set_by_index_in_both_spellings() {
    let factor = |args: &[&str]| {
        let output = stampede(&[&["show", "baltor"], args].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        let shown: toml::Table = stdout(&output).parse().unwrap();
        shown["faults"][0]["factor"].as_float()
    };
    assert_eq!(factor(&[]), Some(5.0));
    assert_eq!(factor(&["--set", "faults.0.factor=2"]), Some(2.0));
    assert_eq!(factor(&["--set", "faults[0].factor=3"]), Some(3.0));
    // A grid axis over one entry's field, in brackets, is shown dotted and runs.
    let output = stampede(&["show", "baltor", "--grid", "faults[0].factor=2,3"]);
    assert!(stdout(&output).contains("\"faults.0.factor\" = [2, 3]"), "{}", stdout(&output));
    let output = stampede(&["show", "baltor", "--set", "faults[7].factor=2"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot set faults.7.factor: faults has 2 entries (indexes 0 to 1)"));
}

/// Every refusal of the graph model's scenario, each naming its field path, exit 2,
/// nothing written.
#[test]
fn graph_scenarios_refuse_what_cannot_run() {
    let tier = |set: &str, expected: &[&str]| refuse(&["graph-three-tier", "--set", set], 2, expected);
    tier(
        "services.api.endpoints.read.steps.0.call=dbb.query",
        &[
            "services.api.endpoints.read.steps[0].call = \"dbb.query\"",
            "no service \"dbb\"; services: api, cache, db, web",
        ],
    );
    tier("services.api.endpoints.read.steps.1.call=db.qurey", &["no such endpoint; db's endpoints: db.query"]);
    tier(
        "services.db.endpoints.query.steps=[{call = \"api.read\"}]",
        &["the calls form a cycle, api.read -> db.query -> api.read", "[graph] max_depth"],
    );
    tier("services.cache.instances=0", &["services.cache.instances = 0", "at least 1"]);
    tier("services.db.workers=0", &["services.db.workers = 0", "at least 1"]);
    tier(
        "services.api.endpoints.read.steps.1.probability=1.5",
        &["services.api.endpoints.read.steps[1].probability = 1.5", "from 0 to 1"],
    );
    tier("faults.0.target=cahce", &["faults[0].target = \"cahce\"", "services: api, cache, db, web"]);
    tier("faults.0.kind=partition", &["faults[0].kind = \"partition\"", "partitions an edge"]);
    tier("edges.api->web.timeout_s=1", &["edges.\"api->web\": no call goes along it", "api->cache"]);
    tier("services.api.workerz=3", &["workerz", "unknown field"]);
    tier("workload.0.entry=web.home", &["workload[0].entry = \"web.home\"", "web's endpoints: web.page"]);
    refuse(
        &["graph-hedging", "--grid", "workload.0.entry=front.read,store.get"],
        2,
        &["grid point 1 (", "workload.0.entry = \"store.get\"", "not what is measured"],
    );
    refuse(
        &[
            "graph-fanout",
            "--set",
            "services.front.endpoints.search.steps.0.wait=quorum",
            "--set",
            "services.front.endpoints.search.steps.0.quorum=11",
        ],
        2,
        &["steps[0].quorum = 11", "from 1 to the group's 10 calls"],
    );
    refuse(
        &["graph-hedging", "--set", "edges.front->store.hedge={after_s = 2.0}"],
        2,
        &["edges.\"front->store\".hedge.after_s = 2", "timeout_s = 1", "no hedge would ever be sent"],
    );
}
