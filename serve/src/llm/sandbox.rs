//! The Sandbox's configuration: the whole gateway as the page edits it — the stack
//! (the seven gates in order, each removable), the client, the knobs, incidents,
//! load, seed and replicas, and the product (the shipped fixture, or the user's own:
//! its tiers, classes and turn plan) — and its two-way mapping to a `gateway`
//! scenario: [`Config::toml`] writes the scenario `stampede run` reproduces exactly
//! (beside the user's fixture file, when there is one), and [`Config::from_toml`]
//! reads one back (any scenario the page can express; anything else is refused).
//!
//! A user's fixture is run exactly as `stampede run` runs the exported files: written
//! into a private temporary folder under the name the scenario gives it, and the
//! scenario resolved from that folder ([`prepare`]).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::Gate;
use stampede_scenario::inputs::sealed;
use stampede_scenario::models::gateway::fixture::{Fixture, Gateway as GatewayKnobs};
use stampede_scenario::models::gateway::{Gateway as GatewayModel, StackSection};
use stampede_scenario::{Overrides, Scenario};

use super::RunError;

/// The most a user's fixture may hold in the Sandbox (bytes of text, tiers, classes):
/// a request's work stays bounded.
const FIXTURE_MAX_BYTES: usize = 256 * 1024;
const FIXTURE_MAX_TIERS: usize = 16;
const FIXTURE_MAX_CLASSES: usize = 32;

/// A fixture of the user's own as the page holds it: the path the scenario names
/// (`workload.fixture`, relative to the scenario) and the file's text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureFile {
    pub file: String,
    pub text: String,
}

impl FixtureFile {
    /// Parses and checks the fixture with the one validator `run` and `capacity`
    /// use, plus the Sandbox's limits and what it can read.
    pub fn parse(&self) -> Result<Fixture, RunError> {
        let bad = RunError::BadInput;
        let relative =
            !self.file.is_empty() && Path::new(&self.file).components().all(|c| matches!(c, Component::Normal(_)));
        if !relative {
            return Err(bad(format!(
                "workload.fixture = {:?}: the Sandbox takes a fixture path inside the scenario's folder \
                 (no \"..\", not absolute)",
                self.file
            )));
        }
        if self.text.len() > FIXTURE_MAX_BYTES {
            return Err(bad(format!(
                "the fixture {} is {} bytes; the Sandbox takes at most {FIXTURE_MAX_BYTES}",
                self.file,
                self.text.len()
            )));
        }
        let fixture = Fixture::parse(&self.text, &format!("fixture file {}", self.file))?;
        if fixture.tiers.len() > FIXTURE_MAX_TIERS || fixture.classes.len() > FIXTURE_MAX_CLASSES {
            return Err(bad(format!(
                "the fixture {} has {} tiers and {} classes; the Sandbox shows at most {FIXTURE_MAX_TIERS} and \
                 {FIXTURE_MAX_CLASSES} (stampede run takes any number)",
                self.file,
                fixture.tiers.len(),
                fixture.classes.len()
            )));
        }
        for (name, tier) in &fixture.tiers {
            if let Some(file) = tier.ttft_s.as_ref().and_then(|spec| spec.file()) {
                return Err(bad(format!(
                    "tiers.{name}.ttft_s reads the file {file}, which the Sandbox cannot see: give it as quantiles \
                     or a shape here, or run the scenario with stampede run"
                )));
            }
        }
        Ok(fixture)
    }
}

/// The product the page shows: the fixture's tiers and classes, and the classes whose
/// failed calls the fallback gate can re-send to another tier.
pub fn product(config: &Config) -> Result<Value, RunError> {
    let fixture = match &config.fixture {
        Some(file) => file.parse()?,
        None => Fixture::load(None)?,
    };
    Ok(json!({
        "tiers": fixture.tiers.keys().collect::<Vec<_>>(),
        "classes": fixture.classes.keys().collect::<Vec<_>>(),
        "resendable": fixture.resendable(),
        "fixture": config.fixture.as_ref().map(|f| &f.file),
    }))
}

