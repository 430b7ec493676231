//! The LLM gateway through the command line: every act's claims hold (`verify`),
//! output is byte-identical across thread counts, `show` round-trips case axes and
//! fixture overrides, and bad gateway input is refused with the field named.

use crate::common::{files_below, stampede, stderr, stdout};

const ACTS: [&str; 7] =
    ["llm-naive", "llm-stack", "llm-breaker", "llm-retries", "llm-adaptive", "llm-ladder", "llm-meters"];

#[test]
fn every_act_demonstrates_its_claims() {
    for act in ACTS {
        let scratch = tempfile::tempdir().unwrap();
        let output = stampede(&["verify", act, "--quiet", "--out", scratch.path().to_str().unwrap()]);
        assert!(output.status.success(), "{act}:\n{}{}", stdout(&output), stderr(&output));
        assert!(stdout(&output).contains(" 0 failed"), "{act}: {}", stdout(&output));
    }
}

#[test]
fn gateway_output_is_identical_for_any_thread_count() {
    let scratch = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let out = scratch.path().join(threads);
        let args = ["run", "llm-breaker", "--replicas", "6", "--threads", threads, "--quiet", "--out"];
        let output = stampede(&[&args[..], &[out.to_str().unwrap()]].concat());
        assert!(output.status.success(), "{}", stderr(&output));
        outputs.push(out.join("llm-breaker"));
    }
    for file in ["summary.parquet", "replicas.parquet", "histograms.parquet"] {
        let read = |dir: &std::path::Path| std::fs::read(dir.join(file)).unwrap();
        assert!(read(&outputs[0]) == read(&outputs[1]), "{file} differs between 1 and 2 threads");
    }
}

