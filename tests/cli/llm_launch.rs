//! Issue 53's launch questions through the command line, on the product a platform
//! team wrote (`scenario/fixtures/llm-launch.toml`): what can never succeed is refused,
//! and a bulkhead that turns a slowdown into local refusals is named with its knob.

use crate::common::{files_below, stampede, stderr, stdout};

/// A run folder's summary table.
fn summary(dir: &std::path::Path) -> stampede_output::Table {
    stampede_output::Table::read(&dir.join("summary.parquet")).unwrap()
}

fn launch_fixture() -> String {
    format!("{}/scenario/fixtures/llm-launch.toml", env!("CARGO_MANIFEST_DIR"))
}

/// The launch product at 8 turns/s; the smart tier slows threefold, loses half its
/// slots and fails 5% of calls for two minutes; naive retries against the stack
/// without its fallback (issue 53's comparison).
fn slowdown(extra: &str) -> String {
    format!(
        r#"name = "slowdown"
model = "gateway"
[run]
horizon_s = 200.0
warmup_s = 20.0
replicas = 4
seed = 1
[workload]
turns_per_s = 8.0
fixture = "{}"
[stack]
gates = ["admission", "bulkhead", "adaptive", "breaker", "quota", "retry"]
{extra}
[[incidents]]
tier = "smart"
kind = "brownout"
start_s = 40.0
duration_s = 120.0
latency_factor = 3.0
error_rate = 0.05
health = 0.5
[grid]
"stack.client" = ["naive", "stack"]
"#,
        launch_fixture()
    )
}

#[test]
fn a_bulkhead_that_refuses_a_slowdown_is_named_with_its_knob() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("slowdown.toml");
    std::fs::write(&file, slowdown("")).unwrap();
    let out = scratch.path().join("out");
    let output = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output).replace("\n    ", " ");
    assert!(
        text.contains("note: grid point 1: reply: its bulkhead refused")
            && text.contains("raise stack.bulkhead_slots.reply"),
        "{text}"
    );
    // Only the stack has a bulkhead, and only reply's is overrun.
    assert!(!text.contains("grid point 0:") && !text.contains("moderate: its bulkhead"), "{text}");
    let report = std::fs::read_to_string(out.join("slowdown/report.html")).unwrap();
    assert!(report.contains("<ul class=\"hints\"><li>grid point 1: reply: its bulkhead refused"), "the funnel's note");
    // Every knob a note recommends is one the scenario accepts (issue 72: a note said
    // stack.bulkhead_slots.reply_fallback, which was refused).
    let knobs: std::collections::BTreeSet<&str> = text
        .split(|c: char| c.is_whitespace() || c == '\'' || c == '`')
        .filter(|word| word.starts_with("stack.bulkhead_slots."))
        .map(|word| word.split('=').next().unwrap().trim_end_matches([',', '.', ';', ')']))
        .collect();
    assert!(knobs.contains("stack.bulkhead_slots.reply"), "{knobs:?}");
    for knob in knobs {
        let set = format!("{knob}=400");
        let output = stampede(&[
            "run",
            file.to_str().unwrap(),
            "--set",
            &set,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
            "--force",
        ]);
        assert!(output.status.success(), "{set}: {}", stderr(&output));
    }
    // The re-sent copy's bulkhead is a knob of its own.
    let output = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        "stack.bulkhead_slots.reply_fallback=12",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    // Told the slots a threefold slowdown needs, the note is gone.
    std::fs::write(&file, slowdown("bulkhead_slots = { reply = 400 }")).unwrap();
    let output = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--force"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stdout(&output).contains("its bulkhead refused"), "{}", stdout(&output));
}

