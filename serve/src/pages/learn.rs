//! `/learn`: ten experiments, one mechanism each (see [`crate::llm::learn`]). The
//! JSON API:
//!
//! | method and path | body | answer |
//! |---|---|---|
//! | `GET /api/learn` | | the experiments (id, title, knobs, takeaway) and the figures' names |
//! | `POST /api/learn/{id}` | `{"knobs": {…}, "replicas": 100, "seed": 1, "channel": "…"}` | the setup sentence, the scenario TOML, the cards and closed-form checks with 95% intervals, what happened, replica 0's timeline, the time it took |
//!
//! A run on a channel cancels the run still going on it (answer 409 to the old one).

use std::time::Instant;

use axum::extract::{Path as UrlPath, State as Shared};
use axum::response::{Html, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::llm::figures::{anchor, finite, interval, scenario, timeline, traced_run};
use crate::llm::learn::{find, measure, Knobs, EXPERIMENTS, FIGURES};
use crate::llm::{jobs, RunError};
use crate::pages::{blocking_json, llm_assets, script};
use crate::shell::page;
use crate::State;

const SCRIPT: &str = include_str!("../../assets/learn.js");
const BODY: &str = include_str!("../../assets/learn.html");
/// Timeline rows drawn.
const ROWS_SHOWN: usize = 50;

pub fn routes() -> Router<State> {
    Router::new()
        .route("/learn", get(learn_page))
        .route("/learn/learn.js", get(|| script(SCRIPT)))
        .route("/api/learn", get(list))
        .route("/api/learn/{id}", post(run))
}

async fn learn_page() -> Html<String> {
    Html(page("Learn", "/learn", &llm_assets(), BODY))
}

async fn list() -> Json<Value> {
    let experiments: Vec<Value> = EXPERIMENTS.iter().map(|e| e.describe()).collect();
    let figures: Vec<Value> =
        FIGURES.iter().map(|(name, label, unit)| json!({"name": name, "label": label, "unit": unit})).collect();
    Json(json!({"experiments": experiments, "figures": figures}))
}

fn default_replicas() -> u32 {
    100
}

fn default_seed() -> u64 {
    1
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    knobs: Knobs,
    #[serde(default = "default_replicas")]
    replicas: u32,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default)]
    channel: String,
}

async fn run(Shared(shared): Shared<State>, UrlPath(id): UrlPath<String>, Json(request): Json<Request>) -> Response {
    // Dropped with this future if the client goes away: the run then stops.
    let disconnect = jobs::CancelOnDrop::new();
    let cancel = disconnect.0.clone();
    blocking_json(move || learn(&id, request, cancel, &shared)).await
}

/// Runs experiment `id` with the request's knobs (its replicas within the server's cap).
fn learn(
    id: &str,
    request: Request,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    shared: &crate::Options,
) -> Result<Value, RunError> {
    let started = Instant::now();
    let experiment = find(id).ok_or_else(|| RunError::BadInput(format!("no experiment {id:?}")))?;
    let most = shared.caps.replicas.max(2);
    if !(2..=most).contains(&request.replicas) {
        return Err(RunError::BadInput(format!(
            "replicas = {}: from 2 to {most} on this server (stampede serve --max-replicas raises it)",
            request.replicas
        )));
    }
    let job = jobs::begin_with(&format!("learn:{}", request.channel), cancel);
    let _slot = shared.jobs.admit(&job.cancel)?;
    let setup = experiment.setup(&request.knobs);
    let toml = setup.toml(&format!("learn-{id}"), experiment.title, request.replicas, request.seed);
    let scenario = scenario(&toml)?;
    let horizon = setup.horizon_s;
    let (figures, trace) = traced_run(&scenario, &job.cancel, &|trace| measure(trace, horizon))?;
    let cards: Vec<Value> = experiment
        .cards
        .iter()
        .map(|&i| {
            let (name, label, unit) = FIGURES[i];
            json!({"name": name, "label": label, "unit": unit, "value": interval(&figures[i], request.replicas)})
        })
        .collect();
    let checks: Vec<Value> = experiment
        .checks(&setup, &figures)
        .iter()
        .map(|check| {
            let measured = &figures[check.figure];
            json!({
                "what": check.what,
                "formula": check.formula,
                "expected": check.expected,
                "compare": format!("{:?}", check.compare),
                "measured": interval(measured, request.replicas),
                "holds": check.holds(measured),
                "z": finite(check.z(measured, request.replicas)),
            })
        })
        .collect();
    Ok(json!({
        "id": id,
        "setup": experiment.sentence(&setup),
        "toml": toml,
        "replicas": request.replicas,
        "seed": request.seed,
        "horizon_s": horizon,
        "cards": cards,
        "checks": checks,
        "happened": experiment.happened(&setup, &figures),
        "timeline": timeline(&trace, anchor(&trace, 0.0), ROWS_SHOWN),
        "elapsed_ms": started.elapsed().as_secs_f64() * 1e3,
    }))
}