#[test]
fn show_round_trips_cases_and_fixture_overrides() {
    let scratch = tempfile::tempdir().unwrap();
    let shown = stampede(&["show", "llm-meters", "--replicas", "3"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(
        text.contains("server_slots = 2000") && text.contains("label = \"split per instance, reconciled\""),
        "{text}"
    );
    let file = scratch.path().join("meters.toml");
    std::fs::write(&file, &text).unwrap();
    let again = stampede(&["show", file.to_str().unwrap()]);
    assert_eq!(stdout(&again), text, "show of a shown scenario is a fixed point");
}

#[test]
fn bad_gateway_input_names_the_field_and_writes_nothing() {
    let incident =
        |fields: &str| format!("incidents=[{{ tier = \"sonnet\", start_s = 5.0, duration_s = 10.0, {fields} }}]");
    let incidents = [
        (
            incident("kind = \"brownout\", latency_factor = 0.0"),
            "incidents[0].latency_factor = 0: a positive multiplier",
        ),
        (incident("kind = \"brownout\", health = 1.5"), "incidents[0].health = 1.5"),
        (incident("kind = \"brownout\", error_rate = -0.1"), "incidents[0].error_rate = -0.1"),
        (incident("kind = \"outage\", latency_factor = 5.0"), "incidents[0].latency_factor: only a brownout takes it"),
        (incident("kind = \"rate_limit_step\""), "a rate_limit_step needs rpm_scale, itpm_scale or otpm_scale"),
        (
            incident("kind = \"rate_limit_step\", rpm_scale = -1.0"),
            "incidents[0].rpm_scale = -1: a positive multiplier",
        ),
        (incident("kind = \"brownout\", rpm_scale = 0.5"), "incidents[0].rpm_scale: only a rate_limit_step takes it"),
    ];
    let mut incident_cases: Vec<([&str; 2], &str)> =
        incidents.iter().map(|(value, expected)| (["--set", value.as_str()], *expected)).collect();
    incident_cases
        .push((["--set", "load={ rate = [[0, 5]] }"], "workload.turns_per_s = 20: [load] sets the arrivals too"));
    let cases: [(&[&str], &str); 6] = [
        (&["--set", "stack.gates=[\"admission\", \"moat\"]"], "stack.gates"),
        (&["--set", "gateway.breaker_failure_ratio=1.5"], "gateway.breaker_failure_ratio = 1.5"),
        (&["--set", "gateway.breaker_counts_429s=true"], "breaker_counts_429s"),
        (&["--set", "stack.answer_fallback_tier=\"gpt\""], "no such tier; tiers: haiku, opus, sonnet"),
        (&["--set", "tiers.sonnet.server_slots=-3"], "tiers.sonnet.server_slots"),
        (&["--set", "classes.guard.tier=\"mistral\""], "classes.guard.tier = \"mistral\""),
    ];
    let all = cases.into_iter().chain(incident_cases.iter().map(|(args, expected)| (&args[..], *expected)));
    for (overrides, expected) in all {
        let scratch = tempfile::tempdir().unwrap();
        let out = scratch.path().to_str().unwrap();
        let output = stampede(&[&["run", "llm-stack", "--quiet", "--out", out][..], overrides].concat());
        assert_eq!(output.status.code(), Some(2), "{overrides:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{overrides:?}: {}", stderr(&output));
        assert!(files_below(scratch.path()).is_empty(), "{overrides:?} wrote something");
    }
}

/// A scenario's relative fixture path is read from the scenario file's folder, not
/// the current one, and the manifest embeds the fixture's content and the command.
#[test]
fn a_fixture_path_is_relative_to_its_scenario_and_the_manifest_embeds_it() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("lab");
    std::fs::create_dir(&dir).unwrap();
    let fixture = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenario/fixtures/llm-gateway.toml"))
        .unwrap()
        .replace("# ", "#  ");
    std::fs::write(dir.join("my-fixture.toml"), &fixture).unwrap();
    let shown = stdout(&stampede(&["show", "llm-naive"]));
    let scenario = shown.replace("[workload]\n", "[workload]\nfixture = \"my-fixture.toml\"\n");
    assert!(scenario.contains("fixture = \"my-fixture.toml\""), "{scenario}");
    std::fs::write(dir.join("lab.toml"), scenario).unwrap();
    let out = scratch.path().join("out");
    let file = dir.join("lab.toml");
    let args = ["run", file.to_str().unwrap(), "--replicas", "2", "--quiet", "--out", out.to_str().unwrap()];
    let run = stampede(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    let name = files_below(&out).into_iter().find(|p| p.ends_with("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join(name)).unwrap()).unwrap();
    assert_eq!(manifest["inputs"][0]["field"], "workload.fixture");
    assert_eq!(manifest["inputs"][0]["content"].as_str().unwrap(), fixture, "the fixture's content, byte for byte");
    let command: Vec<&str> = manifest["command_line"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(&command[1..], &args[..], "the command line that produced the run");
}

/// Valid input that would mislead is said before the run: a quota burst still spent in
/// the measured window (gone once the warm-up is as long as the warning suggests),
/// and a ladder that sheds the answer before the cap. A ladder with a class twice is
/// refused.
#[test]
fn run_warns_of_a_burst_in_the_measured_window_and_of_a_ladder_shedding_answers() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().to_str().unwrap();
    let run = |sets: &[&str]| {
        let mut args = vec!["run", "llm-naive", "--replicas", "1", "--no-report", "--quiet", "--force", "--out", out];
        for set in sets {
            args.extend(["--set", set]);
        }
        let output = stampede(&args);
        assert!(output.status.success(), "{sets:?}: {}", stderr(&output));
        stderr(&output)
    };
    // llm-naive: 20 turns/s ask opus's ITPM meter for 652,800 a minute against 400,000;
    // its minute of burst lasts 60 × 400,000 ÷ 252,800 = 94.9 s.
    let short = run(&["run.warmup_s=5", "run.horizon_s=6"]);
    assert!(short.contains("stampede: warning: tier opus:") && short.contains("lasts about 95 s"), "{short}");
    assert!(short.contains("set run.warmup_s to at least 95"), "{short}");
    assert!(short.contains("shows up to 64% more throughput"), "{short}");
    let long = run(&["run.warmup_s=95", "run.horizon_s=96"]);
    assert!(!long.contains("warning"), "{long}");
    // Issue 72: the launch product at 15 turns/s asks smart's RPM meter for 902 a
    // minute against 900: the burst lasts ~30,000 s, but adds at most 0.2% to the
    // measured throughput; no warning (it said "set run.warmup_s to at least 30001").
    const LAUNCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenario/fixtures/llm-launch-3x.toml");
    let launch = stampede(&["run", LAUNCH, "--replicas", "1", "--no-report", "--quiet", "--force", "--out", out]);
    assert!(launch.status.success(), "{}", stderr(&launch));
    assert!(!stderr(&launch).contains("warning"), "{}", stderr(&launch));
    let ladder = stampede(&[
        "verify",
        "llm-stack",
        "--replicas",
        "1",
        "--quiet",
        "--out",
        out,
        "--force",
        "--set",
        "run.warmup_s=95",
        "--set",
        "run.horizon_s=96",
        "--set",
        "gateway.ladder_classes=[\"answer\", \"title\"]",
    ]);
    assert!(
        stderr(&ladder).contains("gateway.ladder_classes puts answer on rung 1 (pressure ≥ 0.8)"),
        "{}",
        stderr(&ladder)
    );
    let twice = stampede(&[
        "run",
        "llm-stack",
        "--out",
        out,
        "--set",
        "gateway.ladder_classes=[\"title\", \"rewrite\", \"title\"]",
    ]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(stderr(&twice).contains("gateway.ladder_classes[2] = \"title\": already on rung 1"), "{}", stderr(&twice));
}

/// Runs a gateway scenario file (named `llm-naive` inside) for one traced replica with
/// `sets`, and reads its trace.
fn traced_llm_naive(file: &std::path::Path, out: &std::path::Path, sets: &[&str]) -> stampede_output::Table {
    let mut args = vec!["run", file.to_str().unwrap(), "--replicas", "1", "--trace", "0", "--no-report", "--quiet"];
    for set in sets {
        args.extend(["--set", set]);
    }
    args.extend(["--out", out.to_str().unwrap()]);
    let run = stampede(&args);
    assert!(run.status.success(), "{}: {}", file.display(), stderr(&run));
    stampede_output::Table::read(&out.join("llm-naive").join("trace.parquet")).unwrap()
}

/// A tier's measured time to first token (`[tiers.NAME] ttft_s`, here a CSV beside the
/// scenario): at a light load every answer call's first token comes the file's 3 s
/// after it was sent (× a stretch of 1.000…), and the manifest names the file it read.
#[test]
fn a_tiers_measured_time_to_first_token_drives_its_calls() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("lab");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("ttft.csv"), "latency_s\n3.0\n3.0\n3.0\n").unwrap();
    let shown = stdout(&stampede(&["show", "llm-naive"]));
    let scenario = format!(
        "{shown}\n[tiers.sonnet]\nttft_s = {{ dist = \"empirical\", file = \"ttft.csv\", column = \"latency_s\" }}\n"
    );
    std::fs::write(dir.join("lab.toml"), scenario).unwrap();
    let out = scratch.path().join("out");
    let sets = ["workload.turns_per_s=0.5", "run.warmup_s=0", "run.horizon_s=60"];
    let trace = traced_llm_naive(&dir.join("lab.toml"), &out, &sets);
    let folder = out.join("llm-naive"); // the scenario's name
    let (kinds, classes) = (trace.strings("kind").unwrap(), trace.strings("class").unwrap());
    let (start, first) = (trace.numbers("start_s").unwrap(), trace.numbers("first_token_s").unwrap());
    let waits: Vec<f64> = (0..kinds.len())
        .filter(|&i| kinds[i] == "attempt" && classes[i] == "answer" && first[i].is_finite())
        .map(|i| first[i] - start[i])
        .collect();
    assert!(waits.len() > 15, "{} answer attempts", waits.len());
    assert!(waits.iter().all(|w| (w - 3.0).abs() < 1e-3), "{waits:?}");
    let manifest = std::fs::read_to_string(folder.join("manifest.json")).unwrap();
    assert!(manifest.contains("tiers.sonnet.ttft_s.file") && manifest.contains("ttft.csv"), "{manifest}");
}

/// `[load]` drives the gateway's turns: a step schedule (2 → 8 turns/s at 30 s) gives
/// each half the turns its rate integrates to, within Poisson error, and a replayed
/// trace gives a turn at each recorded instant and no other. Every turn starts with a
/// guard call (calls_per_turn 1), so guard calls in the trace count the turns.
#[test]
fn load_drives_the_gateways_turns() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::write(dir.join("turns.csv"), "t_s\n0.5\n1.25\n2.0\n7.5\n8.0\n13.0\n").unwrap();
    let shown = stdout(&stampede(&["show", "llm-naive"]));
    let base = shown.replace("turns_per_s = 20.0\n", "");
    assert_ne!(base, shown);
    let guard_calls = |load: &str, name: &str| -> Vec<f64> {
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, format!("{base}\n[load]\n{load}\n")).unwrap();
        let trace = traced_llm_naive(&file, &dir.join(format!("out-{name}")), &["run.warmup_s=0", "run.horizon_s=60"]);
        let (kinds, classes) = (trace.strings("kind").unwrap(), trace.strings("class").unwrap());
        let start = trace.numbers("start_s").unwrap();
        (0..kinds.len()).filter(|&i| kinds[i] == "call" && classes[i] == "guard").map(|i| start[i]).collect()
    };
    let stepped = guard_calls("rate = [[0, 2], [30, 8]]", "steps");
    let (before, after) =
        (stepped.iter().filter(|&&t| t < 30.0).count(), stepped.iter().filter(|&&t| t >= 30.0).count());
    // 60 and 240 expected; 4 Poisson standard deviations.
    assert!((before as f64 - 60.0).abs() < 4.0 * 60f64.sqrt(), "{before} turns in 0–30 s at 2/s");
    assert!((after as f64 - 240.0).abs() < 4.0 * 240f64.sqrt(), "{after} turns in 30–60 s at 8/s");
    let mut replayed = guard_calls("arrivals = { trace = \"turns.csv\", column = \"t_s\" }", "trace");
    replayed.sort_by(f64::total_cmp);
    assert_eq!(replayed, [0.5, 1.25, 2.0, 7.5, 8.0, 13.0]);
}

/// The product of issue 29, from `docs/src/examples`: two tiers and three classes with
/// names of its own, a turn plan with a background call and a fallback tier. It runs
/// end to end — verify (run, claims, report), a trace, capacity and show — with its
/// own names in every table and none of the shipped fixture's.
#[test]
fn a_two_tier_three_class_product_runs_end_to_end_under_its_own_names() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/examples");
    let (scenario, fixture) = (examples.join("chat-product-scenario.toml"), examples.join("chat-product.toml"));
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().to_str().unwrap();
    let verify_out = scratch.path().join("verify");
    let args =
        ["verify", scenario.to_str().unwrap(), "--replicas", "6", "--quiet", "--out", verify_out.to_str().unwrap()];
    let verified = stampede(&args);
    assert!(
        verified.status.success() && stdout(&verified).contains(" 0 failed"),
        "{}{}",
        stdout(&verified),
        stderr(&verified)
    );
    let ran =
        stampede(&["run", scenario.to_str().unwrap(), "--replicas", "6", "--trace", "0", "--quiet", "--out", out]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let dir = scratch.path().join("chat-product");
    let summary = stampede_output::Table::read(&dir.join("summary.parquet")).unwrap();
    let mean = |name: &str| summary.numbers(&format!("{name}_mean")).unwrap_or_else(|e| panic!("{name}: {e}"));
    for name in [
        "classify_offered",
        "answer_served",
        "summarize_offered",
        "answer_fallback_served",
        "classify_fallback_offered",
    ] {
        mean(name);
    }
    for seed_class in ["guard", "rewrite", "think", "title"] {
        assert!(!summary.has(&format!("{seed_class}_offered_mean")), "{seed_class}: a shipped class's column");
    }
    // The plan: a classify per turn (counted alike: both from their arrival).
    assert_eq!(mean("classify_offered"), mean("turns_offered"), "one classify call per turn");
    let histograms = stampede_output::Table::read(&dir.join("histograms.parquet")).unwrap();
    let latencies: std::collections::BTreeSet<&str> =
        histograms.strings("metric").unwrap().iter().map(String::as_str).collect();
    // Turns by ending, then per class its attempts' ttft and total and its calls by ending.
    let mut expected = vec!["turn_s".to_string(), "turn_failed_s".into(), "turn_all_s".into()];
    for class in ["classify", "answer", "summarize"] {
        for kind in ["ttft", "total", "call", "call_failed", "call_all"] {
            expected.push(format!("{class}_{kind}_s"));
        }
    }
    assert_eq!(latencies, expected.iter().map(String::as_str).collect());
    let trace = stampede_output::Table::read(&dir.join("trace.parquet")).unwrap();
    // A summary for 30% of answered turns, counted over the whole traced replica of point 0
    // (every turn answered there), where warm-up does not split a turn from its summary.
    assert_eq!(mean("turns_failed")[0], 0.0);
    let (kinds, points, turns) =
        (trace.strings("kind").unwrap(), trace.numbers("grid_point").unwrap(), trace.numbers("turn").unwrap());
    let calls = |class: &str| {
        let rows = (0..kinds.len()).filter(|&i| kinds[i] == "call" && points[i] == 0.0);
        rows.filter(|&i| trace.strings("class").unwrap()[i] == class).map(|i| turns[i]).collect::<Vec<f64>>()
    };
    let answered: std::collections::BTreeSet<u64> = calls("classify").iter().map(|t| *t as u64).collect();
    let summaries = calls("summarize");
    assert!(summaries.iter().all(|&t| t == u32::MAX as f64), "a background call belongs to no turn");
    let share = summaries.len() as f64 / answered.len() as f64;
    let sd = (0.3 * 0.7 / answered.len() as f64).sqrt();
    assert!((share - 0.3).abs() < 4.0 * sd, "summaries per answered turn: {share} (sd {sd})");
    let classes: std::collections::BTreeSet<&str> =
        trace.strings("class").unwrap().iter().map(String::as_str).filter(|c| !c.is_empty()).collect();
    assert!(classes.contains("summarize") && classes.contains("answer_fallback"), "{classes:?}");
    assert!(
        classes.is_subset(&["classify", "answer", "summarize", "answer_fallback"].into_iter().collect()),
        "{classes:?}"
    );
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("classify") && report.contains("answer_fallback") && !report.contains("guard_"));
    // capacity, checked by hand: answer on smart is 0.4 + 3000 ÷ 6000 s to its first token
    // and 400 ÷ 60 s of decode; OTPM allows 200,000 ÷ 60 ÷ 400 calls/s, or ÷ 880 (the
    // default max_tokens, 400 + 4 × 120) without reconciliation; Little's law holds
    // 8.33 × 7.57 in flight; classify's measured TTFT is a lognormal of median 0.3 s, sigma 0.3.
    let capacity = stampede(&["capacity", "--fixture", fixture.to_str().unwrap(), "--json"]);
    assert!(capacity.status.success(), "{}", stderr(&capacity));
    let capacity: serde_json::Value = serde_json::from_str(&stdout(&capacity)).unwrap();
    let class =
        |name: &str| capacity["classes"].as_array().unwrap().iter().find(|c| c["class"] == name).unwrap().clone();
    let close = |got: &serde_json::Value, want: f64| {
        assert!((got.as_f64().unwrap() - want).abs() < 1e-9 * want, "{got} vs {want}")
    };
    let answer = class("answer");
    let service = 0.4 + 3000.0 / 6000.0 + 400.0 / 60.0;
    close(&answer["service_s"], service);
    close(&answer["otpm_rps"], 200_000.0 / 60.0 / 400.0);
    close(&answer["otpm_unreconciled_rps"], 200_000.0 / 60.0 / 880.0);
    // The pool: the p99 of Poisson calls in flight around Little's law's mean (8.33 calls/s
    // × the service time at the provider's mean jitter e^(0.25²/2)).
    let mean = 200_000.0 / 60.0 / 400.0 * service * (0.25f64 * 0.25 / 2.0).exp();
    close(&answer["mean_in_flight"], mean);
    let pool = answer["pool_size"].as_f64().unwrap();
    assert!(pool >= mean + 2.0 * mean.sqrt() && pool <= mean + 2.6 * mean.sqrt() + 1.0, "{pool} around {mean}");
    close(&class("classify")["service_s"], 0.3 * (0.3f64 * 0.3 / 2.0).exp() + 5.0 / 120.0);
    // Per turn one answer call, served unless both its attempts meet the healthy 0.2% of
    // 500s (which hand the output reservation back).
    close(&capacity["sustainable_turns_rps"], 200_000.0 / 60.0 / 400.0 / (1.0 - 0.002f64.powi(2)));
    assert_eq!(capacity["limited_by"], "answer (OTPM)");
    // show round-trips it.
    let shown = stampede(&["show", scenario.to_str().unwrap()]);
    assert!(shown.status.success() && stdout(&shown).contains("fixture = "), "{}", stderr(&shown));
}