/// A resolved scenario and the private folder its fixture was read from (removed when dropped).
pub struct Prepared {
    pub scenario: Scenario,
    _folder: Option<UploadedFixture>,
}

/// The scenario `config` exports, resolved as `stampede run` resolves the exported
/// files: the user's fixture is written under its name into a private folder first.
pub fn prepare(config: &Config) -> Result<Prepared, RunError> {
    resolve_text(&config.toml()?, config.fixture.as_ref())
}

/// Resolves scenario `text`, with `fixture` written where the scenario names it.
fn resolve_text(text: &str, fixture: Option<&FixtureFile>) -> Result<Prepared, RunError> {
    let Some(fixture) = fixture else {
        return Ok(Prepared { scenario: super::figures::scenario(text)?, _folder: None });
    };
    fixture.parse()?;
    let folder = UploadedFixture::new(fixture);
    let table: toml::Table = text.parse().map_err(|e| RunError::BadInput(format!("{e}")))?;
    let scenario = Scenario::resolve_in(table, &Overrides::default(), &folder.dir)?;
    Ok(Prepared { scenario, _folder: Some(folder) })
}

/// The uploaded fixture, held in memory under a folder that does not exist on disk:
/// the scenario reads it through the sealed inputs, where it was seeded, and the
/// server reads no file at all (every other path is refused: see
/// [`stampede_scenario::inputs::sealed::refuse_all_files`]). Forgotten when dropped.
struct UploadedFixture {
    dir: PathBuf,
    path: PathBuf,
}

impl UploadedFixture {
    fn new(fixture: &FixtureFile) -> UploadedFixture {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("stampede-sandbox-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = Path::new("/nonexistent-stampede-sandbox").join(name);
        let path = dir.join(&fixture.file);
        sealed::seed(&path, fixture.text.clone().into_bytes());
        UploadedFixture { dir, path }
    }
}

impl Drop for UploadedFixture {
    fn drop(&mut self) {
        sealed::forget(&self.path);
    }
}

/// Why each gate sits where it does, for the page.
pub fn gate_notes() -> Value {
    json!({
        "admission": "Outermost: refuse what will not be served (ladder by class, deadline, tenant share) before it holds anything.",
        "bulkhead": "Per-class slots and a short queue: one class cannot take every connection from the others.",
        "adaptive": "Learns how much concurrency the provider takes from its latency, below the bulkhead's fixed size.",
        "breaker": "Fails fast while the tier is down; above the quota so a refused call takes no reservation.",
        "quota": "Client-side meters: reserve tokens before sending, so 429s become local waits; inside the retry loop, once per attempt.",
        "retry": "The attempt loop: gates after it are passed once per attempt, gates before it once per call.",
        "fallback": "Innermost: a failed call of a class with a fallback is served its fallback instead.",
    })
}

use stampede_scenario::models::gateway::IncidentName;
/// An incident as the page edits it: the scenario's own `[[incidents]]` entry (one
/// type, so the page and `stampede run` cannot disagree on a field); the page shows the
/// kinds in [`SHOWN_INCIDENTS`].
pub use stampede_scenario::models::gateway::IncidentSection as Incident;

/// The knobs the Sandbox exposes (each maps to one scenario field).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knobs {
    pub retry_budget: bool,
    pub retry_budget_ratio: f64,
    pub backoff_base_s: f64,
    pub backoff_cap_s: f64,
    pub honour_retry_after: bool,
    pub breaker_failure_ratio: f64,
    pub breaker_open_s: f64,
    pub breaker_counts_429: bool,
    pub limiter_headroom: f64,
    pub limiter_longest_wait_s: f64,
    pub ladder_rungs: [f64; 4],
    pub limiter: String,
    /// The bulkhead queue's order (`fifo`, `lifo`, `adaptive_lifo`) and CoDel's target.
    pub bulkhead_queue: String,
    pub codel_target_s: f64,
    /// Classes whose failed calls are re-sent to another tier, with the tier.
    #[serde(default)]
    pub fallback_tiers: BTreeMap<String, String>,
    pub naive_attempts: u32,
    pub naive_timeout_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The gates in order, outermost first; a gate not listed is removed.
    pub gates: Vec<String>,
    /// `stack` or `naive`.
    pub client: String,
    pub knobs: Knobs,
    pub incidents: Vec<Incident>,
    pub turns_per_s: f64,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub seed: u64,
    pub replicas: u32,
    /// The user's own fixture; `None`: the shipped one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixture: Option<FixtureFile>,
}

