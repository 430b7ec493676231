//! `stampede ring compare`: every strategy over the same nodes and keys, measured as
//! the comparison suites do — balance (peak/mean and coefficient of variation of keys
//! per node), keys moved when a node joins and when one leaves against the ideal,
//! lookup time, memory and build time — and, with `--grow-to`, the movement at
//! every step of growth. Keys are `key-0` … and nodes `node-0` …, hashed as the
//! explorer hashes them, so the numbers are reproducible.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;
use stampede_kernel::names::Named;

use crate::hash::HashKind;
use crate::status::spread;
use crate::strategy::{bounded_assign, NodeSpec, Placement, Settings, Strategy};

/// What to compare.
#[derive(Clone, Debug)]
pub struct Options {
    pub nodes: u32,
    pub keys: u64,
    pub grow_to: Option<u32>,
    /// The knobs every strategy takes from (its `strategy` field is ignored).
    pub settings: Settings,
    /// Lookups timed per strategy.
    pub lookups: u64,
}

/// One strategy's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub strategy: String,
    pub knobs: String,
    pub nodes: u32,
    pub keys: u64,
    pub peak_over_mean: f64,
    pub cv: f64,
    /// Share of keys that moved when node n joined, and the ideal 1/(n+1).
    pub moved_on_add: f64,
    pub ideal_on_add: f64,
    /// Share of keys that moved when the middle node left, and that node's share (ideal).
    pub moved_on_remove: f64,
    pub ideal_on_remove: f64,
    pub lookup_ns: f64,
    pub memory_bytes: u64,
    pub build_ms: f64,
    pub note: String,
}

/// One step of growth.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Growth {
    pub strategy: String,
    pub nodes: u32,
    pub moved: f64,
    pub ideal: f64,
    pub peak_over_mean: f64,
}

fn nodes(n: u32) -> Vec<NodeSpec> {
    (0..n).map(|i| NodeSpec { name: format!("node-{i}"), weight: 1.0 }).collect()
}

/// Every key's node under `settings` over `specs`.
fn assign(settings: &Settings, specs: &[NodeSpec], hashes: &[u64]) -> (Placement, Vec<u32>) {
    let placement = Placement::build(settings, specs);
    let owners = if settings.strategy() == Ok(Strategy::Bounded) {
        let weights: Vec<f64> = specs.iter().map(|n| n.weight).collect();
        bounded_assign(&placement, &weights, settings.capacity_factor, hashes)
    } else {
        hashes.iter().map(|&h| placement.lookup(h).expect("nodes exist")).collect()
    };
    (placement, owners)
}

/// Share of keys whose node (by name) differs.
fn moved(before: &[u32], before_names: &[NodeSpec], after: &[u32], after_names: &[NodeSpec]) -> f64 {
    let changed = before
        .iter()
        .zip(after)
        .filter(|(b, a)| before_names[**b as usize].name != after_names[**a as usize].name)
        .count();
    changed as f64 / before.len().max(1) as f64
}

fn balance(owners: &[u32], n: usize) -> (f64, f64) {
    let mut counts = vec![0.0; n];
    for &o in owners {
        counts[o as usize] += 1.0;
    }
    spread(&counts)
}

/// Median ns per lookup over five timed passes. For bounded loads this is the home
/// lookup; the walk past full nodes happened when the key was assigned.
fn lookup_ns(placement: &Placement, hashes: &[u64], lookups: u64) -> f64 {
    let mut passes: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut sink = 0u64;
            for i in 0..lookups {
                let h = hashes[(i as usize) % hashes.len()];
                sink = sink.wrapping_add(placement.lookup(black_box(h)).unwrap_or(0) as u64);
            }
            black_box(sink);
            start.elapsed().as_nanos() as f64 / lookups as f64
        })
        .collect();
    passes.sort_by(f64::total_cmp);
    passes[2]
}

/// Runs the comparison.
pub fn compare(options: &Options) -> Result<(Vec<Row>, Vec<Growth>), String> {
    check(options)?;
    let hash: HashKind = options.settings.hash_kind()?;
    let hashes: Vec<u64> = (0..options.keys).map(|j| hash.name(&format!("key-{j}"))).collect();
    let mut rows = Vec::new();
    let mut growth = Vec::new();
    for &strategy in Strategy::ALL {
        let settings = Settings { strategy: strategy.name().into(), ..options.settings.clone() };
        settings.validate()?;
        let (row, owners) = strategy_row(strategy, &settings, options, &hashes);
        rows.push(row);
        if let Some(to) = options.grow_to {
            growth.extend(grow(strategy, &settings, &hashes, (options.nodes, owners), to));
        }
    }
    Ok((rows, growth))
}

