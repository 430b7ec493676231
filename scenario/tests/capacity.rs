//! `stampede capacity` agrees with the simulation: just below the sustainable rate it
//! prints, a run answers (almost) every turn; just above, the binding meter refuses and
//! turns fail. Checked for the shipped product (bound by think's output reservation)
//! and for a product with a parallel step, prompt caching and a background call
//! (`fixtures/llm-launch.toml`, bound by the fast tier's requests, which its two
//! parallel embedding calls double).
//!
//! The stack here is the retry loop alone: the provider's meters decide, not the
//! client's own gates (the ladder sheds from 80% of a meter by design, before it binds).

mod common;

use common::{mean, per_replica};
use stampede_scenario::models::gateway::capacity::analyse;
use stampede_scenario::models::gateway::fixture::Fixture;

const REPLICAS: u64 = 8;

/// The turn completion ratio and `class`'s unserved ratio, each the mean over the
/// replicas, at `turns_per_s` with the fixture at `fixture` (None: the shipped one).
fn run_at(fixture: Option<&str>, tiers: &str, turns_per_s: f64, horizon_s: f64, class: &str) -> (f64, f64) {
    let fixture_line = fixture.map_or(String::new(), |path| format!("fixture = {path:?}\n"));
    let text = format!(
        "name = \"capacity\"\nmodel = \"gateway\"\n[run]\nhorizon_s = {horizon_s}\nwarmup_s = {}\nseed = 5\nreplicas = {REPLICAS}\n\
         [workload]\nturns_per_s = {turns_per_s}\n{fixture_line}[stack]\ngates = [\"retry\"]\n{tiers}",
        horizon_s / 4.0
    );
    let unserved = format!("{class}_unserved_ratio");
    let rows = per_replica(&text, REPLICAS, &["turn_completion_ratio", &unserved]);
    (mean(rows.iter().map(|r| r[0])), mean(rows.iter().map(|r| r[1])))
}

fn launch_path() -> String {
    format!("{}/fixtures/llm-launch.toml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_shipped_products_sustainable_rate_is_where_the_run_starts_to_fail() {
    let report = analyse(&Fixture::load(None).unwrap(), 1.0);
    assert!(report.limited_by.starts_with("tier opus (server slots"), "{}", report.limited_by);
    let rate = report.sustainable_turns_rps;
    assert!((rate - 6.61).abs() < 0.01, "{rate}");
    let (below, think_below) = run_at(None, "", 0.95 * rate, 900.0, "think");
    let (above, think_above) = run_at(None, "", 1.2 * rate, 900.0, "think");
    // Think is 8% of turns: its calls show the knee, the turns a fraction of it.
    assert!(below >= 0.99 && think_below < 0.02, "just below: {below} answered, think unserved {think_below}");
    assert!(
        think_above > 0.05 && think_above > 4.0 * think_below && above < below,
        "just above: {above} answered, think unserved {think_above} (below: {think_below})"
    );
}

#[test]
fn a_parallel_step_caching_and_a_background_call_are_counted_as_the_run_makes_them() {
    let fixture = Fixture::load(Some(&launch_path())).unwrap();
    let report = analyse(&fixture, 1.0);
    let calls = |name: &str| report.classes.iter().find(|c| c.class == name).unwrap().calls_per_turn;
    // Two embedding calls a turn (one parallel step lists it twice); the background
    // summary counts; a healthy smart tier re-sends almost no reply.
    assert_eq!((calls("embed"), calls("summarize"), calls("moderate")), (2.0, 1.0, 1.0));
    assert!(calls("reply_fallback") < 1e-5, "{}", calls("reply_fallback"));
    // The fast tier's 3000 RPM over 4 requests a turn (moderate, 2 embed, summarize);
    // counting one call per class said 16.7, and ignoring the reply's 70% prompt-cache
    // hits made the smart tier's ITPM bind at 8.3.
    assert!(report.limited_by.starts_with("tier fast (RPM"), "{}", report.limited_by);
    let rate = report.sustainable_turns_rps;
    assert!((rate - 3000.0 / 60.0 / 4.0 / 1.002).abs() < 0.01, "{rate}");
    let reply = report.classes.iter().find(|c| c.class == "reply").unwrap();
    assert!((reply.itpm_rps - 2e6 / 60.0 / (4000.0 * (1.0 - 0.7 * 0.6 * 0.9))).abs() < 0.01, "{}", reply.itpm_rps);
    // Buckets of 10 s of refill: the starting burst is spent within the warm-up.
    let tiers = "[tiers.fast]\nburst_s = 10.0\n[tiers.smart]\nburst_s = 10.0\n";
    let path = launch_path();
    let (below, _) = run_at(Some(&path), tiers, 0.95 * rate, 400.0, "embed");
    let (above, embed_above) = run_at(Some(&path), tiers, 1.15 * rate, 400.0, "embed");
    assert!(below >= 0.99, "just below: {below} answered");
    assert!(above < 0.95 && embed_above > 0.01, "just above: {above} answered, embed unserved {embed_above}");
}