/// The client's own output bucket (the quota gate's, at 90% headroom) must hold a
/// call too: 3,800 tokens fit sonnet's 4,000-token bucket but not the client's 3,600,
/// and the gate would refuse every answer locally while the provider would take it.
#[test]
fn a_call_the_client_quota_cannot_hold_is_refused_naming_the_headroom() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let mut args = vec!["run", "llm-stack", "--quiet", "--out", out.to_str().unwrap()];
    for set in ["tiers.sonnet.otpm=60000", "tiers.sonnet.output_burst_s=4.0", "classes.answer.max_tokens=3800"] {
        args.extend(["--set", set]);
    }
    let output = stampede(&args);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "classes.answer.max_tokens = 3800: more than the client quota's output bucket holds on tier sonnet (otpm \
             60000 × gateway.limiter_headroom 0.9 × 4 s of burst ÷ 60 = 3600 tokens)"
        ),
        "{}",
        stderr(&output)
    );
    assert!(files_below(scratch.path()).is_empty());
    // With the whole quota to itself, the client's bucket holds it.
    args.extend(["--set", "gateway.limiter_headroom=1.0", "--set", "run.replicas=1", "--no-report"]);
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_call_no_bucket_can_hold_is_refused_before_anything_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    // Issue 53's case: OTPM 60,000 with a 4 s burst holds 4,000 tokens; max_tokens 5,000.
    let sets = ["tiers.sonnet.otpm=60000", "tiers.sonnet.output_burst_s=4.0", "classes.answer.max_tokens=5000"];
    let mut args = vec!["run", "llm-stack", "--quiet", "--out", out.to_str().unwrap()];
    for set in &sets {
        args.extend(["--set", set]);
    }
    let output = stampede(&args);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "classes.answer.max_tokens = 5000: more than tier sonnet's output-token bucket holds (otpm 60000 × 4 s of \
             burst ÷ 60 = 4000 tokens)"
        ),
        "{}",
        stderr(&output)
    );
    assert!(files_below(scratch.path()).is_empty());
    // capacity refuses the same fixture with the same words.
    let fixture = scratch.path().join("small.toml");
    let text = stampede_scenario::models::gateway::fixture::DEFAULT_FIXTURE
        .replace("otpm = 1000000", "otpm = 60000\noutput_burst_s = 4.0")
        .replace("max_tokens = 2048", "max_tokens = 5000");
    std::fs::write(&fixture, text).unwrap();
    let output = stampede(&["capacity", "--fixture", fixture.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("classes.answer.max_tokens = 5000: more than tier sonnet's"),
        "{}",
        stderr(&output)
    );
}