/// The sizes `compare` accepts: at least 2 nodes, 1 to 100 million keys, and a
/// growth target above the nodes and at most 10,000.
fn check(options: &Options) -> Result<(), String> {
    if options.nodes < 2 {
        return Err(format!("--nodes {}: compare needs at least 2 nodes (one is removed)", options.nodes));
    }
    if options.keys == 0 || options.keys > 100_000_000 {
        return Err(format!("--keys {}: must be 1 to 100000000", options.keys));
    }
    if let Some(to) = options.grow_to {
        if to <= options.nodes || to > 10_000 {
            return Err(format!("--grow-to {to}: must be above --nodes {} and at most 10000", options.nodes));
        }
    }
    Ok(())
}

/// One strategy's row: its balance on `options.nodes` nodes, the keys it moves when
/// a node is added or a middle one removed (against the ideal), its lookup time,
/// memory and build time. Also the owners it assigned, which growth starts from.
fn strategy_row(strategy: Strategy, settings: &Settings, options: &Options, hashes: &[u64]) -> (Row, Vec<u32>) {
    let n = options.nodes;
    let base = nodes(n);
    let started = Instant::now();
    let (placement, owners) = assign(settings, &base, hashes);
    let build_ms = started.elapsed().as_secs_f64() * 1e3;
    let (cv, peak) = balance(&owners, n as usize);
    let grown = nodes(n + 1);
    let (_, grown_owners) = assign(settings, &grown, hashes);
    let middle = (n / 2) as usize;
    let mut fewer = base.clone();
    fewer.remove(middle);
    let (_, fewer_owners) = assign(settings, &fewer, hashes);
    let middle_share = owners.iter().filter(|&&o| o as usize == middle).count() as f64 / hashes.len() as f64;
    let mut note = String::new();
    if strategy == Strategy::Jump {
        let (_, last_owners) = assign(settings, &nodes(n - 1), hashes);
        note = format!(
            "removing a middle node renumbers the buckets after it; removing the last moves {:.2}%",
            moved(&owners, &base, &last_owners, &nodes(n - 1)) * 100.0
        );
    }
    let row = Row {
        strategy: strategy.name().into(),
        knobs: crate::explorer::knobs(settings),
        nodes: n,
        keys: options.keys,
        peak_over_mean: peak,
        cv,
        moved_on_add: moved(&owners, &base, &grown_owners, &grown),
        ideal_on_add: 1.0 / (n as f64 + 1.0),
        moved_on_remove: moved(&owners, &base, &fewer_owners, &fewer),
        ideal_on_remove: middle_share,
        lookup_ns: lookup_ns(&placement, hashes, options.lookups),
        memory_bytes: placement.memory_bytes() as u64,
        build_ms,
        note,
    };
    (row, owners)
}

/// The strategy grown one node at a time from `n` nodes (whose owners are `owners`)
/// to `to`: the keys each step moves against the ideal 1/size, and the balance.
fn grow(strategy: Strategy, settings: &Settings, hashes: &[u64], (n, owners): (u32, Vec<u32>), to: u32) -> Vec<Growth> {
    let mut growth = Vec::new();
    let mut previous = owners;
    let mut previous_nodes = nodes(n);
    for size in n + 1..=to {
        let specs = nodes(size);
        let (_, next) = assign(settings, &specs, hashes);
        let (_, peak) = balance(&next, size as usize);
        growth.push(Growth {
            strategy: strategy.name().into(),
            nodes: size,
            moved: moved(&previous, &previous_nodes, &next, &specs),
            ideal: 1.0 / size as f64,
            peak_over_mean: peak,
        });
        previous = next;
        previous_nodes = specs;
    }
    growth
}

