//! The output folder's layout: which files a run writes, in commit order, and the
//! shape asked for — which replica rows, split by grid point or not.

use super::runner::ReplicaRecord;
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// The files a run writes for `scenario`, in the order they are committed.
pub fn output_files(scenario: &Scenario) -> Vec<&'static str> {
    let mut files = vec!["replicas.parquet", "summary.parquet", "histograms.parquet"];
    if !scenario.schema.series.is_empty() {
        files.push("timeseries.parquet");
    }
    if let Some(def) = scenario.schema.count_histogram {
        files.push(def.file);
    }
    if writes_attribution(scenario) {
        files.push("attribution.parquet");
    }
    files.push("manifest.json");
    files
}

/// Whether a run of `scenario` writes `attribution.parquet`: a graph written long
/// (where a failure's cause is a row to group by, not one of thousands of columns).
pub fn writes_attribution(scenario: &Scenario) -> bool {
    scenario.columns.long.is_some() && !scenario.schema.attribution.is_empty()
}

/// Which per-replica rows a run writes, and whether rows and series are split by
/// grid point. The summary, histograms and series never depend on it: they are
/// folded from every replica whatever is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub replica_rows: ReplicaRows,
    /// `--partition-by grid_point`: `replicas/grid_point=K/part-0.parquet` and
    /// `timeseries/grid_point=K/part-0.parquet` (hive-partitioned: the grid point is in
    /// the path, not in the file) instead of one `replicas.parquet` and one
    /// `timeseries.parquet`.
    pub partition_by_point: bool,
}

/// `--replica-rows`: every replica's row, none, or the first N of each grid point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplicaRows {
    #[default]
    All,
    None,
    /// Replicas 0..N of each point: replicas are independent and identically
    /// distributed, so the first N are a uniform random sample, the same in every
    /// run and every split into shards.
    Sample(u32),
}

impl ReplicaRows {
    /// `all`, `none` or `sample:N` (N ≥ 1).
    pub fn parse(text: &str) -> Result<ReplicaRows> {
        let bad = || {
            Error::bad_input(format!(
                "--replica-rows {text}: expected all, none or sample:N (N ≥ 1 replicas of each grid point)"
            ))
        };
        match text.trim() {
            "all" => Ok(ReplicaRows::All),
            "none" => Ok(ReplicaRows::None),
            other => match other.strip_prefix("sample:").map(|n| n.trim().parse::<u32>()) {
                Some(Ok(n)) if n >= 1 => Ok(ReplicaRows::Sample(n)),
                _ => Err(bad()),
            },
        }
    }

    /// Whether replica `replica`'s row is written.
    pub fn keeps(self, replica: u32) -> bool {
        match self {
            ReplicaRows::All => true,
            ReplicaRows::None => false,
            ReplicaRows::Sample(n) => replica < n,
        }
    }

    /// The replicas of `replicas` whose rows are written: a range, since kept
    /// replicas are a prefix of each point's.
    pub fn kept(self, replicas: std::ops::Range<u32>) -> std::ops::Range<u32> {
        match self {
            ReplicaRows::All => replicas,
            ReplicaRows::None => replicas.start..replicas.start,
            ReplicaRows::Sample(n) => replicas.start.min(n)..replicas.end.min(n),
        }
    }

    /// The records whose rows are written (borrowed when that is all of them).
    pub(crate) fn filter(self, records: &[ReplicaRecord]) -> std::borrow::Cow<'_, [ReplicaRecord]> {
        match self {
            ReplicaRows::All => std::borrow::Cow::Borrowed(records),
            _ => records.iter().filter(|r| self.keeps(r.replica)).cloned().collect(),
        }
    }

    /// As `--replica-rows` spells it (the manifest records it).
    pub fn name(self) -> String {
        match self {
            ReplicaRows::All => "all".into(),
            ReplicaRows::None => "none".into(),
            ReplicaRows::Sample(n) => format!("sample:{n}"),
        }
    }
}
