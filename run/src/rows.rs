//! A replica's row: the columns of `replicas.parquet` (a run's, a shard's, a
//! checkpoint piece's — the same everywhere, so a merge reads back what a run wrote).

use stampede_output::{ColumnSpec, ColumnType, ColumnValues};

use super::runner::ReplicaRecord;
use stampede_scenario::models::MetricKind;
use stampede_scenario::resolved::Scenario;

fn metric_column_type(kind: MetricKind) -> ColumnType {
    match kind {
        MetricKind::Real => ColumnType::F64,
        MetricKind::Count => ColumnType::U64,
    }
}

pub fn replica_columns(scenario: &Scenario) -> Vec<ColumnSpec> {
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("replica", ColumnType::U32),
        ColumnSpec::new("seed", ColumnType::U64),
    ];
    columns.extend(scenario.schema.metrics.iter().map(|m| ColumnSpec::new(m.name, metric_column_type(m.kind))));
    columns
}

pub fn replica_values_columns(scenario: &Scenario, records: &[ReplicaRecord]) -> Vec<ColumnValues> {
    let mut columns = vec![
        ColumnValues::U32(records.iter().map(|r| r.grid_point).collect()),
        ColumnValues::U32(records.iter().map(|r| r.replica).collect()),
        ColumnValues::U64(records.iter().map(|r| r.seed).collect()),
    ];
    for (i, metric) in scenario.schema.metrics.iter().enumerate() {
        columns.push(match metric.kind {
            MetricKind::Real => ColumnValues::F64(records.iter().map(|r| r.metrics[i]).collect()),
            MetricKind::Count => ColumnValues::U64(records.iter().map(|r| r.metrics[i] as u64).collect()),
        });
    }
    columns
}