impl Knobs {
    /// The gateway's knobs (a fixture's `[gateway]`, with a scenario's overrides), the
    /// rest the stack's defaults.
    fn of(g: &GatewayKnobs) -> Knobs {
        let stack = StackSection::default();
        Knobs {
            retry_budget: stack.retry_budget,
            retry_budget_ratio: g.retry_budget_ratio,
            backoff_base_s: g.backoff_base_s,
            backoff_cap_s: g.backoff_cap_s,
            honour_retry_after: g.honour_retry_after,
            breaker_failure_ratio: g.breaker_failure_ratio,
            breaker_open_s: g.breaker_open_s,
            breaker_counts_429: g.breaker_counts_429,
            limiter_headroom: g.limiter_headroom,
            limiter_longest_wait_s: g.limiter_longest_wait_s,
            ladder_rungs: g.ladder_rungs,
            limiter: g.adaptive_kind.clone(),
            bulkhead_queue: g.bulkhead_queue.clone(),
            codel_target_s: g.codel_target_s,
            fallback_tiers: BTreeMap::new(),
            naive_attempts: stack.naive_attempts,
            naive_timeout_s: stack.naive_timeout_s,
        }
    }
}

impl Default for Config {
    /// The fixture's gateway at 20 turns/s for 60 s, the full stack, one 20 s
    /// brownout of the answer tier.
    fn default() -> Self {
        Config {
            gates: Gate::ALL.iter().map(|g| g.name().to_string()).collect(),
            client: "stack".into(),
            knobs: Knobs::of(&Fixture::load(None).expect("the shipped fixture").gateway),
            incidents: vec![Incident::new("sonnet", IncidentName::Brownout, 25.0, 20.0)],
            turns_per_s: 20.0,
            duration_s: 60.0,
            warmup_s: 10.0,
            seed: 1,
            replicas: 100,
            fixture: None,
        }
    }
}

/// The warnings the page shows before running: incidents outside the run.
pub fn warnings(config: &Config) -> Vec<String> {
    let end = config.warmup_s + config.duration_s;
    config
        .incidents
        .iter()
        .enumerate()
        .filter_map(|(i, incident)| {
            let stop = incident.start_s + incident.duration_s;
            if incident.start_s >= end {
                Some(format!(
                    "incident {} ({} of {}) starts at {} s, after the run ends at {end} s: it changes nothing",
                    i + 1,
                    incident.kind.name(),
                    incident.tier,
                    incident.start_s
                ))
            } else if stop > end {
                Some(format!(
                    "incident {} ({} of {}) runs to {stop} s, past the run's end at {end} s: only {} s of it fall inside",
                    i + 1,
                    incident.kind.name(),
                    incident.tier,
                    end - incident.start_s
                ))
            } else if stop <= config.warmup_s {
                Some(format!(
                    "incident {} ({} of {}) ends at {stop} s, inside the {} s warm-up: nothing it does is counted",
                    i + 1,
                    incident.kind.name(),
                    incident.tier,
                    config.warmup_s
                ))
            } else {
                None
            }
        })
        .collect()
}

