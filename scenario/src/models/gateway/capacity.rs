//! `stampede capacity`: the LLM gateway's arithmetic, no simulation.
//!
//! For each call class, the sustained request rate each meter allows (with and
//! without reconciling the output reservation), the binding meter, the unloaded
//! service time, the in-flight cap that reserving `max_tokens` imposes (OTPM bucket ÷
//! max_tokens) and its throughput tax, and the Little's-law pool size. Then the turns
//! per second the whole product can sustain — the tightest of every class alone and of
//! every tier's meters shared by the classes on it — the gap to a target, and what
//! each lever buys.

use serde_json::{json, Value};

use super::fixture::{CallClass, Fixture, Tier};

/// Φ⁻¹(0.97): the p97 of a normal is mean + 1.8808 sd.
const Z_97: f64 = 1.880_793_608_151_251;

/// What limits a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Rpm,
    Itpm,
    Otpm,
    /// The in-flight cap from holding `max_tokens` of the OTPM bucket per call.
    OtpmReservation,
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::Rpm => "RPM",
            Binding::Itpm => "ITPM",
            Binding::Otpm => "OTPM",
            Binding::OtpmReservation => "OTPM reservation",
        }
    }
}

/// One class on its tier, alone.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassCapacity {
    pub class: String,
    pub tier: String,
    pub rpm_rps: f64,
    pub itpm_rps: f64,
    /// Output meter with reconciliation (charged the real output).
    pub otpm_rps: f64,
    /// Output meter without reconciliation (charged max_tokens).
    pub otpm_unreconciled_rps: f64,
    pub sustained_rps: f64,
    pub binding: Binding,
    pub service_s: f64,
    /// OTPM bucket ÷ max_tokens.
    pub in_flight_cap: f64,
    pub reservation_rps: f64,
    pub effective_rps: f64,
    pub effective_binding: Binding,
    /// Fraction of the sustained rate the reservation cap takes away.
    pub reservation_tax_ratio: f64,
    /// Little's law: effective rate × service time.
    pub pool_size: f64,
    pub calls_per_turn: f64,
}

/// One tier's meter shared by every class on it.
#[derive(Clone, Debug, PartialEq)]
pub struct TierBound {
    pub tier: String,
    pub binding: Binding,
    pub turns_rps: f64,
}

/// A lever and what it buys.
#[derive(Clone, Debug, PartialEq)]
pub struct Lever {
    pub name: &'static str,
    pub turns_rps: f64,
    pub multiplier: f64,
}

/// The whole arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityReport {
    pub classes: Vec<ClassCapacity>,
    pub tiers: Vec<TierBound>,
    pub sustainable_turns_rps: f64,
    /// Which class (or "tier: meter") sets it.
    pub limited_by: String,
    pub target_turns_rps: f64,
    pub gap: f64,
    pub levers: Vec<Lever>,
}

fn service_s(tier: &Tier, class: &CallClass) -> f64 {
    // A measured time to first token replaces the formula's (its mean).
    let first_token = match &tier.ttft {
        Some(ttft) => ttft.mean_s(),
        None => tier.base_latency_s + class.input_tokens.mean / tier.prefill_tokens_per_s,
    };
    first_token + class.output_tokens.mean / tier.decode_tokens_per_s
}

/// Input tokens as the ITPM meter counts them (cached prefix at its weight).
fn metered_input(class: &CallClass, caching: Option<f64>) -> f64 {
    match caching {
        None => class.input_tokens.mean,
        Some(weight) => class.input_tokens.mean * (1.0 - class.cacheable_prefix * (1.0 - weight)),
    }
}

/// A meter a load over-asks: how long its full bucket lasts.
#[derive(Clone, Debug, PartialEq)]
pub struct BurstDrain {
    pub tier: String,
    pub meter: Binding,
    /// Asked per minute at the load, and the meter's refill per minute.
    pub asked_per_minute: f64,
    pub limit_per_minute: f64,
    /// Seconds until the bucket (burst_s of refill) is empty: burst_s × limit ÷ (asked − limit).
    pub drain_s: f64,
}

