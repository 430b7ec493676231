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

/// Money and answers add up: per tenant (the hot one and the others, evenly), per
/// kind of answer (full or degraded), and per day at the simulated load.
#[test]
fn money_and_answers_add_up_by_tenant_and_by_kind_of_answer() {
    let text = brownout("").replace("turns_per_s = 8.0", "turns_per_s = 8.0\ntenants = 3\nhot_tenant_share = 0.5");
    let metrics = [
        "total_usd",
        "useful_usd",
        "wasted_usd",
        "turns_offered",
        "turns_answered",
        "turns_full",
        "turns_degraded",
        "usd_per_day",
        "usd_per_1k_answers",
        "tenant_0_turns_offered",
        "tenant_1_turns_offered",
        "tenant_2_turns_offered",
        "tenant_0_usd",
        "tenant_1_usd",
        "tenant_2_usd",
        "tenant_0_turns_answered",
        "tenant_1_turns_answered",
        "tenant_2_turns_answered",
        "turn_p50_s",
        "turn_p99_s",
        "tenant_0_usd_per_day",
        "tenant_1_usd_per_day",
        "tenant_2_usd_per_day",
    ];
    let rows = per_replica(&text, 4, &metrics);
    for r in &rows {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(close(r[0], r[1] + r[2]), "total = useful + wasted");
        assert_eq!(r[5] + r[6], r[4], "answered = full + degraded");
        assert!(r[6] > 0.0, "the brownout degrades some answers");
        assert!(close(r[7], r[0] / 100.0 * 86_400.0), "per day: the 100 s window scaled");
        assert!(close(r[8], r[0] / r[4] * 1000.0));
        assert_eq!(r[9] + r[10] + r[11], r[3], "every turn has a tenant");
        assert!(close(r[12] + r[13] + r[14], r[0]), "every dollar has a tenant");
        assert_eq!(r[15] + r[16] + r[17], r[4]);
        assert!(r[18] > 0.0 && r[19] >= r[18]);
        for t in 0..3 {
            assert!(close(r[20 + t], r[12 + t] / 100.0 * 86_400.0), "tenant {t}'s day: its window scaled");
        }
        assert!(close(r[20] + r[21] + r[22], r[7]), "every dollar of the day has a tenant");
    }
    // Tenant 0 sends half; the other two share the rest evenly.
    let offered = |i: usize| rows.iter().map(|r| r[i]).sum::<f64>();
    let total = offered(3);
    assert!((offered(9) / total - 0.5).abs() < 0.03, "{}", offered(9) / total);
    assert!((offered(10) / total - 0.25).abs() < 0.03 && (offered(11) / total - 0.25).abs() < 0.03);
}
