//! A replica's row: the columns of `replicas.parquet` (a run's, a shard's, a
//! checkpoint piece's — the same everywhere, so a merge reads back what a run wrote).

use stampede_output::ColumnValues;

use super::runner::ReplicaRecord;
use stampede_scenario::models::MetricKind;
use stampede_scenario::resolved::Scenario;

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