/// Every RPM/ITPM/OTPM meter that `turns_per_s` asks more of than it refills (output
/// counted as produced, the reservation's slack handed back), with how long the bucket's
/// starting burst lasts. Until then the provider admits more than its quota sustains.
pub fn burst_drains(fixture: &Fixture, turns_per_s: f64) -> Vec<BurstDrain> {
    let mut drains = Vec::new();
    for (tier_name, tier) in &fixture.tiers {
        let on_tier: Vec<&CallClass> = fixture.classes.values().filter(|c| &c.tier == tier_name).collect();
        let per_minute = |f: &dyn Fn(&CallClass) -> f64| {
            60.0 * turns_per_s * on_tier.iter().map(|c| c.calls_per_turn * f(c)).sum::<f64>()
        };
        for (meter, asked, limit) in [
            (Binding::Rpm, per_minute(&|_| 1.0), tier.rpm as f64),
            (Binding::Itpm, per_minute(&|c| metered_input(c, None)), tier.itpm as f64),
            (Binding::Otpm, per_minute(&|c| c.output_tokens.mean), tier.otpm as f64),
        ] {
            if asked > limit {
                let drain_s = tier.burst_s * limit / (asked - limit);
                drains.push(BurstDrain {
                    tier: tier_name.clone(),
                    meter,
                    asked_per_minute: asked,
                    limit_per_minute: limit,
                    drain_s,
                });
            }
        }
    }
    drains
}

fn class_capacity(name: &str, class: &CallClass, tier: &Tier, caching: Option<f64>) -> ClassCapacity {
    let rpm_rps = tier.rpm as f64 / 60.0;
    let itpm_rps = tier.itpm as f64 / 60.0 / metered_input(class, caching);
    let otpm_rps = tier.otpm as f64 / 60.0 / class.output_tokens.mean;
    let otpm_unreconciled_rps = tier.otpm as f64 / 60.0 / class.max_tokens() as f64;
    let (sustained_rps, binding) = [(rpm_rps, Binding::Rpm), (itpm_rps, Binding::Itpm), (otpm_rps, Binding::Otpm)]
        .into_iter()
        .fold((f64::INFINITY, Binding::Rpm), |best, candidate| if candidate.0 < best.0 { candidate } else { best });
    let service = service_s(tier, class);
    let in_flight_cap = tier.otpm as f64 / class.max_tokens() as f64;
    let reservation_rps = in_flight_cap / service;
    let (effective_rps, effective_binding) = if reservation_rps < sustained_rps {
        (reservation_rps, Binding::OtpmReservation)
    } else {
        (sustained_rps, binding)
    };
    ClassCapacity {
        class: name.to_string(),
        tier: class.tier.clone(),
        rpm_rps,
        itpm_rps,
        otpm_rps,
        otpm_unreconciled_rps,
        sustained_rps,
        binding,
        service_s: service,
        in_flight_cap,
        reservation_rps,
        effective_rps,
        effective_binding,
        reservation_tax_ratio: 1.0 - effective_rps / sustained_rps,
        pool_size: effective_rps * service,
        calls_per_turn: class.calls_per_turn,
    }
}

/// Sustainable turns per second of `fixture`, with what limits it.
fn sustainable(fixture: &Fixture, caching: Option<f64>) -> (Vec<ClassCapacity>, Vec<TierBound>, f64, String) {
    let classes: Vec<ClassCapacity> = fixture
        .classes
        .iter()
        .map(|(name, class)| class_capacity(name, class, &fixture.tiers[&class.tier], caching))
        .collect();
    let mut best = (f64::INFINITY, String::new());
    for c in classes.iter().filter(|c| c.calls_per_turn > 0.0) {
        let turns = c.effective_rps / c.calls_per_turn;
        if turns < best.0 {
            best = (turns, format!("{} ({})", c.class, c.effective_binding.name()));
        }
    }
    let mut tiers = Vec::new();
    for (tier_name, tier) in &fixture.tiers {
        let on_tier: Vec<&CallClass> = fixture.classes.values().filter(|c| &c.tier == tier_name).collect();
        if on_tier.is_empty() {
            continue;
        }
        let per_turn = |f: &dyn Fn(&CallClass) -> f64| on_tier.iter().map(|c| c.calls_per_turn * f(c)).sum::<f64>();
        let bounds = [
            (Binding::Rpm, tier.rpm as f64 / 60.0 / per_turn(&|_| 1.0)),
            (Binding::Itpm, tier.itpm as f64 / 60.0 / per_turn(&|c| metered_input(c, caching))),
            (Binding::Otpm, tier.otpm as f64 / 60.0 / per_turn(&|c| c.output_tokens.mean)),
            (Binding::OtpmReservation, tier.otpm as f64 / per_turn(&|c| service_s(tier, c) * c.max_tokens() as f64)),
        ];
        for (binding, turns_rps) in bounds {
            if turns_rps < best.0 {
                best = (turns_rps, format!("tier {tier_name} ({}, shared)", binding.name()));
            }
            tiers.push(TierBound { tier: tier_name.clone(), binding, turns_rps });
        }
    }
    (classes, tiers, best.0, best.1)
}

/// The hit ratio of the whole-response cache lever: answered from the cache, a call
/// never reaches the provider (semantic caches report 10–30% on repeated traffic).
pub const RESPONSE_CACHE_HIT_RATIO: f64 = 0.2;

