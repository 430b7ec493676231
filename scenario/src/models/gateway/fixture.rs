//! The LLM-gateway fixture: model tiers and their meters, call classes, the turn plan
//! and gateway defaults (`scenario/fixtures/llm-gateway.toml`, replaceable by the
//! user's own; `docs/src/llm-fixture.md` gives every field). [`Fixture::validate`] is the
//! one check of a fixture: `run`, `capacity` and the Sandbox all go through it.
//!
//! Invariants once validated: every name a class, a plan step or the ladder uses is
//! defined; fallback chains end; names are identifiers, so metric names built from
//! them are too.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use stampede_engine::policy::backoff::BackoffKind;
use stampede_engine::policy::Criticality;

use stampede_engine::components::distribution::Distribution;

use crate::base::error::{Error, Result};
use crate::base::typing::{parse_text, typed};
use crate::inputs::DistributionSpec;

/// The shipped fixture.
pub const DEFAULT_FIXTURE: &str = include_str!("../../../fixtures/llm-gateway.toml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    pub tiers: BTreeMap<String, Tier>,
    /// In the order written: the order of the metric blocks and latency histograms.
    pub classes: Classes,
    /// What a turn does; absent: every class in order, one after the other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnSection>,
    #[serde(default)]
    pub gateway: Gateway,
}

/// The call classes by name, in the order the fixture lists them.
pub type Classes = IndexMap<String, CallClass>;

/// `[turn]`: the steps of a turn, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnSection {
    pub steps: Vec<StepSpec>,
}

/// One step: a call (`call = …`) or a parallel group (`parallel = [{ call = … }, …]`),
/// in the foreground (the turn waits) or the background.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Vec<CallSpec>>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub background: bool,
}

/// One call of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    /// The class it calls.
    pub call: String,
    /// The share of turns that make it; absent: the class's `calls_per_turn` (at most 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// The class called for the turns the draw misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<String>,
    /// A failure the fallback does not answer fails the turn (default); false: the turn goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Made only when the earlier call of this class succeeded (or was served its fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<String>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A model tier: its three meters (per minute), speeds, prices and server slots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    pub rpm: u64,
    pub itpm: u64,
    pub otpm: u64,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    pub base_latency_s: f64,
    pub usd_per_mtok_in: f64,
    pub usd_per_mtok_out: f64,
    pub server_slots: u32,
    /// The healthy rate of 500s (the fixture spec's 0.002).
    #[serde(default = "default_error_rate")]
    pub error_rate: f64,
    /// Each meter's bucket holds this many seconds of its refill (the providers' rule: 60).
    #[serde(default = "default_burst")]
    pub burst_s: f64,
    /// The requests meter's own burst, seconds of refill; absent: `burst_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_burst_s: Option<f64>,
    /// The input-token meter's own burst; absent: `burst_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_burst_s: Option<f64>,
    /// The output-token meter's own burst; absent: `burst_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_burst_s: Option<f64>,
    /// The unloaded time to first token as measured (a distribution value: your own
    /// latencies), instead of `base_latency_s + input ÷ prefill_tokens_per_s` × jitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<DistributionSpec>,
    /// `ttft_s` read (see [`Fixture::read_inputs`]).
    #[serde(skip)]
    pub ttft: Option<Distribution>,
}

fn default_burst() -> f64 {
    60.0
}

fn default_error_rate() -> f64 {
    0.002
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokens {
    pub mean: f64,
    pub sd: f64,
}

/// Per-attempt timeouts, seconds; a field left out takes its default.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    pub connect: f64,
    pub first_token: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inter_token: Option<f64>,
    pub total: f64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: 2.0, first_token: 30.0, inter_token: None, total: 60.0 }
    }
}

/// What a failed call of the class becomes when the fallback gate is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Nothing answers it: the turn fails (unless the plan says the call is not required).
    TurnFails,
    /// Answered locally, and the turn goes on; the names say how (any one will do).
    Degrade,
    ServeFlagged,
    RawQuery,
    DeferToBatch,
    /// The shipped fixture's older spelling of `fallback = "answer"`.
    DowngradeToAnswer,
}

