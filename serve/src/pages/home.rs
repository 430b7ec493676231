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
        <p><a href=\"/ring\">Ring explorer</a>: consistent hashing on a ring stored in SQLite — add and remove nodes \
        and keys, see which keys move, step through the history, switch between seven strategies.</p>\
        <p><a href=\"/results\">Results</a>: the output folders of <code>stampede run</code>, each with its HTML report.</p>";
    Html(page("Home", "/", "", body))
}