/// Bad fixtures exit 2 naming the file, the table and the field, in `capacity` and
/// `run` alike (one validator): an unknown tier, a fallback cycle, a plan naming an
/// unknown class, a negative quota, a `needs` of a background call.
#[test]
fn bad_fixtures_are_refused_naming_file_table_and_field() {
    let fixture =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/examples/chat-product.toml")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let cases = [
        (
            fixture.replacen("tier = \"smart\"", "tier = \"smrt\"", 1),
            "classes.answer.tier = \"smrt\": no such tier; tiers: fast, smart",
        ),
        (
            fixture.replacen("fallback_tier = \"fast\"", "fallback = \"summarize\"", 1).replacen(
                "max_attempts = 1",
                "max_attempts = 1\nfallback = \"answer\"",
                1,
            ),
            "classes.answer.fallback: a cycle (answer → summarize → answer)",
        ),
        (
            fixture.replacen("{ call = \"answer\" }", "{ call = \"anwser\" }", 1),
            "turn.steps[1].call = \"anwser\": no such class; classes: classify, answer, summarize",
        ),
        (
            fixture.replacen("rpm = 1000", "rpm = -1000", 1),
            "tiers.smart.rpm: invalid value: integer `-1000`, expected a whole number of at least 0",
        ),
        (
            fixture.replacen(
                "{ call = \"summarize\", background = true }",
                "{ call = \"summarize\", background = true }, { call = \"answer\", needs = \"summarize\" }",
                1,
            ),
            "turn.steps[3].needs = \"summarize\": that call runs in the background",
        ),
    ];
    for (i, (text, message)) in cases.iter().enumerate() {
        let file = scratch.path().join(format!("bad-{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let capacity = stampede(&["capacity", "--fixture", file.to_str().unwrap()]);
        assert_eq!(capacity.status.code(), Some(2), "{message}");
        let expected = format!("fixture file {}: {message}", file.display());
        assert!(stderr(&capacity).contains(&expected), "capacity: {}\nwanted: {expected}", stderr(&capacity));
        let scenario = scratch.path().join(format!("scenario-{i}.toml"));
        std::fs::write(&scenario, format!("name = \"bad\"\nmodel = \"gateway\"\n[run]\nhorizon_s = 10.0\nreplicas = 1\nseed = 1\n[workload]\nfixture = \"bad-{i}.toml\"\nturns_per_s = 1.0\n")).unwrap();
        let out = scratch.path().join("out");
        let run = stampede(&["run", scenario.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert_eq!(run.status.code(), Some(2), "{message}");
        assert!(stderr(&run).contains(message), "run: {}", stderr(&run));
        assert!(!out.exists(), "nothing written");
    }
}

/// A trace of your gateway's calls with a class column (`[load] arrivals = { trace,
/// column, class_column }`) replays each row as one call of its class at its instant,
/// outside any turn; a class the fixture lacks is refused with the classes it has, and
/// an endpoint column (the graph's) is refused here.
#[test]
fn a_call_trace_with_a_class_column_replays_each_call_at_its_instant() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/examples/chat-product.toml"),
        dir.join("product.toml"),
    )
    .unwrap();
    let rows =
        [(0.5, "classify"), (1.0, "answer"), (1.5, "classify"), (2.0, "summarize"), (2.5, "answer"), (3.0, "classify")];
    let csv: String = rows.iter().map(|(t, c)| format!("{t},{c}\n")).collect();
    std::fs::write(dir.join("calls.csv"), format!("t_s,class\n{csv}")).unwrap();
    let scenario = |arrivals: &str| {
        format!(
            "name = \"replay\"\nmodel = \"gateway\"\n[run]\nhorizon_s = 10.0\nwarmup_s = 0.0\nreplicas = 2\nseed = 1\n\
             [workload]\nfixture = \"product.toml\"\n[load]\narrivals = {arrivals}\n"
        )
    };
    let file = dir.join("replay.toml");
    std::fs::write(&file, scenario("{ trace = \"calls.csv\", column = \"t_s\", class_column = \"class\" }")).unwrap();
    let out = dir.join("out");
    let run = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--trace",
        "0",
        "--no-report",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let summary = stampede_output::Table::read(&out.join("replay/summary.parquet")).unwrap();
    let mean = |name: &str| summary.numbers(&format!("{name}_mean")).unwrap()[0];
    assert_eq!((mean("classify_offered"), mean("answer_offered"), mean("summarize_offered")), (3.0, 2.0, 1.0));
    assert_eq!(mean("turns_offered"), 0.0, "the calls arrive outside any turn");
    let trace = stampede_output::Table::read(&out.join("replay/trace.parquet")).unwrap();
    let (kinds, classes, starts) =
        (trace.strings("kind").unwrap(), trace.strings("class").unwrap(), trace.numbers("start_s").unwrap());
    let mut calls: Vec<(f64, &str)> =
        (0..kinds.len()).filter(|&i| kinds[i] == "call").map(|i| (starts[i], classes[i].as_str())).collect();
    calls.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(calls, rows.to_vec(), "each call at its instant, of its class");
    // A class the fixture does not have.
    std::fs::write(dir.join("calls.csv"), format!("t_s,class\n{csv}3.5,guard\n")).unwrap();
    let refused = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--force"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("load.arrivals.class_column: the trace names class \"guard\", which the fixture does not have; classes: classify, answer, summarize"),
        "{}",
        stderr(&refused)
    );
    std::fs::write(&file, scenario("{ trace = \"calls.csv\", column = \"t_s\", endpoint_column = \"class\" }"))
        .unwrap();
    let refused = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--force"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("load.arrivals.endpoint_column: only a graph workload's trace"),
        "{}",
        stderr(&refused)
    );
}