/// One kind of LLM call a turn makes. Only its tier and tokens are required.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallClass {
    pub tier: String,
    #[serde(default = "critical", with = "crate::base::names")]
    pub criticality: Criticality,
    /// The share of turns that make this call, where the plan gives a call of this
    /// class no probability of its own (values above 1 count as 1; absent: 1). Capacity
    /// counts the plan's calls, not this number (a warning says when they disagree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_turn: Option<f64>,
    pub input_tokens: Tokens,
    pub output_tokens: Tokens,
    /// Absent: the output mean plus four standard deviations, rounded up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub streamed: bool,
    #[serde(default = "default_deadline")]
    pub deadline_s: f64,
    #[serde(default)]
    pub timeouts_s: Timeouts,
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    #[serde(default = "turn_fails")]
    pub on_failure: OnFailure,
    /// The class called in this one's place when it fails (with the fallback gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The tier a failed call is re-sent to (with the fallback gate); its calls are
    /// the class `NAME_fallback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_tier: Option<String>,
    /// Fraction of the input that is a cacheable prefix.
    #[serde(default)]
    pub cacheable_prefix: f64,
    /// True when the input carries retrieved context (the "halve the context" lever).
    #[serde(default)]
    pub retrieval_context: bool,
    /// Share of calls whose cacheable prefix is a prompt-cache hit (simulated: the
    /// cached tokens are metered at `cache_read_itpm_weight` and billed at
    /// `cache_read_price_weight`). 0: no prompt caching.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_hit_ratio: f64,
    /// The hit ratio of the copy re-sent to another tier (`fallback_tier`): a prompt
    /// cache belongs to a model, so it starts cold (0) unless said otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fallback_cache_hit_ratio: f64,
    /// How the class waits between attempts: constant, exponential (no jitter),
    /// full_jitter, equal_jitter or decorrelated.
    #[serde(default = "full_jitter", with = "crate::base::names")]
    pub backoff: BackoffKind,
}

impl CallClass {
    /// The share of turns that make a call of this class where the plan gives none:
    /// `calls_per_turn`, at most 1 (absent: every turn).
    pub fn share(&self) -> f64 {
        self.calls_per_turn.unwrap_or(1.0).min(1.0)
    }

    /// `max_tokens`, or its default: the output mean plus four standard deviations.
    pub fn max_tokens(&self) -> u64 {
        self.max_tokens
            .unwrap_or_else(|| (self.output_tokens.mean + 4.0 * self.output_tokens.sd).ceil().max(1.0) as u64)
    }

    /// `max_tokens = N` as an error quotes it: with where it came from when the
    /// class does not set it (the derived default is nothing the user wrote).
    pub(crate) fn max_tokens_quoted(&self) -> String {
        match self.max_tokens {
            Some(given) => format!("max_tokens = {given}"),
            None => format!(
                "max_tokens = {} (not set: the default, output_tokens' mean {} + 4 × its sd {})",
                self.max_tokens(),
                self.output_tokens.mean,
                self.output_tokens.sd
            ),
        }
    }

    /// The class a failed call is replaced by (`fallback`, or the old
    /// `on_failure = "downgrade_to_answer"`'s answer).
    pub fn fallback_class(&self) -> Option<&str> {
        match (&self.fallback, self.on_failure) {
            (Some(class), _) => Some(class),
            (None, OnFailure::DowngradeToAnswer) => Some("answer"),
            _ => None,
        }
    }

    /// A failed call is answered some other way (another class, another tier, locally)
    /// when the fallback gate is on.
    pub fn has_fallback(&self) -> bool {
        self.on_failure != OnFailure::TurnFails || self.fallback.is_some() || self.fallback_tier.is_some()
    }
}

fn critical() -> Criticality {
    Criticality::Critical
}

