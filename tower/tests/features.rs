//! The tests that build stacks from scenario files (`scenario.rs`, `sim_vs_real.rs`,
//! `sim_vs_real_stream.rs`, and the gateway case of `allocation.rs`) need the
//! `scenario` feature, whose parser brings the simulator's output stack (Parquet,
//! Arrow, rayon): `cargo test -p stampede-tower` builds without it in a few minutes,
//! and says here what it left out — never a silent pass. The workspace's test command
//! (README, `.ci/run`) turns it on.

#[cfg(not(feature = "scenario"))]
#[test]
fn the_scenario_tests_need_the_scenario_feature() {
    eprintln!(
        "skipped: tower/tests/scenario.rs, sim_vs_real.rs, sim_vs_real_stream.rs and allocation.rs's gateway case \
         need the scenario feature; run: cargo test -p stampede-tower --features scenario"
    );
}

#[cfg(feature = "scenario")]
#[test]
fn the_scenario_tests_are_built() {
    // Their files are compiled in, and a scenario builds a stack.
    assert!(stampede_tower::gateway_from_scenario("llm-stack", Some(1), 1).is_ok());
}
