//! `/sandbox`: the whole gateway (see [`crate::llm::sandbox`]). The JSON API:
//!
//! | method and path | body | answer |
//! |---|---|---|
//! | `GET /api/sandbox` | | the default configuration, every gate with the note on where it sits, the product (tiers, classes, re-sendable classes) and incident kinds |
//! | `POST /api/sandbox/run` | `{"config": {…}, "channel": "…"}` | the scenario TOML, warnings, the product, every metric `[mean, lo, hi, se]`, latency quantiles, time series, the funnel, one trace, the time it took |
//! | `POST /api/sandbox/toml` | `{"config": {…}}` | the scenario TOML, the fixture file beside it (if the config has one) and warnings |
//! | `POST /api/sandbox/load` | `{"toml": "…", "fixture": "…"}` | the configuration it expresses (with the fixture's text when the scenario names one) and its product |
//! | `GET /api/jobs` | | the simulations (Learn and Sandbox) running and queued now |
//!
//! The run goes through the run layer: its numbers are those `stampede run` writes
//! for the exported TOML.

use std::time::Instant;

use axum::extract::State as Shared;
use axum::response::{Html, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::reason::Source;
use stampede_engine::models::gateway::{Gate, Reason};
use stampede_scenario::models::gateway::Gateway as GatewayModel;

use crate::llm::figures::{anchor, interval, summarised_run, timeline};
use crate::llm::sandbox::{gate_notes, prepare, product, warnings, Config};
use crate::llm::{jobs, RunError};
use crate::pages::{blocking_json, llm_assets, script};
use crate::shell::page;
use crate::State;

const SCRIPT: &str = include_str!("../../assets/sandbox.js");
const BODY: &str = include_str!("../../assets/sandbox.html");
const ROWS_SHOWN: usize = 60;

pub fn routes() -> Router<State> {
    Router::new()
        .route("/sandbox", get(sandbox_page))
        .route("/sandbox/sandbox.js", get(|| script(SCRIPT)))
        .route("/api/sandbox", get(defaults))
        .route("/api/sandbox/run", post(run))
        .route("/api/sandbox/toml", post(export))
        .route("/api/sandbox/load", post(load))
        .route("/api/jobs", get(job_counts))
}

async fn sandbox_page() -> Html<String> {
    Html(page("Sandbox", "/sandbox", &llm_assets(), BODY))
}

/// The simulations running and queued now (Learn and Sandbox).
async fn job_counts(Shared(shared): Shared<State>) -> Json<Value> {
    let (running, waiting) = shared.jobs.counts();
    Json(json!({"running": running, "waiting": waiting}))
}

async fn defaults(Shared(shared): Shared<State>) -> Json<Value> {
    let caps = shared.caps;
    let config = Config::default();
    Json(json!({
        "product": product(&config).expect("the shipped fixture"),
        "config": config,
        "caps": {"replicas": caps.replicas, "sim_seconds": caps.sim_seconds, "turns": caps.turns},
        "gates": Gate::ALL.iter().map(|g| g.name()).collect::<Vec<_>>(),
        "notes": gate_notes(),
        "incident_kinds": crate::llm::sandbox::SHOWN_INCIDENTS,
        "limiters": ["fixed", "aimd", "gradient", "gradient2"],
        "queue_orders": ["fifo", "lifo", "adaptive_lifo"],
    }))
}

#[derive(Deserialize)]
struct RunRequest {
    config: Config,
    #[serde(default)]
    channel: String,
}

async fn run(Shared(shared): Shared<State>, Json(request): Json<RunRequest>) -> Response {
    // Dropped with this future if the client goes away: the run then stops.
    let disconnect = jobs::CancelOnDrop::new();
    let cancel = disconnect.0.clone();
    blocking_json(move || {
        within_caps(&request.config, shared.caps)?;
        sandbox(request, cancel, &shared.jobs)
    })
    .await
}

/// Refuses a run above `caps`, naming the cap and the flag that raises it.
fn within_caps(config: &Config, caps: crate::Caps) -> Result<(), RunError> {
    let sim_seconds = config.warmup_s + config.duration_s;
    let turns = f64::from(config.replicas) * sim_seconds * config.turns_per_s;
    if config.replicas > caps.replicas {
        return Err(RunError::BadInput(format!(
            "replicas = {}: this server runs at most {} replicas a run (stampede serve --max-replicas raises it)",
            config.replicas, caps.replicas
        )));
    }
    if sim_seconds.is_nan() || sim_seconds > caps.sim_seconds {
        return Err(RunError::BadInput(format!(
            "warm-up + duration = {sim_seconds} s: this server simulates at most {} s a replica (stampede serve \
             --max-sim-seconds raises it)",
            caps.sim_seconds
        )));
    }
    if turns.is_nan() || turns > caps.turns {
        return Err(RunError::BadInput(format!(
            "replicas × simulated seconds × turns per second = {turns:.0} turns: this server simulates at most {:.0} \
             turns a run (stampede serve --max-turns raises it)",
            caps.turns
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct ExportRequest {
    config: Config,
}

async fn export(Json(request): Json<ExportRequest>) -> Response {
    blocking_json(move || -> Result<Value, RunError> {
        let toml = request.config.toml()?;
        prepare(&request.config)?; // refuse what `stampede run` would refuse
        Ok(json!({"toml": toml, "fixture": request.config.fixture, "warnings": warnings(&request.config)}))
    })
    .await
}

#[derive(Deserialize)]
struct LoadRequest {
    toml: String,
    /// The text of the fixture the scenario names (`workload.fixture`), if it names one.
    #[serde(default)]
    fixture: Option<String>,
}

async fn load(Json(request): Json<LoadRequest>) -> Response {
    blocking_json(move || -> Result<Value, RunError> {
        let config = Config::from_toml(&request.toml, request.fixture.as_deref())?;
        Ok(json!({"product": product(&config)?, "config": config, "warnings": warnings(&config)}))
    })
    .await
}

/// The funnel's rows: every failure reason, with the gate (or timeout, or provider) it belongs to.
fn funnel_rows() -> Vec<(Reason, &'static str)> {
    Reason::ALL
        .iter()
        .map(|&reason| {
            let stage = match reason.source() {
                Source::Gate(gate) => gate.name(),
                Source::Timeout => "timeout",
                Source::Provider => "provider",
            };
            (reason, stage)
        })
        .collect()
}

fn sandbox(
    request: RunRequest,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    slots: &jobs::Slots,
) -> Result<Value, RunError> {
    let started = Instant::now();
    let config = request.config;
    let toml = config.toml()?;
    let prepared = prepare(&config)?;
    let scenario = &prepared.scenario;
    let job = jobs::begin_with(&format!("sandbox:{}", request.channel), cancel);
    let _slot = slots.admit(&job.cancel)?;
    let metric_names: Vec<&str> = scenario.schema.metric_names();
    let gateway = scenario.model.downcast::<GatewayModel>().expect("the Sandbox runs the gateway");
    let classes = gateway.class_names();
    let columns: Vec<Vec<usize>> = funnel_rows()
        .iter()
        .map(|(reason, _)| {
            classes
                .iter()
                .map(|class| format!("{class}_failed_{}", reason.name()))
                .map(|name| metric_names.iter().position(|m| *m == name).expect("a column per class and reason"))
                .collect()
        })
        .collect();
    let position = |name: &str| metric_names.iter().position(|m| *m == name).expect("a gateway metric");
    let (calls, turns) = (position("calls_offered"), position("turns_offered"));
    // Per replica: the calls that stopped for each reason, all classes together; then
    // the calls a turn made, as the model made them.
    let derive = |metrics: &[f64]| {
        let mut figures: Vec<f64> = columns.iter().map(|c| c.iter().map(|&i| metrics[i]).sum()).collect();
        figures.push(metrics[calls] / metrics[turns]);
        figures
    };
    let run = summarised_run(scenario, &job.cancel, &derive)?;
    let funnel: Vec<Value> = funnel_rows()
        .iter()
        .zip(&run.derived)
        .map(|((reason, stage), summary)| {
            json!({"stage": stage, "reason": reason.name(), "calls": interval(summary, run.replicas)})
        })
        .collect();
    let point = scenario.grid_point(0)?;
    let traced = point.model.trace_replica(&point.run, scenario.run.seed, 0).expect("the gateway traces");
    let trace = timeline(&traced.trace, anchor(&traced.trace, config.warmup_s), ROWS_SHOWN);
    Ok(json!({
        "toml": toml,
        "product": product(&config)?,
        "warnings": warnings(&config),
        "replicas": config.replicas,
        "seed": config.seed,
        "window_s": config.duration_s,
        "warmup_s": config.warmup_s,
        "incidents": config.incidents,
        "metrics": run.metrics_json(),
        "latency": run.latency_json(scenario.schema.latencies),
        "series": run.series_json(),
        "funnel": funnel,
        "calls_per_turn": interval(run.derived.last().expect("calls per turn"), run.replicas),
        "trace": trace,
        "elapsed_ms": started.elapsed().as_secs_f64() * 1e3,
    }))
}