fn default_deadline() -> f64 {
    60.0
}

fn default_attempts() -> u32 {
    2
}

fn turn_fails() -> OnFailure {
    OnFailure::TurnFails
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

fn full_jitter() -> BackoffKind {
    BackoffKind::FullJitter
}

/// `[gateway]`: the defaults of the gateway's policies. Every field has a default,
/// the shipped fixture's value (the ladder: nobody on it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Gateway {
    pub retry_budget_ratio: f64,
    pub backoff_base_s: f64,
    pub backoff_cap_s: f64,
    pub no_retry_past_delivered: f64,
    pub breaker_failure_ratio: f64,
    pub breaker_window_s: f64,
    pub breaker_minimum_calls: u32,
    pub breaker_open_s: f64,
    /// Each consecutive trip multiplies the open time by this (Resilience4j's
    /// exponential wait interval; 1 keeps it constant).
    pub breaker_open_multiplier: f64,
    /// The longest open time repeated trips grow to.
    pub breaker_max_open_s: f64,
    pub breaker_half_open_probes: u32,
    pub breaker_counts_429: bool,
    /// A 429's or 529's retry-after is a floor under the backoff; false: ignored.
    pub honour_retry_after: bool,
    pub bulkhead_queue: String,
    pub codel_target_s: f64,
    pub codel_interval_s: f64,
    pub limiter_headroom: f64,
    pub limiter_longest_wait_s: f64,
    pub fleet_instances: u32,
    pub coordinated_quota: bool,
    pub ladder_rungs: [f64; 4],
    /// The class each rung adds to what is refused: L1 refuses the first, L2 adds the
    /// second… A class not listed is never refused by the ladder.
    pub ladder_classes: Vec<String>,
    pub adaptive_kind: String,
    pub adaptive_initial_limit: u32,
    pub cache_read_itpm_weight: f64,
    /// A cached input token's price, as a share of the input price (Anthropic's
    /// cache reads: 0.1).
    pub cache_read_price_weight: f64,
}

impl Default for Gateway {
    fn default() -> Self {
        Gateway {
            retry_budget_ratio: 0.10,
            backoff_base_s: 1.0,
            backoff_cap_s: 20.0,
            no_retry_past_delivered: 0.80,
            breaker_failure_ratio: 0.30,
            breaker_window_s: 60.0,
            breaker_minimum_calls: 20,
            breaker_open_s: 20.0,
            // Resilience4j's `IntervalFunction.DEFAULT_MULTIPLIER`.
            breaker_open_multiplier: 1.5,
            breaker_max_open_s: 300.0,
            breaker_half_open_probes: 3,
            breaker_counts_429: false,
            honour_retry_after: true,
            bulkhead_queue: "lifo".into(),
            codel_target_s: 0.05,
            codel_interval_s: 1.0,
            limiter_headroom: 0.90,
            limiter_longest_wait_s: 2.0,
            fleet_instances: 12,
            coordinated_quota: true,
            ladder_rungs: [0.80, 0.88, 0.95, 1.0],
            ladder_classes: Vec::new(),
            adaptive_kind: "gradient".into(),
            adaptive_initial_limit: 40,
            cache_read_itpm_weight: 0.1,
            cache_read_price_weight: 0.1,
        }
    }
}

/// `gateway.ladder_classes`: at most four of `classes`, each once (a class is shed from
/// one rung on). The fixture's own and a scenario's override are both checked by it.
pub(crate) fn check_ladder(ladder: &[String], classes: &Classes) -> Result<()> {
    for (rung, name) in ladder.iter().enumerate() {
        if !classes.contains_key(name) || rung >= 4 {
            return Err(Error::bad_input(format!(
                "gateway.ladder_classes[{rung}] = {name:?}: must name one of the classes ({}), at most four",
                classes.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            )));
        }
        if let Some(first) = ladder[..rung].iter().position(|n| n == name) {
            return Err(Error::bad_input(format!(
                "gateway.ladder_classes[{rung}] = {name:?}: already on rung {} (gateway.ladder_classes[{first}]); \
                 a class is shed from one rung on",
                first + 1
            )));
        }
    }
    Ok(())
}