/// The comparison as a terminal table.
pub fn render(rows: &[Row], growth: &[Growth]) -> String {
    let Some(first) = rows.first() else { return String::new() };
    let mut out = format!(
        "{} nodes, {} keys (moved: share of keys when node {} joins / when node {} leaves; ideal in brackets)\n\n",
        first.nodes,
        first.keys,
        first.nodes,
        first.nodes / 2
    );
    out.push_str(&format!(
        "{:<11} {:<20} {:>9} {:>7} {:>17} {:>17} {:>9} {:>11} {:>9}\n",
        "strategy", "knobs", "peak/mean", "cv", "moved on add", "moved on remove", "lookup", "memory", "build"
    ));
    for r in rows {
        out.push_str(&format!(
            "{:<11} {:<20} {:>9.3} {:>7.4} {:>7.2}% [{:>5.2}%] {:>7.2}% [{:>5.2}%] {:>6.1} ns {:>11} {:>6.1} ms\n",
            r.strategy,
            r.knobs,
            r.peak_over_mean,
            r.cv,
            r.moved_on_add * 100.0,
            r.ideal_on_add * 100.0,
            r.moved_on_remove * 100.0,
            r.ideal_on_remove * 100.0,
            r.lookup_ns,
            bytes(r.memory_bytes),
            r.build_ms,
        ));
    }
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        out.push_str(&format!("\n{}: {}", r.strategy, r.note));
    }
    out.push('\n');
    if !growth.is_empty() {
        out.push_str("\ngrowth, one node at a time: mean moved share vs the ideal 1/n, worst peak/mean\n");
        for r in rows {
            let steps: Vec<&Growth> = growth.iter().filter(|g| g.strategy == r.strategy).collect();
            let ratio = steps.iter().map(|g| g.moved / g.ideal).sum::<f64>() / steps.len() as f64;
            let worst = steps.iter().map(|g| g.peak_over_mean).fold(0.0, f64::max);
            out.push_str(&format!(
                "{:<11} moved {:.2}× the ideal on average, worst peak/mean {:.3}\n",
                r.strategy, ratio, worst
            ));
        }
    }
    out
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(nodes: u32, keys: u64) -> Options {
        Options {
            nodes,
            keys,
            grow_to: None,
            settings: Settings { hash: "fast".into(), ..Settings::default() },
            lookups: 1000,
        }
    }

    fn row<'a>(rows: &'a [Row], strategy: &str) -> &'a Row {
        rows.iter().find(|r| r.strategy == strategy).unwrap()
    }

    /// Against the literature (../shared/spec/ring-strategies.md).
    #[test]
    fn the_figures_agree_with_the_published_ones() {
        let (rows, _) = compare(&options(50, 400_000)).unwrap();
        // Jump hash moves exactly the keys that jump to the new bucket: 1/(n+1) of
        // them, binomially: within 4 standard deviations.
        let jump = row(&rows, "jump");
        let p: f64 = 1.0 / 51.0;
        let sd = (p * (1.0 - p) / 400_000.0).sqrt();
        assert!((jump.moved_on_add - p).abs() < 4.0 * sd, "jump moved {} vs {p}", jump.moved_on_add);
        // Multi-probe at 21 probes: peak/mean ≈ 1.05 (Appleton and O'Reilly); below 1.1.
        let multiprobe = row(&rows, "multiprobe");
        assert!(multiprobe.peak_over_mean < 1.1, "multi-probe peak/mean {}", multiprobe.peak_over_mean);
        // The seed's ring is far worse: peak/mean well above 2 at 50 nodes.
        assert!(row(&rows, "ring").peak_over_mean > 2.0);
        // Bounded loads never exceed c = 1.25 (plus one key of rounding).
        let bounded = row(&rows, "bounded");
        assert!(bounded.peak_over_mean <= 1.25 + 50.0 / 400_000.0 + 1e-9, "{}", bounded.peak_over_mean);
        // Rings, rendezvous and multi-probe move only the removed node's keys.
        for strategy in ["ring", "vnodes", "rendezvous", "multiprobe"] {
            let r = row(&rows, strategy);
            assert!((r.moved_on_remove - r.ideal_on_remove).abs() < 1e-12, "{strategy}");
        }
        // Maglev's table is balanced to one slot, so keys per node are multinomial.
        assert!(row(&rows, "maglev").peak_over_mean < 1.1);
    }

    /// The V-vnode ring's ring-share coefficient of variation is within 10% of 1/√V
    /// (measured on exact arc shares, so key sampling adds no noise).
    #[test]
    fn vnode_rings_spread_as_one_over_root_v() {
        for vnodes in [25u32, 100, 400] {
            let settings = Settings { strategy: "vnodes".into(), vnodes, hash: "fast".into(), ..Settings::default() };
            let placement = Placement::build(&settings, &nodes(1000));
            let (cv, _) = spread(&placement.shares(1000));
            let theory = 1.0 / (vnodes as f64).sqrt();
            assert!((cv / theory - 1.0).abs() < 0.10, "V = {vnodes}: cv {cv} vs 1/√V {theory}");
        }
    }

    #[test]
    fn growth_rows_cover_every_step() {
        let mut o = options(4, 20_000);
        o.grow_to = Some(7);
        let (rows, growth) = compare(&o).unwrap();
        assert_eq!(rows.len(), Strategy::ALL.len());
        assert_eq!(growth.len(), Strategy::ALL.len() * 3);
        let jump: Vec<&Growth> = growth.iter().filter(|g| g.strategy == "jump").collect();
        for g in jump {
            assert!((g.moved - g.ideal).abs() < 0.02, "{g:?}");
        }
        assert!(compare(&options(1, 10)).unwrap_err().contains("--nodes 1"));
    }
}