/// The launch question is one command and one table: what 3× traffic costs per day
/// and how many answers come from the cheaper model (`scenario/fixtures/llm-launch-3x.toml`).
#[test]
fn the_launch_question_is_one_command_and_one_table() {
    let scratch = tempfile::tempdir().unwrap();
    let scenario = format!("{}/scenario/fixtures/llm-launch-3x.toml", env!("CARGO_MANIFEST_DIR"));
    let out = scratch.path().to_str().unwrap();
    let metrics = ["usd_per_day", "degraded_answer_ratio", "reply_fallback_served / reply_offered", "turn_p95_s"];
    let mut args = vec!["run", &scenario, "--replicas", "6", "--out", out, "--json"];
    for metric in &metrics {
        args.extend(["--metric", metric]);
    }
    let output = stampede(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = summary(&scratch.path().join("llm-launch-3x"));
    let mean = |metric: &str| summary.numbers(&format!("{metric}_mean")).unwrap();
    let per_day = mean("usd_per_day");
    // Today nothing is degraded; at 3x the smart tier's input meter binds and about a
    // tenth of the answers come from the fast tier (a replica's expression, averaged).
    assert_eq!(mean("degraded_answer_ratio")[0], 0.0);
    let (degraded, resent) = (mean("degraded_answer_ratio")[1], mean("reply_fallback_served / reply_offered")[1]);
    assert!(degraded > 0.05 && degraded < 0.2, "{degraded}");
    assert!((resent - degraded).abs() < 0.02, "each degraded answer is a re-sent reply: {resent} vs {degraded}");
    // Cheaper answers: 3x the turns costs less than 3x the money.
    let ratio = per_day[1] / per_day[0];
    assert!(ratio > 2.4 && ratio < 3.0, "{ratio}");
    // The table shows those rows, in that order, and says how many it left out.
    let mut args: Vec<&str> = args.into_iter().filter(|a| *a != "--json").collect();
    args.push("--force");
    let text = stdout(&stampede(&args));
    let rows: Vec<&str> =
        text.lines().filter_map(|l| metrics.iter().find(|m| l.starts_with(&m[..m.len().min(20)]))).copied().collect();
    assert_eq!(rows, metrics, "{text}");
    // A name that is not a metric is refused before anything runs.
    let bad = stampede(&["run", &scenario, "--out", out, "--metric", "usd_per_week"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--metric \"usd_per_week\": not a metric of model gateway"), "{}", stderr(&bad));
}

/// An expression of metrics is a metric wherever one is named: a claim, `optimize
/// --require`, `compare --metric`; computed per replica, so its interval is its own.
#[test]
fn metric_expressions_work_in_claims_requirements_and_compare() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("sum.toml");
    let claim =
        "\n[[verify]]\ngrid_point = 1\nmetric = \"useful_usd  +  wasted_usd\"\nstatistic = \"ci_lo\"\nat_least = 0.5\n\
                 note = \"the stack spends something\"\n[[verify]]\ngrid_point = 1\nmetric = \"wasted_usd - total_usd\"\n\
                 statistic = \"ci_hi\"\nat_most = 0.0\nnote = \"a difference: below 0, its interval not clipped there\"\n";
    std::fs::write(&file, slowdown("") + claim).unwrap();
    let out = scratch.path().join("a");
    let output = stampede(&["verify", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let summary = summary(&out.join("slowdown"));
    let (sum, total) =
        (summary.numbers("useful_usd + wasted_usd_mean").unwrap(), summary.numbers("total_usd_mean").unwrap());
    assert!(sum.iter().zip(&total).all(|(a, b)| (a - b).abs() <= 1e-9 * b), "{sum:?} vs {total:?}");
    let below = summary.numbers("wasted_usd - total_usd_ci_lo").unwrap();
    assert!(below.iter().all(|lo| *lo < 0.0), "a signed expression's interval: {below:?}");
    // A bad expression names the claim's field.
    std::fs::write(&file, slowdown("") + &claim.replace("wasted_usd\"", "wasted_dollars\"")).unwrap();
    let output = stampede(&["verify", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("verify[0].metric = \"useful_usd  +  wasted_dollars\": \"wasted_dollars\" is not a metric"),
        "{}",
        stderr(&output)
    );
    // compare: the same expression, per replica, on both sides (the same seed: no change).
    let b = scratch.path().join("b");
    std::fs::write(&file, slowdown("") + claim).unwrap();
    let output = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", b.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = stampede(&[
        "compare",
        out.join("slowdown").to_str().unwrap(),
        b.join("slowdown").to_str().unwrap(),
        "--json",
        "--metric",
        "turns_degraded / turns_answered",
        // Already a column (the claim's), and the first one again: each compared once.
        "--metric",
        "useful_usd + wasted_usd",
        "--metric",
        "turns_degraded / turns_answered",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let rows = answer["rows"].as_array().expect("rows");
    assert!(rows.iter().any(|r| r["metric"] == "turns_degraded / turns_answered"), "{answer}");
    for metric in ["turns_degraded / turns_answered", "useful_usd + wasted_usd"] {
        let listed = rows.iter().filter(|r| r["metric"] == metric && r["grid_point"] == 1).count();
        assert_eq!(listed, 1, "{metric} listed once: {answer}");
    }
    // optimize: a requirement on a sum.
    let output = stampede(&[
        "optimize",
        file.to_str().unwrap(),
        "--quiet",
        "--json",
        "--out",
        scratch.path().join("o").to_str().unwrap(),
        "--maximize",
        "turn_completion_ratio",
        "--require",
        "useful_usd + wasted_usd <= 1000",
        "--budget-replicas",
        "12",
        "--first-stage",
        "6",
    ]);
    assert!(matches!(output.status.code(), Some(0)), "{}{}", stdout(&output), stderr(&output));
    assert!(stdout(&output).contains("useful_usd + wasted_usd <= 1000"), "{}", stdout(&output));
}

/// The trace carries each call's tenant, tokens and bill: its attempts' bills add up
/// to the replica's spend.
#[test]
fn the_trace_has_tenant_token_and_cost_columns() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("slowdown.toml");
    std::fs::write(&file, slowdown("").replace("turns_per_s = 8.0", "turns_per_s = 8.0\ntenants = 2")).unwrap();
    let out = scratch.path().join("out");
    let output = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap(), "--trace", "0"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = out.join("slowdown");
    let trace = stampede_output::Table::read(&dir.join("trace.parquet")).unwrap();
    let replicas = stampede_output::Table::read(&dir.join("replicas.parquet")).unwrap();
    let counted: Vec<Option<bool>> = match trace.column("counted").unwrap() {
        stampede_output::ColumnValues::Bool(values) => values.clone(),
        other => panic!("counted is {:?}", other.kind()),
    };
    let (kinds, points) = (trace.strings("kind").unwrap(), trace.numbers("grid_point").unwrap());
    let (tenants, inputs, usd) =
        (trace.numbers("tenant").unwrap(), trace.numbers("input_tokens").unwrap(), trace.numbers("usd").unwrap());
    for point in [0.0, 1.0] {
        let calls: Vec<usize> = (0..kinds.len()).filter(|&i| kinds[i] == "call" && points[i] == point).collect();
        assert!(calls.iter().all(|&i| tenants[i] == 0.0 || tenants[i] == 1.0), "two tenants");
        assert!(calls.iter().any(|&i| tenants[i] == 1.0) && calls.iter().all(|&i| inputs[i] > 0.0));
        let billed: f64 = (0..kinds.len())
            .filter(|&i| kinds[i] == "attempt" && points[i] == point && counted[i] == Some(true))
            .map(|i| usd[i])
            .sum();
        let calls_billed: f64 = calls.iter().filter(|&&i| counted[i] == Some(true)).map(|&i| usd[i]).sum();
        let (rp, rr) = (replicas.numbers("grid_point").unwrap(), replicas.numbers("replica").unwrap());
        let row = (0..rp.len()).find(|&i| rp[i] == point && rr[i] == 0.0).unwrap();
        let total = replicas.numbers("total_usd").unwrap()[row];
        // Billionths of a dollar per attempt: rounding stays far below a cent.
        assert!((billed - total).abs() < 1e-6 * total.max(1.0), "point {point}: {billed} vs {total}");
        assert!((calls_billed - total).abs() < 1e-6 * total.max(1.0), "point {point}: {calls_billed} vs {total}");
    }
}

/// Issue 72: a refusal quoted `max_tokens = 830` where the class sets none — the
/// derived default, nothing the user wrote. It now says it is the default and how
/// it was derived.
#[test]
fn a_refusal_over_a_derived_max_tokens_says_it_is_the_default() {
    let scratch = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(launch_fixture()).unwrap();
    assert!(text.contains("max_tokens = 1200\n"), "the fixture's reply sets max_tokens");
    let fixture = scratch.path().join("launch.toml");
    let tight =
        text.replace("max_tokens = 1200\n", "").replace("otpm = 400000\n", "otpm = 6000\noutput_burst_s = 4.0\n");
    std::fs::write(&fixture, tight).unwrap();
    let file = scratch.path().join("scenario.toml");
    std::fs::write(
        &file,
        format!("name = \"tight\"\nmodel = \"gateway\"\n[run]\nhorizon_s = 60.0\nwarmup_s = 10.0\nreplicas = 1\nseed = 1\n[workload]\nturns_per_s = 1.0\nfixture = \"{}\"\n", fixture.display()),
    )
    .unwrap();
    let out = scratch.path().join("out");
    let output = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "classes.reply.max_tokens = 1000 (not set: the default, output_tokens' mean 400 + 4 × its sd 150): more \
             than tier smart's output-token bucket holds"
        ),
        "{}",
        stderr(&output)
    );
    assert!(!out.exists(), "nothing written");
}