impl Fixture {
    /// Parses and checks a fixture; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Fixture> {
        let table = parse_text(text, origin)?;
        // A fixture's field is not a scenario's: its path is named plainly.
        let fixture: Fixture = typed(toml::Value::Table(table)).map_err(|mut e| {
            e.message = e.message.replacen("scenario field ", "", 1);
            e.context(origin)
        })?;
        fixture.validate().map_err(|e| e.context(origin))?;
        Ok(fixture)
    }

    /// The shipped fixture, or the file at `path`.
    pub fn load(path: Option<&str>) -> Result<Fixture> {
        match path {
            None => Fixture::parse(DEFAULT_FIXTURE, "the built-in fixture"),
            Some(path) => {
                let sealed = crate::inputs::sealed::read(std::path::Path::new(path))
                    .map_err(|e| Error { message: format!("cannot read fixture file {}", e.message), ..e })?;
                let text =
                    sealed.text().ok_or_else(|| Error::bad_input(format!("fixture file {path}: not UTF-8 text")))?;
                Fixture::parse(text, &format!("fixture file {path}"))
            }
        }
    }

    /// Reads each tier's measured `ttft_s` (files relative to the scenario's folder).
    pub fn read_inputs(&mut self) -> Result<()> {
        for (name, tier) in &mut self.tiers {
            tier.ttft = tier.ttft_s.as_ref().map(|spec| spec.resolve(&format!("tiers.{name}.ttft_s"))).transpose()?;
        }
        Ok(())
    }

    /// Checks ranges and cross-references: names, tiers, classes, fallbacks, the
    /// ladder and the turn plan. The one check `run`, `capacity` and the Sandbox share.
    pub fn validate(&self) -> Result<()> {
        if self.tiers.is_empty() || self.classes.is_empty() {
            return Err(Error::bad_input("a fixture needs at least one [tiers.NAME] and one [classes.NAME]"));
        }
        for (name, tier) in &self.tiers {
            check_name("tiers", name)?;
            tier.validate(name)?;
        }
        for (name, class) in &self.classes {
            check_name("classes", name)?;
            class.validate(name, &self.tiers, &self.classes)?;
        }
        for (name, class) in &self.classes {
            check_fits(name, class, &class.tier, &self.tiers[&class.tier], "tier")?;
            if let Some(tier) = &class.fallback_tier {
                check_fits(name, class, tier, &self.tiers[tier], "fallback_tier")?;
            }
        }
        self.check_fallback_chains()?;
        check_ladder(&self.gateway.ladder_classes, &self.classes)?;
        self.validate_turn()?;
        for name in self.resendable() {
            let copy = format!("{name}_fallback");
            if self.classes.contains_key(&copy) {
                return Err(Error::bad_input(format!(
                    "classes.{copy}: the name of class {name}'s calls re-sent to another tier; rename one of them"
                )));
            }
        }
        Ok(())
    }

    /// A fallback chain ends: following `fallback` from any class never comes back.
    fn check_fallback_chains(&self) -> Result<()> {
        for start in self.classes.keys() {
            let mut chain = vec![start.as_str()];
            let mut at = start.as_str();
            while let Some(next) = self.classes[at].fallback_class() {
                chain.push(next);
                if next == start {
                    return Err(Error::bad_input(format!(
                        "classes.{start}.fallback: a cycle ({}); a chain of fallbacks must end in a class \
                         that fails or is answered locally",
                        chain.join(" → ")
                    )));
                }
                if chain.len() > self.classes.len() {
                    break; // a cycle that does not pass through `start`: reported from its own classes
                }
                at = next;
            }
        }
        Ok(())
    }

    /// The turn's steps: `[turn]`'s, or every class in order, one after the other.
    pub fn steps(&self) -> Vec<(Vec<CallSpec>, bool)> {
        match &self.turn {
            Some(turn) => turn.steps.iter().map(|step| (step.calls(), step.background)).collect(),
            None => self.classes.keys().map(|name| (vec![CallSpec::of(name)], false)).collect(),
        }
    }

    /// Classes whose failure can fail a turn: named by a required foreground call, or
    /// the fallback of one.
    pub(crate) fn required_classes(&self) -> Vec<&str> {
        let mut reached: Vec<&str> = Vec::new();
        for (calls, background) in self.steps() {
            for call in calls.iter().filter(|call| !background && call.required != Some(false)) {
                for name in std::iter::once(&call.call).chain(&call.otherwise) {
                    let name = self.classes.get_key_value(name).expect("validated").0.as_str();
                    if !reached.contains(&name) {
                        reached.push(name);
                    }
                }
            }
        }
        let mut i = 0;
        while i < reached.len() {
            if let Some(next) = self.classes[reached[i]].fallback_class() {
                let next = self.classes.get_key_value(next).expect("validated").0.as_str();
                if !reached.contains(&next) {
                    reached.push(next);
                }
            }
            i += 1;
        }
        reached
    }

    /// Classes whose failed calls can be re-sent to another tier, in class order: each
    /// with a `fallback_tier`, and each whose failure would fail the turn with nothing
    /// else to answer it (a scenario's `stack.fallback_tiers` may give it one). Their
    /// re-sent calls are the class `NAME_fallback`, with metrics of their own.
    pub fn resendable(&self) -> Vec<&str> {
        let foreground = self.required_classes();
        self.classes
            .iter()
            .filter(|(name, c)| {
                let fails_turn = c.on_failure == OnFailure::TurnFails && foreground.contains(&name.as_str());
                c.fallback_class().is_none() && (c.fallback_tier.is_some() || fails_turn)
            })
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// `[turn]`: each step a call or a parallel group, every name a class, `needs` an
    /// earlier foreground call, probabilities shares, at most 32 calls, something to wait for.
    fn validate_turn(&self) -> Result<()> {
        let Some(turn) = &self.turn else { return Ok(()) };
        let classes = || self.classes.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
        let class = |at: &str, field: &str, name: &str| -> Result<()> {
            if self.classes.contains_key(name) {
                Ok(())
            } else {
                Err(Error::bad_input(format!("{at}.{field} = {name:?}: no such class; classes: {}", classes())))
            }
        };
        if turn.steps.is_empty() {
            return Err(Error::bad_input("turn.steps = []: list at least one call (a step is { call = \"CLASS\" })"));
        }
        let mut earlier: Vec<EarlierCall> = Vec::new();
        for (i, step) in turn.steps.iter().enumerate() {
            let at = format!("turn.steps[{i}]");
            step.check_shape(&at)?;
            for (j, call) in step.calls().iter().enumerate() {
                let at = if step.parallel.is_some() { format!("{at}.parallel[{j}]") } else { at.clone() };
                class(&at, "call", &call.call)?;
                if let Some(otherwise) = &call.otherwise {
                    class(&at, "otherwise", otherwise)?;
                }
                if let Some(p) = call.probability.filter(|p| !(0.0..=1.0).contains(p)) {
                    return Err(Error::bad_input(format!("{at}.probability = {p}: a share of turns, from 0 to 1")));
                }
                if let Some(needs) = &call.needs {
                    check_needs(&at, needs, &earlier, i)?;
                }
            }
            for call in step.calls() {
                let call_name = self.classes.get_key_value(&call.call).expect("checked").0.as_str();
                let otherwise =
                    call.otherwise.as_ref().map(|o| self.classes.get_key_value(o).expect("checked").0.as_str());
                earlier.push((call_name, otherwise, i, step.background));
            }
        }
        if earlier.len() > stampede_engine::models::gateway::TurnPlan::MAX_CALLS {
            return Err(Error::bad_input(format!(
                "turn.steps: {} calls; a turn plan has at most {}",
                earlier.len(),
                stampede_engine::models::gateway::TurnPlan::MAX_CALLS
            )));
        }
        if turn.steps.iter().all(|s| s.background) {
            return Err(Error::bad_input(
                "turn.steps: every step is in the background, so a turn would wait for nothing; \
                 make at least one step a foreground call (background = false)",
            ));
        }
        Ok(())
    }
}

