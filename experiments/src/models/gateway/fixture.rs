//! The LLM-gateway fixture: model tiers and their meters, call classes, gateway
//! defaults (`experiments/fixtures/llm-gateway.toml`, replaceable by the user's own).

use std::collections::BTreeMap;

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
    pub classes: BTreeMap<String, CallClass>,
    pub gateway: Gateway,
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

fn default_ladder_classes() -> Vec<String> {
    ["title", "rewrite", "think", "answer"].map(String::from).to_vec()
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokens {
    pub mean: f64,
    pub sd: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    pub connect: f64,
    pub first_token: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_token: Option<f64>,
    pub total: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    ServeFlagged,
    RawQuery,
    TurnFails,
    DowngradeToAnswer,
    DeferToBatch,
}

/// One kind of LLM call a turn makes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallClass {
    pub tier: String,
    #[serde(with = "crate::base::names")]
    pub criticality: Criticality,
    pub calls_per_turn: f64,
    pub input_tokens: Tokens,
    pub output_tokens: Tokens,
    pub max_tokens: u64,
    pub streamed: bool,
    pub deadline_s: f64,
    pub timeouts_s: Timeouts,
    pub max_attempts: u32,
    pub on_failure: OnFailure,
    /// Fraction of the input that is a cacheable prefix.
    pub cacheable_prefix: f64,
    /// True when the input carries retrieved context (the "halve the context" lever).
    pub retrieval_context: bool,
    /// Share of calls whose cacheable prefix is a prompt-cache hit (simulated: the
    /// cached tokens are metered at `cache_read_itpm_weight` and billed at
    /// `cache_read_price_weight`). 0: no prompt caching.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_hit_ratio: f64,
    /// How the class waits between attempts: constant, exponential (no jitter),
    /// full_jitter, equal_jitter or decorrelated.
    #[serde(default = "full_jitter", with = "crate::base::names")]
    pub backoff: BackoffKind,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

fn full_jitter() -> BackoffKind {
    BackoffKind::FullJitter
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
    #[serde(default = "default_open_multiplier")]
    pub breaker_open_multiplier: f64,
    /// The longest open time repeated trips grow to.
    #[serde(default = "default_max_open")]
    pub breaker_max_open_s: f64,
    pub breaker_half_open_probes: u32,
    pub breaker_counts_429: bool,
    /// A 429's or 529's retry-after is a floor under the backoff; false: ignored.
    #[serde(default = "default_honour_retry_after")]
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
    #[serde(default = "default_ladder_classes")]
    pub ladder_classes: Vec<String>,
    pub adaptive_kind: String,
    pub adaptive_initial_limit: u32,
    pub cache_read_itpm_weight: f64,
    /// A cached input token's price, as a share of the input price (Anthropic's
    /// cache reads: 0.1).
    #[serde(default = "default_cache_price")]
    pub cache_read_price_weight: f64,
}

/// Resilience4j's `IntervalFunction.DEFAULT_MULTIPLIER`.
fn default_open_multiplier() -> f64 {
    1.5
}

fn default_max_open() -> f64 {
    300.0
}

fn default_honour_retry_after() -> bool {
    true
}

fn default_cache_price() -> f64 {
    0.1
}

/// `gateway.ladder_classes`: at most four of `classes`, each once (a class is shed from
/// one rung on). The fixture's own and a scenario's override are both checked by it.
pub fn check_ladder(ladder: &[String], classes: &BTreeMap<String, CallClass>) -> Result<()> {
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
        let fixture: Fixture = typed(toml::Value::Table(table)).map_err(|e| e.context(origin))?;
        fixture.validate().map_err(|e| e.context(origin))?;
        Ok(fixture)
    }

    /// The shipped fixture, or the file at `path`.
    pub fn load(path: Option<&str>) -> Result<Fixture> {
        match path {
            None => Fixture::parse(DEFAULT_FIXTURE, "the built-in fixture"),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Error::bad_input(format!("cannot read fixture file {path}: {e}")))?;
                Fixture::parse(&text, &format!("fixture file {path}"))
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

    /// Checks ranges and cross-references.
    pub fn validate(&self) -> Result<()> {
        for (name, tier) in &self.tiers {
            tier.validate(name)?;
        }
        check_ladder(&self.gateway.ladder_classes, &self.classes)?;
        for (name, class) in &self.classes {
            class.validate(name, &self.tiers)?;
        }
        Ok(())
    }
}

impl Tier {
    /// Rates and slots positive, the error rate a probability, prices not negative.
    fn validate(&self, name: &str) -> Result<()> {
        for (field, value) in [
            ("prefill_tokens_per_s", self.prefill_tokens_per_s),
            ("decode_tokens_per_s", self.decode_tokens_per_s),
            ("burst_s", self.burst_s),
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
    /// Its tier exists; tokens, attempts, deadlines and timeouts are in range.
    fn validate(&self, name: &str, tiers: &BTreeMap<String, Tier>) -> Result<()> {
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
        if self.max_tokens == 0 {
            return Err(Error::bad_input(format!("classes.{name}.max_tokens = 0: must be positive")));
        }
        if !(self.calls_per_turn.is_finite() && self.calls_per_turn >= 0.0) {
            return Err(Error::bad_input(format!(
                "classes.{name}.calls_per_turn = {}: must be non-negative",
                self.calls_per_turn
            )));
        }
        if !(0.0..=1.0).contains(&self.cache_hit_ratio) {
            return Err(Error::bad_input(format!(
                "classes.{name}.cache_hit_ratio = {}: must be from 0 to 1",
                self.cache_hit_ratio
            )));
        }
        if !(0.0..=1.0).contains(&self.cacheable_prefix) {
            return Err(Error::bad_input(format!(
                "classes.{name}.cacheable_prefix = {}: must be from 0 to 1",
                self.cacheable_prefix
            )));
        }
        Ok(())
    }
}