/// Issue 72: an unknown fallback tier in the scenario's base was reported against grid
/// point 0, `stack.client = "naive"` — a client that never falls back. A value the
/// base holds and no grid value changes is said as the scenario's.
#[test]
fn a_base_value_at_fault_is_not_blamed_on_the_first_grid_point() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("fallback.toml");
    let text = format!(
        "name = \"fallback\"\nmodel = \"gateway\"\n[run]\nhorizon_s = 60.0\nwarmup_s = 10.0\nreplicas = 1\nseed = 1\n\
         [workload]\nturns_per_s = 1.0\nfixture = \"{}\"\n[stack]\nfallback_tiers = {{ reply = \"fastest\" }}\n\
         [grid]\n\"stack.client\" = [\"naive\", \"stack\"]\n",
        launch_fixture()
    );
    std::fs::write(&file, text).unwrap();
    let out = scratch.path().join("out");
    let output = stampede(&["run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("error: stack.fallback_tiers.reply = \"fastest\": no such tier; tiers: fast, smart"),
        "{message}"
    );
    assert!(!message.contains("grid point"), "{message}");
    // A value a grid point sets is still said against that point.
    let output = stampede(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        "stack.fallback_tiers.reply=fast",
        "--grid",
        "turns_per_s=[1.0, -1.0]",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("grid point "), "{}", stderr(&output));
}
