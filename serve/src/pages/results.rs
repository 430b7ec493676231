//! `/results`: the output folders under the results root (each a folder holding a
//! `manifest.json`), newest first, with their reports at `/results/NAME/report.html`.

use std::path::Path;

use axum::extract::{Path as UrlPath, State as Shared};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::shell::{escape, page};
use crate::State;

pub fn routes() -> Router<State> {
    Router::new()
        .route("/results", get(list_page))
        .route("/api/results", get(list_json))
        .route("/results/{name}/report.html", get(report))
}

/// One output folder.
#[derive(Clone, Debug, Serialize)]
pub struct Folder {
    pub name: String,
    pub model: String,
    pub grid_points: u64,
    pub replicas: u64,
    pub version: String,
    pub has_report: bool,
    /// Seconds since the epoch when the manifest was written.
    pub written: u64,
}

/// The output folders directly under `root`, newest first.
pub fn folders(root: &Path) -> Vec<Folder> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut found: Vec<Folder> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().to_str()?.to_string();
            if name.starts_with('.') {
                return None;
            }
            let manifest_path = entry.path().join("manifest.json");
            let manifest: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&manifest_path).ok()?).ok()?;
            if manifest.get("tool")?.as_str()? != "stampede" {
                return None;
            }
            let written = std::fs::metadata(&manifest_path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            Some(Folder {
                model: manifest["model"].as_str().unwrap_or("").to_string(),
                grid_points: manifest["grid_points"].as_u64().unwrap_or(0),
                replicas: manifest["replicas"].as_u64().unwrap_or(0),
                version: manifest["version"].as_str().unwrap_or("").to_string(),
                has_report: entry.path().join("report.html").is_file(),
                written,
                name,
            })
        })
        .collect();
    found.sort_by(|a, b| b.written.cmp(&a.written).then(a.name.cmp(&b.name)));
    found
}

async fn list_json(Shared(state): Shared<State>) -> Json<Vec<Folder>> {
    Json(folders(&state.results))
}

async fn list_page(Shared(state): Shared<State>) -> Html<String> {
    let list = folders(&state.results);
    let mut body = format!(
        "<h1>Results</h1><p class=\"muted\">Output folders under <code>{}</code>.</p>",
        escape(&state.results.display().to_string())
    );
    if list.is_empty() {
        body.push_str("<p>None yet: <code>stampede run</code> writes one (into <code>out/</code> by default; <code>stampede serve --results DIR</code> looks elsewhere).</p>");
    } else {
        body.push_str("<table id=\"results\"><thead><tr><th>scenario</th><th>model</th><th class=\"num\">grid points</th><th class=\"num\">replicas</th><th>version</th><th>report</th></tr></thead><tbody>");
        for f in &list {
            let report = if f.has_report {
                format!("<a href=\"/results/{0}/report.html\">open</a>", escape(&f.name))
            } else {
                format!(
                    "<span class=\"muted\">none — <code>stampede report {}</code></span>",
                    escape(&state.results.join(&f.name).display().to_string())
                )
            };
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{report}</td></tr>",
                escape(&f.name), escape(&f.model), f.grid_points, f.replicas, escape(&f.version)
            ));
        }
        body.push_str("</tbody></table>");
    }
    Html(page("Results", "/results", "", &body))
}

async fn report(Shared(state): Shared<State>, UrlPath(name): UrlPath<String>) -> Response {
    // Only a folder directly under the root: no separators, no parent references.
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\']) {
        return (StatusCode::BAD_REQUEST, "not an output folder name").into_response();
    }
    match std::fs::read(state.results.join(&name).join("report.html")) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], bytes).into_response(),
        Err(_) => (StatusCode::NOT_FOUND, format!("no report for {name}: run `stampede report` on its folder"))
            .into_response(),
    }
}
