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
    let cases: [(&[&str], &str); 6] = [
        (&["--set", "stack.gates=[\"admission\", \"moat\"]"], "stack.gates"),
        (&["--set", "gateway.breaker_failure_ratio=1.5"], "gateway.breaker_failure_ratio = 1.5"),
        (&["--set", "gateway.breaker_counts_429s=true"], "breaker_counts_429s"),
        (&["--set", "stack.answer_fallback_tier=\"gpt\""], "no such tier; tiers: haiku, opus, sonnet"),
        (&["--set", "tiers.sonnet.server_slots=-3"], "tiers.sonnet.server_slots"),
        (&["--set", "classes.guard.tier=\"mistral\""], "classes.guard.tier = \"mistral\""),
    ];
    for (overrides, expected) in cases {
        let scratch = tempfile::tempdir().unwrap();
        let out = scratch.path().to_str().unwrap();
        let output = stampede(&[&["run", "llm-stack", "--quiet", "--out", out][..], overrides].concat());
        assert_eq!(output.status.code(), Some(2), "{overrides:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(expected), "{overrides:?}: {}", stderr(&output));
        assert!(files_below(scratch.path()).is_empty(), "{overrides:?} wrote something");
    }
}
