//! `/ring`: the consistent-hashing explorer in the browser, over the same SQLite file
//! as `stampede ring` (each request opens it, so a change made by either is seen by
//! the other). The JSON API, under `/api/ring`:
//!
//! | method and path | body / query | answer |
//! |---|---|---|
//! | `GET /api/ring` | `?at=N` for the state after operation N | the ring: status, points, keys (up to 5,000), moves of the last (or Nth) operation |
//! | `GET /api/ring/history` | | every operation |
//! | `GET /api/ring/lookup` | `?key=K` | owner, position, arc |
//! | `POST /api/ring/init` | settings (`strategy`, `hash`, `vnodes`, …) | operation 1 |
//! | `POST /api/ring/strategy` | settings | the switch and its moves |
//! | `POST /api/ring/nodes` | `{"name", "weight"}` | the join and its moves |
//! | `DELETE /api/ring/nodes/{name}` | | the leave and its moves |
//! | `POST /api/ring/keys` | `{"names": […]}` or `{"count", "prefix"}` | the keys added |
//! | `DELETE /api/ring/keys/{name}` | | |
//!
//! Refused operations answer 400 with `{"error": "…"}` (the same message as the CLI)
//! and change nothing.

use axum::extract::{Path as UrlPath, Query, State as Shared};
use axum::response::{Html, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use stampede_ring::explorer::Explorer;
use stampede_ring::journal::{replay, Journal};
use stampede_ring::status::{lookup, status};
use stampede_ring::store::KeyStore;
use stampede_ring::{JournalError, Op, Settings};

use crate::pages::{blocking_json, script};
use crate::shell::page;
use crate::State;

const SCRIPT: &str = include_str!("../../assets/ring.js");
const STYLE: &str = include_str!("../../assets/ring.css");
const BODY: &str = include_str!("../../assets/ring.html");
/// Keys sent for drawing and the table; the status counts every key.
const KEYS_SHOWN: usize = 5_000;

pub fn routes() -> Router<State> {
    Router::new()
        .route("/ring", get(ring_page))
        .route("/ring/ring.js", get(|| script(SCRIPT)))
        .route("/api/ring", get(state))
        .route("/api/ring/history", get(history))
        .route("/api/ring/lookup", get(find))
        .route("/api/ring/init", post(init))
        .route("/api/ring/strategy", post(switch))
        .route("/api/ring/nodes", post(add_node))
        .route("/api/ring/nodes/{name}", delete(remove_node))
        .route("/api/ring/keys", post(add_keys))
        .route("/api/ring/keys/{name}", delete(remove_key))
}

async fn ring_page(Shared(shared): Shared<State>) -> Html<String> {
    // The key cap beside the count it bounds (a larger request is refused with 400).
    let cap = shared.caps.keys;
    let body = BODY.replace("{MAX_KEYS}", &cap.to_string()).replace("{MAX_KEYS_SHOWN}", &group_thousands(cap));
    Html(page("Ring explorer", "/ring", &format!("<style>{STYLE}</style>"), &body))
}

/// `500000` → `500,000`.
fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Runs blocking SQLite work off the async workers.
async fn blocking(work: impl FnOnce() -> Result<Value, JournalError> + Send + 'static) -> Response {
    blocking_json(work).await
}

fn to_json(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("JSON serialises")
}

/// The picture of a ring: status, points, keys.
fn picture<S: KeyStore>(explorer: &mut Explorer<S>) -> Result<Value, String> {
    let state = status(explorer)?;
    let points: Vec<Value> = explorer.placement().points().iter().map(|(p, node)| json!([p, node])).collect();
    let index = |id: Option<u32>| id.and_then(|id| explorer.nodes.iter().position(|n| n.id == id));
    let keys: Vec<Value> = explorer
        .store
        .sample(KEYS_SHOWN)?
        .into_iter()
        .map(|(name, hash, owner)| json!({"name": name, "position": stampede_ring::hash::position(hash), "owner": index(owner)}))
        .collect();
    Ok(json!({"status": state, "points": points, "keys": keys}))
}

#[derive(Deserialize)]
struct At {
    at: Option<u64>,
}

async fn state(Shared(shared): Shared<State>, Query(at): Query<At>) -> Response {
    blocking(move || {
        if !shared.db.exists() {
            return Ok(json!({"initialised": false, "db": shared.db.display().to_string()}));
        }
        let mut journal = Journal::open(&shared.db, false)?;
        if !journal.initialised()? {
            return Ok(json!({"initialised": false, "db": shared.db.display().to_string()}));
        }
        let history = journal.history()?;
        let latest = history.last().map_or(0, |e| e.seq);
        let at = at.at.unwrap_or(latest);
        if at == 0 || at > latest {
            return Err(JournalError::BadInput(format!("at={at}: the journal holds operations 1 to {latest}")));
        }
        let mut picture = if at == latest {
            // A closure, not the function: it must accept the transaction's every lifetime.
            #[allow(clippy::redundant_closure)]
            journal.read(|e| picture(e))?
        } else {
            let mut explorer = replay(&history, Some(at)).map_err(JournalError::BadInput)?;
            picture(&mut explorer).map_err(JournalError::Io)?
        };
        let entry = &history[at as usize - 1];
        let moves: Vec<Value> =
            journal.moves(at)?.into_iter().map(|(k, f, t)| json!({"key": k, "from": f, "to": t})).collect();
        let object = picture.as_object_mut().expect("an object");
        object.insert("initialised".into(), json!(true));
        object.insert("db".into(), json!(shared.db.display().to_string()));
        object.insert("at".into(), json!(at));
        object.insert("latest".into(), json!(latest));
        object.insert("entry".into(), to_json(entry));
        object.insert("moves".into(), json!(moves));
        Ok(picture)
    })
    .await
}

async fn history(Shared(shared): Shared<State>) -> Response {
    blocking(move || Ok(to_json(Journal::open(&shared.db, false)?.history()?))).await
}

#[derive(Deserialize)]
struct Key {
    key: String,
}

async fn find(Shared(shared): Shared<State>, Query(key): Query<Key>) -> Response {
    blocking(move || Ok(to_json(Journal::open(&shared.db, false)?.read(|e| lookup(e, &key.key))?))).await
}

async fn init(Shared(shared): Shared<State>, Json(settings): Json<Settings>) -> Response {
    blocking(move || Ok(to_json(Journal::open(&shared.db, true)?.init(&settings)?))).await
}

fn apply(shared: &State, op: Op) -> Result<Value, JournalError> {
    Ok(to_json(Journal::open(&shared.db, false)?.apply(&op)?))
}

async fn switch(Shared(shared): Shared<State>, Json(settings): Json<Settings>) -> Response {
    blocking(move || apply(&shared, Op::Strategy { settings })).await
}

#[derive(Deserialize)]
struct NewNode {
    name: String,
    #[serde(default = "one")]
    weight: f64,
}

fn one() -> f64 {
    1.0
}

async fn add_node(Shared(shared): Shared<State>, Json(node): Json<NewNode>) -> Response {
    blocking(move || apply(&shared, Op::AddNode { name: node.name, weight: node.weight })).await
}

async fn remove_node(Shared(shared): Shared<State>, UrlPath(name): UrlPath<String>) -> Response {
    blocking(move || apply(&shared, Op::RemoveNode { name })).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKeys {
    #[serde(default)]
    names: Vec<String>,
    count: Option<u64>,
    #[serde(default = "prefix")]
    prefix: String,
}

fn prefix() -> String {
    "key-".into()
}

async fn add_keys(Shared(shared): Shared<State>, Json(keys): Json<NewKeys>) -> Response {
    blocking(move || match (keys.names.is_empty(), keys.count) {
        (false, None) => apply(&shared, Op::AddKeys { names: keys.names }),
        (true, Some(count)) if (1..=shared.caps.keys).contains(&count) => {
            Ok(to_json(Journal::open(&shared.db, false)?.add_generated(keys.prefix, count)?))
        }
        (true, Some(count)) => Err(JournalError::BadInput(format!(
            "count {count}: this server adds 1 to {} keys a request (stampede serve --max-keys raises it)",
            shared.caps.keys
        ))),
        _ => Err(JournalError::BadInput("give \"names\": [...] or \"count\": N, not both".into())),
    })
    .await
}

async fn remove_key(Shared(shared): Shared<State>, UrlPath(name): UrlPath<String>) -> Response {
    blocking(move || apply(&shared, Op::RemoveKey { name })).await
}