/// A scenario's `[turn]` replaces the fixture's plan: llm-naive with guard → answer only
/// makes no rewrite, think or title call, and an answer only after a guard (no warm-up,
/// so no call is counted apart from its turn).
#[test]
fn a_scenarios_turn_replaces_the_fixtures_plan() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().to_str().unwrap();
    let plan = "turn={steps=[{call=\"guard\"},{call=\"answer\"}]}";
    let args = ["run", "llm-naive", "--replicas", "2", "--no-report", "--quiet", "--out", out, "--set", plan];
    let run = stampede(&[&args[..], &["--set", "run.warmup_s=0", "--set", "run.horizon_s=30"]].concat());
    assert!(run.status.success(), "{}", stderr(&run));
    let summary = stampede_output::Table::read(&scratch.path().join("llm-naive/summary.parquet")).unwrap();
    let mean = |name: &str| summary.numbers(&format!("{name}_mean")).unwrap()[0];
    assert_eq!((mean("rewrite_offered"), mean("think_offered"), mean("title_offered")), (0.0, 0.0, 0.0));
    assert!(mean("answer_offered") > 0.0 && mean("guard_offered") >= mean("answer_offered"));
    let bad = stampede(&["run", "llm-naive", "--out", out, "--force", "--set", "turn={steps=[{call=\"summary\"}]}"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("turn.steps[0].call = \"summary\": no such class"), "{}", stderr(&bad));
}