/// A call of `class` can succeed on `tier` (reached through the class's `field`): its
/// `max_tokens` fits the tier's output-token bucket and its mean input the input-token
/// bucket. A call larger than a bucket is refused with a 429 every time, however long
/// it waits — the provider's meter never holds that much.
pub(crate) fn check_fits(name: &str, class: &CallClass, tier_name: &str, tier: &Tier, field: &str) -> Result<()> {
    let [_, input_bucket, output_bucket] = tier.bucket_capacities();
    let [_, input_burst, output_burst] = tier.bursts_s();
    let via = if field == "tier" { String::new() } else { format!(" (its {field})") };
    let max_tokens = class.max_tokens();
    if max_tokens as f64 > output_bucket.floor() {
        return Err(Error::bad_input(format!(
            "classes.{name}.{}: more than tier {tier_name}{via}'s output-token bucket holds \
             (otpm {} × {output_burst} s of burst ÷ 60 = {} tokens), so every {name} call there is refused with a \
             429; lower max_tokens or raise tiers.{tier_name}.output_burst_s",
            class.max_tokens_quoted(),
            tier.otpm,
            output_bucket.floor()
        )));
    }
    if class.input_tokens.mean > input_bucket.floor() {
        return Err(Error::bad_input(format!(
            "classes.{name}.input_tokens.mean = {}: more than tier {tier_name}{via}'s input-token bucket holds \
             (itpm {} × {input_burst} s of burst ÷ 60 = {} tokens), so most {name} calls there are refused with a \
             429; shorten the prompt or raise tiers.{tier_name}.input_burst_s",
            class.input_tokens.mean,
            tier.itpm,
            input_bucket.floor()
        )));
    }
    Ok(())
}