impl Config {
    /// The scenario: `[run]` from load, seed and replicas; `[stack]`; `[gateway]`; incidents.
    pub fn toml(&self) -> Result<String, RunError> {
        let mut root = toml::Table::new();
        let bad = |message: String| RunError::BadInput(message);
        root.insert("name".into(), "sandbox".into());
        root.insert(
            "description".into(),
            "The LLM gateway Sandbox of `stampede serve`, exported: `stampede run` on this file reproduces the page's numbers".into(),
        );
        root.insert("model".into(), "gateway".into());
        let mut run = toml::Table::new();
        run.insert("horizon_s".into(), (self.warmup_s + self.duration_s).into());
        run.insert("warmup_s".into(), self.warmup_s.into());
        run.insert("replicas".into(), i64::from(self.replicas).into());
        let seed = i64::try_from(self.seed).map_err(|_| bad(format!("seed = {}: at most {}", self.seed, i64::MAX)))?;
        run.insert("seed".into(), seed.into());
        root.insert("run".into(), run.into());
        let mut workload = toml::Table::new();
        workload.insert("turns_per_s".into(), self.turns_per_s.into());
        if let Some(fixture) = &self.fixture {
            workload.insert("fixture".into(), fixture.file.clone().into());
        }
        root.insert("workload".into(), workload.into());
        let k = &self.knobs;
        let mut stack = toml::Table::new();
        stack.insert("client".into(), self.client.clone().into());
        stack.insert(
            "gates".into(),
            self.gates.iter().map(|g| toml::Value::from(g.as_str())).collect::<Vec<_>>().into(),
        );
        stack.insert("retry_budget".into(), k.retry_budget.into());
        stack.insert("limiter".into(), k.limiter.clone().into());
        stack.insert("naive_attempts".into(), i64::from(k.naive_attempts).into());
        stack.insert("naive_timeout_s".into(), k.naive_timeout_s.into());
        if !k.fallback_tiers.is_empty() {
            let tiers: toml::Table = k.fallback_tiers.iter().map(|(c, t)| (c.clone(), t.clone().into())).collect();
            stack.insert("fallback_tiers".into(), tiers.into());
        }
        root.insert("stack".into(), stack.into());
        let mut gateway = toml::Table::new();
        for (name, value) in [
            ("retry_budget_ratio", k.retry_budget_ratio),
            ("backoff_base_s", k.backoff_base_s),
            ("backoff_cap_s", k.backoff_cap_s),
            ("breaker_failure_ratio", k.breaker_failure_ratio),
            ("breaker_open_s", k.breaker_open_s),
            ("limiter_headroom", k.limiter_headroom),
            ("limiter_longest_wait_s", k.limiter_longest_wait_s),
            ("codel_target_s", k.codel_target_s),
        ] {
            gateway.insert(name.into(), value.into());
        }
        gateway.insert("bulkhead_queue".into(), k.bulkhead_queue.clone().into());
        gateway.insert("honour_retry_after".into(), k.honour_retry_after.into());
        gateway.insert("breaker_counts_429".into(), k.breaker_counts_429.into());
        gateway.insert(
            "ladder_rungs".into(),
            k.ladder_rungs.iter().map(|&r| toml::Value::from(r)).collect::<Vec<_>>().into(),
        );
        root.insert("gateway".into(), gateway.into());
        if !self.incidents.is_empty() {
            let incidents = toml::Value::try_from(&self.incidents).map_err(|e| RunError::Failed(e.to_string()))?;
            root.insert("incidents".into(), incidents);
        }
        toml::to_string(&root).map_err(|e| RunError::Failed(e.to_string()))
    }

