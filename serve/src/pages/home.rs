//! `/`: what the app holds, one line per page.

use axum::response::Html;
use axum::routing::get;
use axum::Router;

use crate::shell::page;
use crate::State;

pub fn routes() -> Router<State> {
    Router::new().route("/", get(home))
}

async fn home() -> Html<String> {
    let body = "<h1>stampede</h1>\
        <p><a href=\"/learn\">Learn</a>: the LLM gateway one mechanism at a time — ten experiments from a healthy call \
        to shedding load on purpose, each drawn request by request, with 95% intervals over 100 replicas and the \
        arithmetic checked.</p>\
        <p><a href=\"/sandbox\">Sandbox</a>: the whole gateway — reorder its seven gates, add incidents, pin a run and \
        compare the next, export the scenario that <code>stampede run</code> reproduces.</p>\
        <p><a href=\"/ring\">Ring explorer</a>: consistent hashing on a ring stored in SQLite — add and remove nodes \
        and keys, see which keys move, step through the history, switch between seven strategies.</p>\
        <p><a href=\"/results\">Results</a>: the output folders of <code>stampede run</code>, each with its HTML report.</p>";
    Html(page("Home", "/", "", body))
}