/// A tier's or class's name becomes part of metric names: a letter, then letters,
/// digits and underscores.
fn check_name(section: &str, name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if first && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Ok(());
    }
    Err(Error::bad_input(format!(
        "[{section}.{name:?}]: a name must be a letter followed by letters, digits and underscores \
         (it becomes part of metric names)"
    )))
}

/// A call a turn makes before a step: (class, otherwise, step, background).
type EarlierCall<'a> = (&'a str, Option<&'a str>, usize, bool);

/// `{at}.needs = needs` (at step `step`) names exactly one call of an earlier
/// foreground step: the turn has waited for it.
fn check_needs(at: &str, needs: &str, earlier: &[EarlierCall], step: usize) -> Result<()> {
    let matches: Vec<_> = earlier
        .iter()
        .filter(|(c, o, earlier_step, _)| (*c == needs || *o == Some(needs)) && *earlier_step < step)
        .collect();
    match matches.as_slice() {
        [] => Err(Error::bad_input(format!(
            "{at}.needs = {needs:?}: no call of that class in an earlier step (a call can need \
             only a call the turn has already waited for)"
        ))),
        [(.., true)] => Err(Error::bad_input(format!(
            "{at}.needs = {needs:?}: that call runs in the background, so the turn never \
             learns whether it succeeded"
        ))),
        [_] => Ok(()),
        _ => Err(Error::bad_input(format!(
            "{at}.needs = {needs:?}: the plan calls {needs} more than once before this step; \
             which one is meant is ambiguous"
        ))),
    }
}