/// Runs the arithmetic for `fixture` against `target_turns_rps`.
pub fn analyse(fixture: &Fixture, target_turns_rps: f64) -> CapacityReport {
    let (classes, tiers, baseline, limited_by) = sustainable(fixture, None);
    let lever = |name: &'static str, changed: Fixture, caching: Option<f64>| {
        let turns = sustainable(&changed, caching).2;
        Lever { name, turns_rps: turns, multiplier: turns / baseline }
    };
    let mut p97 = fixture.clone();
    for class in p97.classes.values_mut() {
        class.max_tokens = Some((class.output_tokens.mean + Z_97 * class.output_tokens.sd).ceil() as u64);
    }
    let mut halved = fixture.clone();
    for class in halved.classes.values_mut().filter(|c| c.retrieval_context) {
        class.input_tokens.mean *= 0.5;
    }
    let mut more_rpm = fixture.clone();
    more_rpm.tiers.values_mut().for_each(|t| t.rpm *= 2);
    let mut bigger = fixture.clone();
    bigger.tiers.values_mut().for_each(|t| {
        t.rpm *= 2;
        t.itpm *= 2;
        t.otpm *= 2;
    });
    // A whole-response cache answers a share of calls without the provider: every
    // class sends that much less.
    let mut response_cache = fixture.clone();
    response_cache.classes.values_mut().for_each(|c| c.calls_per_turn *= 1.0 - RESPONSE_CACHE_HIT_RATIO);
    let levers = vec![
        Lever { name: "baseline", turns_rps: baseline, multiplier: 1.0 },
        lever("max_tokens sized to the p97 of observed output", p97, None),
        lever("halve the retrieved context", halved, None),
        lever(
            "prompt caching (cached prefix at cache_read_itpm_weight)",
            fixture.clone(),
            Some(fixture.gateway.cache_read_itpm_weight),
        ),
        lever("double every tier's RPM", more_rpm, None),
        lever("a bigger tier (2x every meter)", bigger, None),
        lever("a whole-response cache answering 20% of calls", response_cache, None),
    ];
    CapacityReport {
        classes,
        tiers,
        sustainable_turns_rps: baseline,
        limited_by,
        target_turns_rps,
        gap: target_turns_rps / baseline,
        levers,
    }
}

impl CapacityReport {
    /// The terminal table; the class and tier columns as wide as the longest name.
    pub fn render(&self) -> String {
        let class_w = self.classes.iter().map(|c| c.class.len()).max().unwrap_or(0).max(8);
        let tier_w = self.classes.iter().map(|c| c.tier.len()).max().unwrap_or(0).max(7);
        let mut out = format!(
            "{:<class_w$} {:<tier_w$} RPM req/s  ITPM req/s  OTPM req/s (unreconciled)  binding                          service s  in-flight cap  effective req/s  tax    pool\n",
            "class", "tier"
        );
        for c in &self.classes {
            out.push_str(&format!(
                "{:<class_w$} {:<tier_w$} {:>9.2}  {:>10.2}  {:>10.2} ({:>8.2})        {:<32} {:>9.2}  {:>13.0}  {:>15.2}  {:>4.0}%  {:>6.1}\n",
                c.class,
                c.tier,
                c.rpm_rps,
                c.itpm_rps,
                c.otpm_rps,
                c.otpm_unreconciled_rps,
                if c.effective_binding == c.binding {
                    c.binding.name().to_string()
                } else {
                    format!("{}, then {}", c.binding.name(), c.effective_binding.name())
                },
                c.service_s,
                c.in_flight_cap.floor(),
                c.effective_rps,
                c.reservation_tax_ratio * 100.0,
                c.pool_size
            ));
        }
        out.push_str(&format!(
            "\nsustainable: {:.2} turns/s, limited by {}; target {} turns/s is {:.0}x that\n\nlevers:\n",
            self.sustainable_turns_rps, self.limited_by, self.target_turns_rps, self.gap
        ));
        for lever in &self.levers {
            out.push_str(&format!(
                "  {:<58} {:>7.2} turns/s  {:>5.2}x\n",
                lever.name, lever.turns_rps, lever.multiplier
            ));
        }
        out
    }

    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        json!({
            "classes": self.classes.iter().map(|c| json!({
                "class": c.class, "tier": c.tier,
                "rpm_rps": c.rpm_rps, "itpm_rps": c.itpm_rps, "otpm_rps": c.otpm_rps,
                "otpm_unreconciled_rps": c.otpm_unreconciled_rps,
                "sustained_rps": c.sustained_rps, "binding": c.binding.name(),
                "service_s": c.service_s, "in_flight_cap": c.in_flight_cap,
                "reservation_rps": c.reservation_rps, "effective_rps": c.effective_rps,
                "effective_binding": c.effective_binding.name(),
                "reservation_tax_ratio": c.reservation_tax_ratio, "pool_size": c.pool_size,
            })).collect::<Vec<_>>(),
            "tiers": self.tiers.iter().map(|t| json!({"tier": t.tier, "meter": t.binding.name(), "turns_rps": t.turns_rps})).collect::<Vec<_>>(),
            "sustainable_turns_rps": self.sustainable_turns_rps,
            "limited_by": self.limited_by,
            "target_turns_rps": self.target_turns_rps,
            "gap": self.gap,
            "levers": self.levers.iter().map(|l| json!({"lever": l.name, "turns_rps": l.turns_rps, "multiplier": l.multiplier})).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> CapacityReport {
        analyse(&Fixture::load(None).unwrap(), 1000.0)
    }

    fn class<'a>(r: &'a CapacityReport, name: &str) -> &'a ClassCapacity {
        r.classes.iter().find(|c| c.class == name).unwrap()
    }

