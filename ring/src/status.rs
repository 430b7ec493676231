//! What `status` and `lookup` report: per node its points, keys, share of keys and
//! share of the ring; the spread (peak/mean, coefficient of variation); where one key
//! lands and why. Computed over any key store, so the CLI, the web API and a replay
//! report the same numbers.

use serde::Serialize;

use crate::explorer::{knobs, Explorer};
use crate::hash::position;
use crate::store::KeyStore;
use crate::strategy::{Settings, Strategy};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeStatus {
    pub id: u32,
    pub name: String,
    pub weight: f64,
    /// Its points on the ring (ring strategies), sorted.
    pub positions: Vec<u32>,
    pub keys: u64,
    pub key_share: f64,
    /// The share of uniformly hashed keys it would own (see `Placement::shares`).
    pub ring_share: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    pub settings: Settings,
    pub description: String,
    pub nodes: Vec<NodeStatus>,
    pub keys: u64,
    pub mean_keys: f64,
    /// The busiest node's keys ÷ the mean (NaN without keys).
    pub peak_over_mean: f64,
    /// Standard deviation ÷ mean of keys per node.
    pub cv_keys: f64,
    /// Standard deviation ÷ mean of ring shares.
    pub cv_ring: f64,
    /// What theory says the ring's coefficient of variation is (1/√V on a V-vnode ring).
    pub cv_theory: Option<f64>,
}

/// Population coefficient of variation and peak/mean of `values`.
pub fn spread(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return (f64::NAN, f64::NAN);
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let peak = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (variance.sqrt() / mean, peak / mean)
}

pub fn status<S: KeyStore>(explorer: &mut Explorer<S>) -> Result<Status, String> {
    let counts = explorer.store.counts()?;
    let keys: u64 = counts.values().sum();
    let shares = explorer.placement().shares(explorer.nodes.len());
    // Each node's points, bucketed in one pass (a ring may hold 150,000 of them).
    let mut positions_of: Vec<Vec<u32>> = vec![Vec::new(); explorer.nodes.len()];
    for (position, node) in explorer.placement().points() {
        positions_of[node as usize].push(position);
    }
    let nodes: Vec<NodeStatus> = explorer
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let count = counts.get(&Some(node.id)).copied().unwrap_or(0);
            let mut positions = std::mem::take(&mut positions_of[i]);
            positions.sort_unstable();
            NodeStatus {
                id: node.id,
                name: node.name.clone(),
                weight: node.weight,
                positions,
                keys: count,
                key_share: if keys > 0 { count as f64 / keys as f64 } else { 0.0 },
                ring_share: shares.get(i).copied().unwrap_or(0.0),
            }
        })
        .collect();
    let per_node: Vec<f64> = nodes.iter().map(|n| n.keys as f64 / n.weight).collect();
    let (cv_keys, peak_over_mean) = if keys > 0 { spread(&per_node) } else { (f64::NAN, f64::NAN) };
    let ring: Vec<f64> = nodes.iter().map(|n| n.ring_share / n.weight).collect();
    let (cv_ring, _) = spread(&ring);
    let cv_theory = match explorer.strategy() {
        Strategy::Vnodes | Strategy::Bounded => Some(1.0 / (explorer.settings.vnodes as f64).sqrt()),
        Strategy::Ring => Some(1.0),
        _ => None,
    };
    Ok(Status {
        settings: explorer.settings.clone(),
        description: format!(
            "{} ({}; hash {})",
            explorer.settings.strategy,
            knobs(&explorer.settings),
            explorer.settings.hash
        ),
        mean_keys: if nodes.is_empty() { f64::NAN } else { keys as f64 / nodes.len() as f64 },
        nodes,
        keys,
        peak_over_mean,
        cv_keys,
        cv_ring,
        cv_theory,
    })
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}%", v * 100.0)
    } else {
        "–".into()
    }
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "–".into()
    }
}

/// The status as a terminal table.
pub fn render(status: &Status) -> String {
    let mut out = format!("ring: {} · {} nodes · {} keys\n\n", status.description, status.nodes.len(), status.keys);
    if status.nodes.is_empty() {
        out.push_str("no nodes yet: stampede ring add-node NAME\n");
        return out;
    }
    let width = status.nodes.iter().map(|n| n.name.chars().count()).max().unwrap_or(4).max(4);
    out.push_str(&format!(
        "{:<width$}  {:>6}  {:>8}  {:>9}  {:>10}  {:>10}  first position\n",
        "node", "weight", "points", "keys", "key share", "ring share"
    ));
    for n in &status.nodes {
        let first = n.positions.first().map_or("–".into(), |p| format!("{p:#010x}"));
        out.push_str(&format!(
            "{:<width$}  {:>6}  {:>8}  {:>9}  {:>10}  {:>10}  {first}\n",
            n.name,
            n.weight,
            n.positions.len(),
            n.keys,
            pct(n.key_share),
            pct(n.ring_share),
        ));
    }
    out.push_str(&format!(
        "\nkeys per node: mean {} · peak/mean {} · coefficient of variation {}\nring shares: coefficient of variation {}{}\n",
        num(status.mean_keys),
        num(status.peak_over_mean),
        num(status.cv_keys),
        num(status.cv_ring),
        status.cv_theory.map_or(String::new(), |t| format!(" (theory ≈ {})", num(t))),
    ));
    out
}

/// Where one key lands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Lookup {
    pub key: String,
    pub hash: String,
    pub position: u32,
    pub owner: String,
    /// The ring arc it falls in, (from, to] (ring strategies).
    pub arc: Option<(u32, u32)>,
    /// Whether the key is stored on the ring (else: where it would go).
    pub stored: bool,
    pub note: Option<String>,
}

pub fn lookup<S: KeyStore>(explorer: &mut Explorer<S>, key: &str) -> Result<Lookup, String> {
    if explorer.nodes.is_empty() {
        return Err(format!("lookup {key}: the ring has no nodes; add one with `stampede ring add-node NAME`"));
    }
    let hash = explorer.hash_kind().name(key);
    let stored = explorer.store.find_key(key)?;
    let home = explorer.home(hash);
    let (owner, note) = match (explorer.strategy(), stored) {
        (Strategy::Bounded, Some(row)) if row.owner != home => (
            row.owner,
            Some(format!("bounded loads: its home node {} was full, so it walked clockwise", explorer.node_name(home))),
        ),
        (_, Some(row)) => (row.owner, None),
        (_, None) => (home, None),
    };
    Ok(Lookup {
        key: key.to_string(),
        hash: format!("{hash:016x}"),
        position: position(hash),
        owner: explorer.node_name(owner),
        arc: explorer.placement().arc(hash),
        stored: stored.is_some(),
        note,
    })
}
