//! `stampede report`: one self-contained HTML file (`report.html`) from an output
//! folder — the comparison table with intervals and claims, time series with fault
//! windows and recovery, latency percentiles, the grid's shape and the model's own
//! plots, each with its data as CSV.
//!
//! [`compare`] is `stampede compare`: two folders of one scenario, metric by metric.
//! [`fit_page`], [`calibrate_page`] and [`map_page`] are the pages of `stampede fit`, `stampede
//! calibrate` and `stampede map`.
//!
//! Layers, each importing only from those before it: [`folder`] reads the folder
//! back, [`data`] derives each plot's numbers, [`big`] picks what a big graph's page
//! draws in full, [`chart`] draws them to SVG with
//! `plotters`, [`blocks`] holds what every section is made of (blocks, points, the
//! context, HTML and CSV encoding), [`race`] and [`topology`] draw one figure each,
//! [`sections`] decides what to show, [`page`] writes the HTML. The page loads nothing: styles, script and plots are
//! inlined, and its Content-Security-Policy forbids every request.

#![forbid(unsafe_code)]

pub mod big;
pub mod blocks;
pub mod calibrate_page;
pub mod chart;
pub mod compare;
pub mod data;
pub mod fit_page;
pub mod folder;
pub mod map_page;
pub mod page;
pub mod race;
pub mod rare_page;
pub mod sections;
pub mod topology;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use stampede_output::StagedFile;
use stampede_scenario::{Error, Result};

use crate::blocks::Context;
use crate::folder::Folder;

/// The report of the folder `dir`, as HTML.
pub fn render(dir: &Path) -> Result<String> {
    render_as(dir, dir)
}

/// The report of the folder `dir`, naming it `shown` (a run's staging folder is
/// shown as the folder it becomes).
pub fn render_as(dir: &Path, shown: &Path) -> Result<String> {
    // A `stampede rare` folder: its page is drawn from rare.json alone.
    let rare = dir.join("rare.json");
    if rare.is_file() {
        let text =
            std::fs::read_to_string(&rare).map_err(|e| Error::io(format!("cannot read {}: {e}", rare.display())))?;
        let document: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            Error::bad_input(format!("{}: not the rare.json `stampede rare` writes: {e}", rare.display()))
        })?;
        return Ok(rare_page::render(&document));
    }
    let mut folder = Folder::read_but_series(dir)?;
    folder.shown = shown.to_path_buf();
    let presentation = match &folder.scenario {
        Ok(scenario) => scenario.model.presentation(&scenario.run),
        Err(_) => Default::default(),
    };
    // A big graph's page reads only the series it draws.
    let focus = {
        let summary = data::SummaryIndex::of(&folder.summary);
        let attribution = folder.scenario.as_ref().map_or(&[][..], |s| s.schema.attribution.as_slice());
        big::Focus::of(&presentation, attribution, &summary, &summary.points())
    };
    match &focus {
        Some(focus) => {
            let wanted = focus.wanted(&presentation);
            folder.read_series(Some(&|name: &str| big::Focus::wants(&wanted, name)))?
        }
        None => folder.read_series(None)?,
    }
    let defs = folder.metric_defs();
    let summary = data::SummaryIndex::of(&folder.summary);
    let (points, overlay_note) = blocks::points(&folder, &defs, &summary);
    let ctx = Context { folder: &folder, defs, points, overlay_note, presentation, summary, focus };
    let sections = sections::all(&ctx);
    Ok(page::render(&folder, &ctx.points, &sections))
}

/// Writes `dir/report.html` atomically and returns its path.
pub fn write(dir: &Path) -> Result<PathBuf> {
    write_as(dir, dir)
}

/// Writes `dir/report.html` atomically, naming the folder `shown` in the page.
pub fn write_as(dir: &Path, shown: &Path) -> Result<PathBuf> {
    let html = render_as(dir, shown)?;
    let io = |e: stampede_output::OutputError| Error::io(format!("cannot write the report: {e}"));
    StagedFile::with_contents(dir, "report.html", html.as_bytes()).map_err(io)?.commit().map_err(io)
}
