//! Issue 53's launch questions through the command line, on the product a platform
//! team wrote (`scenario/fixtures/llm-launch.toml`): what can never succeed is refused,
//! and a bulkhead that turns a slowdown into local refusals is named with its knob.

use crate::common::{files_below, stampede, stderr, stdout};

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
    // Told the slots a threefold slowdown needs, the note is gone.
    std::fs::write(&file, slowdown("bulkhead_slots = { reply = 400 }")).unwrap();
    let output = stampede(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap(), "--force"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stdout(&output).contains("its bulkhead refused"), "{}", stdout(&output));
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
