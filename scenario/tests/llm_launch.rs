//! The launch questions of issue 53 on `fixtures/llm-launch.toml`: a reply that falls
//! back to the fast tier starts that tier's prompt cache cold.

mod common;

use common::{mean, per_replica};

/// The launch product at 8 turns/s with the smart tier browned out (a quarter of its
/// calls fail) for most of the window; `reply` lines are added to its class.
fn brownout(reply: &str) -> String {
    format!(
        r#"name = "launch"
model = "gateway"
[run]
horizon_s = 120.0
warmup_s = 20.0
replicas = 4
seed = 3
[workload]
turns_per_s = 8.0
fixture = "{}/fixtures/llm-launch.toml"
[classes.reply]
{reply}
[[incidents]]
tier = "smart"
kind = "brownout"
start_s = 30.0
duration_s = 80.0
"#,
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn a_reply_resent_to_another_tier_meets_a_cold_prompt_cache() {
    let metrics = ["reply_offered", "reply_cache_hits", "reply_fallback_offered", "reply_fallback_cache_hits"];
    let rows = per_replica(&brownout(""), 4, &metrics);
    let sum = |i: usize| rows.iter().map(|r| r[i]).sum::<f64>();
    let (reply, reply_hits, resent, resent_hits) = (sum(0), sum(1), sum(2), sum(3));
    assert!(resent > 100.0, "the brownout re-sends replies: {resent}");
    assert!((reply_hits / reply - 0.7).abs() < 0.05, "the smart tier's cache: {reply_hits} of {reply}");
    assert_eq!(resent_hits, 0.0, "the fast tier has never seen the prefix");
    // Said otherwise, the copies hit at their own ratio.
    let rows = per_replica(&brownout("fallback_cache_hit_ratio = 0.4"), 4, &metrics);
    let share = mean(rows.iter().map(|r| r[3] / r[2]));
    assert!((share - 0.4).abs() < 0.06, "{share}");
}