impl StepSpec {
    /// A step is a call or a parallel group, and a group's calls carry their own
    /// probability, otherwise, required and needs.
    fn check_shape(&self, at: &str) -> Result<()> {
        match (&self.call, &self.parallel) {
            (Some(_), Some(_)) | (None, None) => Err(Error::bad_input(format!(
                "{at}: give either call = \"CLASS\" or parallel = [{{ call = \"CLASS\" }}, …]"
            ))),
            (None, Some(calls)) => {
                if calls.is_empty() {
                    return Err(Error::bad_input(format!("{at}.parallel = []: list the calls made together")));
                }
                let own = [
                    ("probability", self.probability.is_some()),
                    ("otherwise", self.otherwise.is_some()),
                    ("required", self.required.is_some()),
                    ("needs", self.needs.is_some()),
                ];
                match own.iter().find(|(_, given)| *given) {
                    Some((field, _)) => Err(Error::bad_input(format!(
                        "{at}.{field}: a parallel group takes it on each call inside `parallel`"
                    ))),
                    None => Ok(()),
                }
            }
            (Some(_), None) => Ok(()),
        }
    }

    /// The step's calls: its parallel group, or its one call.
    pub fn calls(&self) -> Vec<CallSpec> {
        match &self.parallel {
            Some(calls) => calls.clone(),
            None => vec![CallSpec {
                call: self.call.clone().unwrap_or_default(),
                probability: self.probability,
                otherwise: self.otherwise.clone(),
                required: self.required,
                needs: self.needs.clone(),
            }],
        }
    }
}

impl CallSpec {
    /// A call of `class` at the class's own share.
    pub fn of(class: &str) -> CallSpec {
        CallSpec { call: class.into(), probability: None, otherwise: None, required: None, needs: None }
    }
}

impl Tier {
    /// Each meter's burst, seconds of its refill: (requests, input, output).
    pub(crate) fn bursts_s(&self) -> [f64; 3] {
        [self.requests_burst_s, self.input_burst_s, self.output_burst_s].map(|b| b.unwrap_or(self.burst_s))
    }

    /// The tokens (or requests) each meter's full bucket holds: its per-minute limit ×
    /// its burst ÷ 60, as the provider builds it.
    pub(crate) fn bucket_capacities(&self) -> [f64; 3] {
        let [r, i, o] = self.bursts_s();
        [self.rpm as f64 * r / 60.0, self.itpm as f64 * i / 60.0, self.otpm as f64 * o / 60.0]
    }

    /// Rates and slots positive, the error rate a probability, prices not negative.
    fn validate(&self, name: &str) -> Result<()> {
        for (field, value) in [
            ("prefill_tokens_per_s", self.prefill_tokens_per_s),
            ("decode_tokens_per_s", self.decode_tokens_per_s),
            ("burst_s", self.burst_s),
            ("requests_burst_s", self.requests_burst_s.unwrap_or(1.0)),
            ("input_burst_s", self.input_burst_s.unwrap_or(1.0)),
            ("output_burst_s", self.output_burst_s.unwrap_or(1.0)),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::bad_input(format!("tiers.{name}.{field} = {value}: must be positive")));
            }
        }
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(Error::bad_input(format!(
                "tiers.{name}.error_rate = {}: must be a probability from 0 to 1",
                self.error_rate
            )));
        }
        if self.server_slots == 0 {
            return Err(Error::bad_input(format!("tiers.{name}.server_slots = 0: must be at least 1")));
        }
        for (field, value) in [
            ("base_latency_s", self.base_latency_s),
            ("usd_per_mtok_in", self.usd_per_mtok_in),
            ("usd_per_mtok_out", self.usd_per_mtok_out),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(Error::bad_input(format!("tiers.{name}.{field} = {value}: must be zero or more")));
            }
        }
        if self.rpm == 0 || self.itpm == 0 || self.otpm == 0 {
            return Err(Error::bad_input(format!("tiers.{name}: rpm, itpm and otpm must be positive")));
        }
        Ok(())
    }
}