    fn two(x: f64) -> String {
        format!("{x:.2}")
    }

    /// A tier's measured time to first token enters the service time (and so the
    /// pool sizes) by its mean; the formula's base + input ÷ prefill is gone.
    #[test]
    fn a_measured_time_to_first_token_enters_by_its_mean() {
        let mut fixture = Fixture::load(None).unwrap();
        let formula = class(&analyse(&fixture, 1.0), "answer").service_s;
        let answer = fixture.classes["answer"].clone();
        let opus = fixture.tiers.get_mut(&answer.tier).unwrap();
        let (decode, opus_formula_ttft) = (
            answer.output_tokens.mean / opus.decode_tokens_per_s,
            opus.base_latency_s + answer.input_tokens.mean / opus.prefill_tokens_per_s,
        );
        assert!((formula - (opus_formula_ttft + decode)).abs() < 1e-9);
        let text = "dist = \"lognormal\"\nmedian_s = 1.5\nsigma = 0.4";
        opus.ttft_s = Some(toml::from_str(text).unwrap());
        fixture.read_inputs().unwrap();
        let measured = class(&analyse(&fixture, 1.0), "answer").service_s;
        let mean = 1.5 * (0.4f64 * 0.4 / 2.0).exp();
        assert!((measured - (mean + decode)).abs() < 1e-9, "{measured} vs {}", mean + decode);
    }

    /// The fixture spec's table, digit for digit.
    #[test]
    fn reproduces_the_fixture_table() {
        let r = report();
        for (name, limit, binding) in [
            ("guard", "66.67", Binding::Rpm),
            ("rewrite", "66.67", Binding::Rpm),
            ("answer", "21.51", Binding::Itpm),
            ("think", "0.98", Binding::Itpm),
            ("title", "41.67", Binding::Itpm),
        ] {
            let c = class(&r, name);
            assert_eq!(two(c.sustained_rps), limit, "{name}");
            assert_eq!(c.binding, binding, "{name}");
        }
        let think = class(&r, "think");
        assert_eq!(two(think.effective_rps), "0.56");
        assert_eq!(think.effective_binding, Binding::OtpmReservation);
        assert_eq!(think.in_flight_cap.floor(), 39.0);
        for name in ["guard", "rewrite", "answer", "title"] {
            assert_eq!(class(&r, name).effective_binding, class(&r, name).binding, "{name}: no reservation tax");
        }
        assert_eq!(two(r.sustainable_turns_rps), "6.94");
        assert!(r.limited_by.starts_with("think"));
        assert_eq!(format!("{:.0}", r.gap), "144");
        let p97 = &r.levers[1];
        assert_eq!(two(p97.turns_rps), "12.25");
        assert_eq!(two(p97.multiplier), "1.77");
        let answer = class(&r, "answer");
        assert_eq!(format!("{:.1}", answer.otpm_unreconciled_rps), "8.1");
        assert_eq!(format!("{:.1}", answer.otpm_rps), "32.1");
        // Relieving a meter that does not bind buys nothing.
        assert_eq!(two(r.levers[4].multiplier), "1.00");
        // Every class sends 20% fewer calls: every meter's bound rises by 1/0.8.
        assert_eq!(two(r.levers[6].multiplier), "1.25");
    }

    #[test]
    fn a_bad_fixture_names_the_field() {
        let text = DEFAULT.replace("tier = \"opus\"", "tier = \"gpt\"");
        let error = Fixture::parse(&text, "test").unwrap_err();
        assert!(error.message.contains("classes.think.tier = \"gpt\": no such tier"), "{}", error.message);
    }

    const DEFAULT: &str = super::super::fixture::DEFAULT_FIXTURE;
}