    /// Reads a scenario back, with the text of the fixture it names (if it names
    /// one): the fields the Sandbox exposes, the fixture's defaults for the rest;
    /// anything it cannot express (a grid, overrides of tiers or classes, other
    /// sections) is refused with the field named.
    pub fn from_toml(text: &str, fixture_text: Option<&str>) -> Result<Config, RunError> {
        let table: toml::Table = text.parse().map_err(|e| RunError::BadInput(format!("{e}")))?;
        let named = table.get("workload").and_then(|w| w.get("fixture")).and_then(toml::Value::as_str);
        let fixture = match (named, fixture_text.filter(|t| !t.trim().is_empty())) {
            (Some(file), Some(text)) => Some(FixtureFile { file: file.into(), text: text.into() }),
            (Some(file), None) => {
                return Err(RunError::BadInput(format!(
                    "workload.fixture = {file:?}: the scenario runs your own fixture; paste that file into the \
                     fixture box (or pick it) and load again"
                )))
            }
            (None, _) => None,
        };
        // Every refusal `stampede run` makes, with the fixture where the scenario names it.
        let scenario = resolve_text(text, fixture.as_ref())?.scenario;
        if !scenario.grid.is_empty() {
            return Err(RunError::BadInput("the scenario has a grid; the Sandbox runs one configuration".into()));
        }
        for key in table.keys() {
            if !["name", "description", "model", "run", "workload", "stack", "gateway", "incidents"]
                .contains(&key.as_str())
            {
                return Err(RunError::BadInput(format!("{key}: the Sandbox does not set this section")));
            }
        }
        // The scenario as `stampede run` types it: every value, default and override
        // comes from the gateway's own sections, never read here a second time.
        let gateway = scenario.model.downcast::<GatewayModel>().ok_or_else(|| {
            RunError::BadInput(format!("model = {:?}: the Sandbox runs the gateway", scenario.model.name()))
        })?;
        let (stack, knobs) = (&gateway.stack, gateway.knobs());
        let mut fallback_tiers = stack.fallback_tiers.clone();
        if let Some(tier) = &stack.answer_fallback_tier {
            fallback_tiers.entry("answer".into()).or_insert_with(|| tier.clone());
        }
        let config = Config {
            gates: stack.gates.iter().map(|g| g.name().to_string()).collect(),
            client: stack.client.name().to_string(),
            knobs: Knobs {
                retry_budget: stack.retry_budget,
                limiter: stack.limiter.map_or_else(|| knobs.adaptive_kind.clone(), |l| l.name().to_string()),
                fallback_tiers,
                naive_attempts: stack.naive_attempts,
                naive_timeout_s: stack.naive_timeout_s,
                ..Knobs::of(knobs)
            },
            incidents: shown_incidents(&gateway.incidents)?,
            turns_per_s: gateway.turns_per_s(&scenario.run),
            duration_s: scenario.run.horizon_s - scenario.run.warmup_s,
            warmup_s: scenario.run.warmup_s,
            seed: scenario.run.seed,
            replicas: scenario.run.replicas,
            fixture,
        };
        Ok(config)
    }
}

/// The incident kinds the Sandbox's page can show and edit.
pub const SHOWN_INCIDENTS: [&str; 3] = ["brownout", "outage", "capacity_step"];