impl CallClass {
    /// Its tier exists; tokens, attempts, deadlines and timeouts are in range; its
    /// fallback names another class or tier, and only one kind of fallback is given.
    fn validate(&self, name: &str, tiers: &BTreeMap<String, Tier>, classes: &Classes) -> Result<()> {
        if !tiers.contains_key(&self.tier) {
            let tiers: Vec<&str> = tiers.keys().map(String::as_str).collect();
            return Err(Error::bad_input(format!(
                "classes.{name}.tier = {:?}: no such tier; tiers: {}",
                self.tier,
                tiers.join(", ")
            )));
        }
        if !(self.input_tokens.mean > 0.0 && self.output_tokens.mean > 0.0) {
            return Err(Error::bad_input(format!("classes.{name}: token means must be positive")));
        }
        if self.max_attempts == 0 {
            return Err(Error::bad_input(format!("classes.{name}.max_attempts = 0: must be at least 1")));
        }
        let t = &self.timeouts_s;
        for (field, value) in [
            ("deadline_s", self.deadline_s),
            ("timeouts_s.connect", t.connect),
            ("timeouts_s.first_token", t.first_token),
            ("timeouts_s.total", t.total),
            ("timeouts_s.inter_token", t.inter_token.unwrap_or(1.0)),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::bad_input(format!(
                    "classes.{name}.{field} = {value}: must be a positive number of seconds"
                )));
            }
        }
        if !(self.input_tokens.sd >= 0.0 && self.output_tokens.sd >= 0.0) {
            return Err(Error::bad_input(format!("classes.{name}: token standard deviations must be zero or more")));
        }
        if self.max_tokens == Some(0) {
            return Err(Error::bad_input(format!("classes.{name}.max_tokens = 0: must be positive")));
        }
        if let Some(calls) = self.calls_per_turn.filter(|c| !(c.is_finite() && *c >= 0.0)) {
            return Err(Error::bad_input(format!("classes.{name}.calls_per_turn = {calls}: must be non-negative")));
        }
        for (field, ratio) in
            [("cache_hit_ratio", self.cache_hit_ratio), ("fallback_cache_hit_ratio", self.fallback_cache_hit_ratio)]
        {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(Error::bad_input(format!("classes.{name}.{field} = {ratio}: must be from 0 to 1")));
            }
        }
        if !(0.0..=1.0).contains(&self.cacheable_prefix) {
            return Err(Error::bad_input(format!(
                "classes.{name}.cacheable_prefix = {}: must be from 0 to 1",
                self.cacheable_prefix
            )));
        }
        self.validate_fallback(name, tiers, classes)
    }

    fn validate_fallback(&self, name: &str, tiers: &BTreeMap<String, Tier>, classes: &Classes) -> Result<()> {
        let kinds = [
            ("fallback", self.fallback.is_some()),
            ("fallback_tier", self.fallback_tier.is_some()),
            ("on_failure", self.on_failure != OnFailure::TurnFails),
        ];
        let given: Vec<&str> = kinds.iter().filter(|(_, given)| *given).map(|(field, _)| *field).collect();
        if given.len() > 1 {
            return Err(Error::bad_input(format!(
                "classes.{name}: {} are each a fallback; a failed call gets one (another class's call, \
                 the same call on another tier, or a local answer)",
                given.join(" and ")
            )));
        }
        if let Some(next) = self.fallback_class() {
            if next == name {
                return Err(Error::bad_input(format!(
                    "classes.{name}.fallback = {next:?}: a class cannot fall back to itself (max_attempts retries it)"
                )));
            }
            if !classes.contains_key(next) {
                let field = if self.fallback.is_some() { "fallback" } else { "on_failure" };
                return Err(Error::bad_input(format!(
                    "classes.{name}.{field}: falls back to class {next:?}, which the fixture does not define; \
                     classes: {}",
                    classes.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        if let Some(tier) = &self.fallback_tier {
            if !tiers.contains_key(tier) {
                return Err(Error::bad_input(format!(
                    "classes.{name}.fallback_tier = {tier:?}: no such tier; tiers: {}",
                    tiers.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        Ok(())
    }
}
