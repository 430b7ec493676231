//! The output folder's layout: which files a run writes, in commit order.

use crate::resolved::Scenario;

/// The files a run writes for `scenario`, in the order they are committed.
pub fn output_files(scenario: &Scenario) -> Vec<&'static str> {
    let mut files = vec!["replicas.parquet", "summary.parquet", "histograms.parquet"];
    if !scenario.schema.series.is_empty() {
        files.push("timeseries.parquet");
    }
    if let Some(def) = scenario.schema.count_histogram {
        files.push(def.file);
    }
    files.push("manifest.json");
    files
}