fn shown_incidents(incidents: &[Incident]) -> Result<Vec<Incident>, RunError> {
    for (i, incident) in incidents.iter().enumerate() {
        let kind = incident.kind.name();
        if !SHOWN_INCIDENTS.contains(&kind) {
            return Err(RunError::BadInput(format!(
                "incidents[{i}].kind = {kind:?}: the Sandbox shows {}; run this scenario with `stampede run`",
                SHOWN_INCIDENTS.join(", ")
            )));
        }
    }
    Ok(incidents.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An incident the page cannot show is refused, not dropped.
    #[test]
    fn incidents_the_page_cannot_show_are_refused_by_name() {
        let text = Config::default().toml().unwrap();
        let with = |incident: &str| {
            format!("{text}\n[[incidents]]\ntier = \"sonnet\"\nstart_s = 1.0\nduration_s = 2.0\n{incident}\n")
        };
        let refused = |incident: &str| match Config::from_toml(&with(incident), None) {
            Err(RunError::BadInput(message)) => message,
            other => panic!("{incident}: {other:?}"),
        };
        let step = refused("kind = \"rate_limit_step\"\nrpm_scale = 0.5");
        assert!(
            step.contains("incidents[1].kind = \"rate_limit_step\": the Sandbox shows brownout, outage, capacity_step"),
            "{step}"
        );
        let quota = refused("kind = \"outage\"\nrpm_scale = 0.5");
        assert!(quota.contains("incidents[1].rpm_scale: only a rate_limit_step takes it"), "{quota}");
        let severe = Config::from_toml(&with("kind = \"brownout\"\nhealth = 1.0\nlatency_factor = 5.0"), None).unwrap();
        assert_eq!((severe.incidents[1].health, severe.incidents[1].latency_factor), (Some(1.0), Some(5.0)));
        assert!(Config::from_toml(&with("kind = \"brownout\""), None).is_ok());
    }

    #[test]
    fn a_configuration_survives_the_round_trip_through_toml() {
        let mut config = Config {
            gates: vec!["breaker".into(), "retry".into(), "admission".into()],
            seed: 42,
            replicas: 7,
            ..Config::default()
        };
        config.knobs.retry_budget_ratio = 0.0;
        config.knobs.honour_retry_after = false;
        config.knobs.bulkhead_queue = "fifo".into();
        config
            .incidents
            .push(Incident { scale: Some(0.4), ..Incident::new("haiku", IncidentName::CapacityStep, 12.5, 3.0) });
        let text = config.toml().unwrap();
        assert_eq!(Config::from_toml(&text, None).unwrap(), config);
    }

    #[test]
    fn incidents_outside_the_run_are_flagged() {
        let mut config = Config::default();
        assert!(warnings(&config).is_empty());
        config.incidents[0].start_s = 80.0;
        assert!(warnings(&config)[0].contains("after the run ends at 70 s"), "{:?}", warnings(&config));
        config.incidents[0].start_s = 60.0;
        assert!(warnings(&config)[0].contains("past the run's end"));
        config.incidents[0] = Incident { start_s: 1.0, duration_s: 2.0, ..config.incidents[0].clone() };
        assert!(warnings(&config)[0].contains("warm-up"));
    }

    #[test]
    fn a_scenario_is_read_through_the_gateways_own_types() {
        // Written by hand, not by the page: defaults come from the gateway's sections
        // and the fixture's [gateway], overrides from the scenario.
        let text = "name = \"mine\"\nmodel = \"gateway\"\n[run]\nhorizon_s = 30.0\nwarmup_s = 5.0\nreplicas = 3\n\
                    [workload]\nturns_per_s = 4.0\n[stack]\nclient = \"naive\"\n[gateway]\nbackoff_cap_s = 7.0\n";
        let config = Config::from_toml(text, None).unwrap();
        let shipped = Knobs::of(&Fixture::load(None).unwrap().gateway);
        assert_eq!(config.client, "naive");
        assert_eq!(config.knobs.backoff_cap_s, 7.0);
        assert_eq!(config.knobs.backoff_base_s, shipped.backoff_base_s);
        assert_eq!((config.knobs.naive_attempts, config.knobs.naive_timeout_s), (3, 60.0));
        assert_eq!(config.gates, Config::default().gates, "every gate, in the stack's order");
        assert_eq!((config.turns_per_s, config.duration_s, config.warmup_s), (4.0, 25.0, 5.0));
    }

    #[test]
    fn a_scenario_the_sandbox_cannot_express_is_refused() {
        let text = Config::default().toml().unwrap() + "\n[tiers.sonnet]\nrpm = 10\n";
        let Err(RunError::BadInput(message)) = Config::from_toml(&text, None) else { panic!("refused") };
        assert!(message.contains("tiers"), "{message}");
    }
}
