//! `stampede run --trace R`: replica R of every grid point run again with its
//! per-call trace on, written as `trace.parquet` (one row per call, attempt, wait,
//! refusal, state change and incident; see the README's output section). The trace
//! replica is the run's replica R — same seed, same numbers — so it is identical
//! for any thread count.

use std::path::Path;

use stampede_engine::kernel::Named;
use stampede_engine::measurement::trace::Trace;
use stampede_engine::nanos_to_secs;
use stampede_output::{ColumnSpec, ColumnType, ColumnValues, TableWriter};

use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// The file's name in the output folder.
pub const FILE: &str = "trace.parquet";

/// Checks `--trace R` before anything runs: R is a replica of the run and the model traces.
pub fn check(scenario: &Scenario, replica: u32) -> Result<()> {
    if replica >= scenario.run.replicas {
        return Err(Error::bad_input(format!(
            "--trace {replica}: the run has replicas 0 to {} (run.replicas = {})",
            scenario.run.replicas - 1,
            scenario.run.replicas
        )));
    }
    if !scenario.model.traces() {
        return Err(Error::bad_input(format!(
            "--trace: model {} does not trace its requests; the gateway, cluster and dependency models do",
            scenario.model.name()
        )));
    }
    Ok(())
}

/// The trace of replica `replica` of grid point `index`.
fn trace(scenario: &Scenario, index: u32, replica: u32) -> Result<Trace> {
    let point = scenario.grid_point(index)?;
    let traced = point.model.trace_replica(&point.run, scenario.run.seed, replica as u64);
    Ok(traced.expect("checked: the model traces").trace)
}

fn columns() -> Vec<ColumnSpec> {
    use ColumnType::*;
    [
        ("grid_point", U32),
        ("replica", U32),
        ("kind", Utf8),
        ("call", U32),
        ("turn", U32),
        ("span_id", U32),
        ("parent_span_id", U32),
        ("class", Utf8),
        ("place", U32),
        ("attempt", U32),
        ("start_s", F64),
        ("first_token_s", F64),
        ("end_s", F64),
        ("outcome", Utf8),
        ("gate", Utf8),
        ("cause", Utf8),
        ("cause_service", Utf8),
        ("counted", Bool),
        ("tenant", U32),
        ("input_tokens", U32),
        ("output_tokens", U32),
        ("usd", F64),
    ]
    .into_iter()
    .map(|(name, kind)| ColumnSpec::new(name, kind))
    .collect()
}

/// Bytes `trace.parquet` holds before compression, estimated before the run (so the
/// free-space check counts it): grid point 0's trace replica is run now and its rows
/// counted, then taken for every point, each row at its columns' width (8 bytes a
/// number, 24 a text cell).
pub fn estimate_bytes(scenario: &Scenario, replica: u32) -> Result<f64> {
    let rows = trace(scenario, 0, replica)?.rows.len() as f64;
    let row_bytes: f64 = columns().iter().map(|c| if c.kind == ColumnType::Utf8 { 24.0 } else { 8.0 }).sum();
    Ok(rows * row_bytes * f64::from(scenario.point_count()))
}

/// Writes `trace.parquet` into `dir` (a staging folder): replica `replica` of every
/// grid point, traced and written one point at a time (memory holds one trace).
pub fn write(dir: &Path, scenario: &Scenario, replica: u32) -> Result<()> {
    let io = |e: stampede_output::OutputError| Error::io(format!("cannot write {FILE}: {e}"));
    let mut table = TableWriter::create(dir, FILE, &columns()).map_err(io)?;
    for point in 0..scenario.point_count() {
        let trace = trace(scenario, point, replica)?;
        let rows = &trace.rows;
        table
            .write(vec![
                ColumnValues::U32(vec![point; rows.len()]),
                ColumnValues::U32(vec![replica; rows.len()]),
                ColumnValues::Utf8(rows.iter().map(|r| r.kind.name().to_string()).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.call).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.group).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.span).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.parent).collect()),
                ColumnValues::Utf8(rows.iter().map(|r| r.class.to_string()).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.place).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.attempt).collect()),
                ColumnValues::F64(rows.iter().map(|r| nanos_to_secs(r.start)).collect()),
                ColumnValues::F64(rows.iter().map(|r| r.first_token.map_or(f64::NAN, nanos_to_secs)).collect()),
                ColumnValues::F64(rows.iter().map(|r| nanos_to_secs(r.end)).collect()),
                ColumnValues::Utf8(rows.iter().map(|r| r.outcome.to_string()).collect()),
                ColumnValues::Utf8(rows.iter().map(|r| r.gate.to_string()).collect()),
                ColumnValues::Utf8(rows.iter().map(|r| r.cause.to_string()).collect()),
                ColumnValues::Utf8(rows.iter().map(|r| r.cause_service.to_string()).collect()),
                ColumnValues::Bool(rows.iter().map(|r| Some(r.counted)).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.tenant).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.input_tokens).collect()),
                ColumnValues::U32(rows.iter().map(|r| r.output_tokens).collect()),
                ColumnValues::F64(rows.iter().map(|r| r.nano_usd as f64 / 1e9).collect()),
            ])
            .map_err(io)?;
    }
    table.finish().and_then(|f| f.commit()).map_err(io)?;
    Ok(())
}
