//! `stampede ring …`: the consistent-hashing explorer on the command line, over a
//! SQLite ring file (`--db`). Write commands print what moved; read commands take
//! `--json`. Everything else lives in the `stampede-ring` crate.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use stampede_output::{ColumnSpec, ColumnType, ColumnValues, StagedSet, TableWriter};
use stampede_ring::compare::{self, Options};
use stampede_ring::journal::{replay, Applied, Entry, Journal};
use stampede_ring::status::{lookup, render, status, Lookup};
use stampede_ring::{JournalError, Op, Settings};
use stampede_scenario::{Error, Result};

#[derive(Args)]
pub struct RingArgs {
    /// The ring's SQLite file.
    #[arg(long, global = true, value_name = "FILE", default_value = "stampede-ring.sqlite")]
    db: PathBuf,
    #[command(subcommand)]
    command: RingCommand,
}

/// A strategy and its knobs.
#[derive(Args, Clone)]
pub struct Knobs {
    /// The strategy, as a word (`ring strategy jump`) or with --strategy.
    #[arg(value_name = "STRATEGY", conflicts_with = "strategy")]
    named: Option<String>,
    /// ring (one point per node, the seed's), vnodes, bounded, jump, rendezvous, maglev, multiprobe.
    #[arg(long, value_name = "S", default_value = "vnodes")]
    strategy: String,
    /// Virtual nodes per unit of weight (vnodes, bounded).
    #[arg(long, value_name = "V", default_value_t = 150)]
    vnodes: u32,
    /// sha256 (the seed's: first 8 hex digits) or fast.
    #[arg(long, value_name = "H", default_value = "sha256")]
    hash: String,
    /// Bounded loads: no node holds more than ⌈c · keys / nodes⌉.
    #[arg(long, value_name = "C", default_value_t = 1.25)]
    capacity_factor: f64,
    /// Multi-probe: hashes per key.
    #[arg(long, value_name = "K", default_value_t = 21)]
    probes: u32,
    /// Maglev: the lookup table's size (a prime).
    #[arg(long, value_name = "M", default_value_t = 65_537)]
    table_size: u32,
}

impl Knobs {
    fn settings(&self) -> Settings {
        Settings {
            strategy: self.named.clone().unwrap_or_else(|| self.strategy.clone()),
            hash: self.hash.clone(),
            vnodes: self.vnodes,
            capacity_factor: self.capacity_factor,
            probes: self.probes,
            table_size: self.table_size,
        }
    }
}

#[derive(Subcommand)]
enum RingCommand {
    /// Create the ring file with a strategy.
    Init(Knobs),
    /// Switch the ring's strategy (every key is placed again; the moves are journaled).
    Strategy(Knobs),
    /// Add a node.
    AddNode {
        name: String,
        /// Share relative to a weight-1 node (vnodes, bounded, rendezvous).
        #[arg(long, default_value_t = 1.0)]
        weight: f64,
    },
    /// Remove a node; its keys move (where the strategy allows, only its keys).
    RemoveNode { name: String },
    /// Add keys by name, or N generated ones (PREFIX0, PREFIX1, …).
    AddKeys {
        names: Vec<String>,
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        #[arg(long, value_name = "P", default_value = "key-")]
        prefix: String,
    },
    /// Remove a key.
    RemoveKey { name: String },
    /// Where a key goes: its hash, position, owner and the arc it falls in.
    Lookup {
        key: String,
        #[arg(long)]
        json: bool,
    },
    /// Nodes with their points, keys, share of keys and of the ring; the spread.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Every operation, numbered, with how many keys moved and from where to where.
    History {
        #[arg(long)]
        json: bool,
    },
    /// The ring as it was after operation N (the journal is not changed).
    Replay {
        #[arg(long, value_name = "N")]
        to: u64,
        #[arg(long)]
        json: bool,
    },
    /// Every strategy over the same nodes and keys: balance, movement, lookup time, memory.
    Compare {
        #[arg(long, value_name = "N", default_value_t = 10)]
        nodes: u32,
        #[arg(long, value_name = "K", default_value_t = 100_000)]
        keys: u64,
        /// Also grow one node at a time up to M nodes, measuring every step.
        #[arg(long, value_name = "M")]
        grow_to: Option<u32>,
        #[command(flatten)]
        knobs: Knobs,
        /// Where compare.parquet (and growth.parquet) go.
        #[arg(long, value_name = "DIR", default_value = "out/ring-compare")]
        out: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

fn journal_error(error: JournalError) -> Error {
    match error {
        JournalError::BadInput(message) => Error::bad_input(message),
        JournalError::Io(message) => Error::io(message),
    }
}

fn json(value: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(value).expect("JSON serialises"));
}

pub fn run(args: RingArgs) -> Result<()> {
    let db = &args.db;
    let open = |create| Journal::open(db, create).map_err(journal_error);
    match args.command {
        RingCommand::Init(knobs) => {
            let applied = open(true)?.init(&knobs.settings()).map_err(journal_error)?;
            println!("{}: ring created, operation {}: {}", db.display(), applied.seq, applied.description);
        }
        RingCommand::Strategy(knobs) => apply(db, &Op::Strategy { settings: knobs.settings() })?,
        RingCommand::AddNode { name, weight } => apply(db, &Op::AddNode { name, weight })?,
        RingCommand::RemoveNode { name } => apply(db, &Op::RemoveNode { name })?,
        RingCommand::AddKeys { names, count, prefix } => add_keys(db, names, count, prefix)?,
        RingCommand::RemoveKey { name } => apply(db, &Op::RemoveKey { name })?,
        RingCommand::Lookup { key, json: as_json } => {
            let found = open(false)?.read(|e| lookup(e, &key)).map_err(journal_error)?;
            if as_json {
                json(&found);
            } else {
                print_lookup(&found);
            }
        }
        RingCommand::Status { json: as_json } => {
            // A closure, not the function: it must accept the transaction's every lifetime.
            #[allow(clippy::redundant_closure)]
            let status = open(false)?.read(|e| status(e)).map_err(journal_error)?;
            if as_json {
                json(&status);
            } else {
                print!("{}", render(&status));
            }
        }
        RingCommand::History { json: as_json } => {
            let history = open(false)?.history().map_err(journal_error)?;
            if as_json {
                json(&history);
            } else {
                print_history(&history);
            }
        }
        RingCommand::Replay { to, json: as_json } => replay_to(&open(false)?, to, as_json)?,
        RingCommand::Compare { nodes, keys, grow_to, knobs, out, json: as_json } => {
            let options = Options { nodes, keys, grow_to, settings: knobs.settings(), lookups: 2_000_000 };
            let (rows, growth) = compare::compare(&options).map_err(Error::bad_input)?;
            write_compare(&out, &rows, &growth)?;
            if as_json {
                json(&serde_json::json!({"rows": rows, "growth": growth}));
            } else {
                print!("{}", compare::render(&rows, &growth));
                println!("wrote {}", out.display());
            }
        }
    }
    Ok(())
}

/// `ring add-keys`: the keys named, or `--count` generated ones (1 to 10 million),
/// not both.
fn add_keys(db: &Path, names: Vec<String>, count: Option<u64>, prefix: String) -> Result<()> {
    match (names.is_empty(), count) {
        (false, None) => apply(db, &Op::AddKeys { names }),
        (true, Some(count)) if count > 0 && count <= 10_000_000 => {
            let mut journal = Journal::open(db, false).map_err(journal_error)?;
            report(db, journal.add_generated(prefix, count).map_err(journal_error)?);
            Ok(())
        }
        (true, Some(count)) => Err(Error::bad_input(format!("--count {count}: must be 1 to 10000000"))),
        (true, None) => Err(Error::bad_input("add-keys: name keys, or give --count N")),
        (false, Some(_)) => Err(Error::bad_input("add-keys: name keys or give --count, not both")),
    }
}

/// `ring replay --to N`: the ring as it stood after operation `to` of the journal.
fn replay_to(journal: &Journal, to: u64, as_json: bool) -> Result<()> {
    let history = journal.history().map_err(journal_error)?;
    let last = history.last().map_or(0, |e| e.seq);
    if to == 0 || to > last {
        return Err(Error::bad_input(format!("--to {to}: the journal holds operations 1 to {last}")));
    }
    let mut explorer = replay(&history, Some(to)).map_err(Error::bad_input)?;
    let state = status(&mut explorer).map_err(Error::io)?;
    if as_json {
        json(&state);
    } else {
        println!("after operation {to} of {last} ({}):", history[to as usize - 1].description);
        print!("{}", render(&state));
    }
    Ok(())
}

/// Where a key lives, as `ring lookup` says it: its owner, hash and position, the arc
/// that holds it, and whether it is stored or only would go there.
fn print_lookup(found: &Lookup) {
    println!(
        "{} → {} (hash {}, position {:#010x} = {})",
        found.key, found.owner, found.hash, found.position, found.position
    );
    if let Some((from, to)) = found.arc {
        println!("arc ({from:#010x}, {to:#010x}]: the first node point clockwise from the key is at {to:#010x}");
    }
    println!(
        "{}",
        if found.stored { "the key is on the ring" } else { "the key is not on the ring: this is where it would go" }
    );
    if let Some(note) = &found.note {
        println!("{note}");
    }
}

/// The journal's operations, one a line, with the keys each moved and where.
fn print_history(history: &[Entry]) {
    for entry in history {
        let flows = entry.flows.iter().map(|(f, t, n)| format!("{f} → {t} {n}")).collect::<Vec<_>>().join(", ");
        let moved = if entry.moved > 0 { format!(" — {} keys moved: {flows}", entry.moved) } else { String::new() };
        println!("{:>4}  {}{moved}", entry.seq, entry.description);
        if let Some(note) = &entry.note {
            println!("      {note}");
        }
    }
}

fn apply(db: &Path, op: &Op) -> Result<()> {
    let applied = Journal::open(db, false).and_then(|mut j| j.apply(op)).map_err(journal_error)?;
    report(db, applied);
    Ok(())
}

/// What an operation did, in a few lines.
fn report(db: &Path, applied: Applied) {
    let mut line = format!("{}: operation {}: {}", db.display(), applied.seq, applied.description);
    if applied.added > 0 {
        line.push_str(&format!(" — {} keys added", applied.added));
    }
    if applied.removed > 0 {
        line.push_str(" — removed");
    }
    println!("{line}");
    if applied.moved > 0 {
        let flows = applied.flows.iter().map(|(f, t, n)| format!("{f} → {t}: {n}")).collect::<Vec<_>>().join(", ");
        println!("{} keys moved ({flows})", applied.moved);
        for (key, from, to) in applied.moves.iter().take(10) {
            println!("  {key}: {from} → {to}");
        }
        if applied.moves.len() > 10 {
            println!("  … and {} more (stampede ring history)", applied.moved - 10);
        }
    } else if applied.added == 0 && applied.removed == 0 {
        println!("no key moved");
    }
    if let Some(note) = applied.note {
        println!("note: {note}");
    }
}

/// compare.parquet (one row per strategy) and growth.parquet (one per step), atomically.
fn write_compare(out: &Path, rows: &[compare::Row], growth: &[compare::Growth]) -> Result<()> {
    let fail = |e: stampede_output::OutputError| Error::io(format!("cannot write the comparison: {e}"));
    std::fs::create_dir_all(out).map_err(|e| Error::io(format!("{}: {e}", out.display())))?;
    let text = |f: fn(&compare::Row) -> &str| ColumnValues::Utf8(rows.iter().map(|r| f(r).to_string()).collect());
    let real = |f: fn(&compare::Row) -> f64| ColumnValues::F64(rows.iter().map(f).collect());
    let columns = [
        ("strategy", ColumnType::Utf8),
        ("knobs", ColumnType::Utf8),
        ("nodes", ColumnType::U32),
        ("keys", ColumnType::U64),
        ("peak_over_mean", ColumnType::F64),
        ("cv", ColumnType::F64),
        ("moved_on_add", ColumnType::F64),
        ("ideal_on_add", ColumnType::F64),
        ("moved_on_remove", ColumnType::F64),
        ("ideal_on_remove", ColumnType::F64),
        ("lookup_ns", ColumnType::F64),
        ("memory_bytes", ColumnType::U64),
        ("build_ms", ColumnType::F64),
        ("note", ColumnType::Utf8),
    ];
    let specs: Vec<ColumnSpec> = columns.iter().map(|(n, t)| ColumnSpec::new(*n, *t)).collect();
    let mut table = TableWriter::create(out, "compare.parquet", &specs).map_err(fail)?;
    table
        .write(vec![
            text(|r| &r.strategy),
            text(|r| &r.knobs),
            ColumnValues::U32(rows.iter().map(|r| r.nodes).collect()),
            ColumnValues::U64(rows.iter().map(|r| r.keys).collect()),
            real(|r| r.peak_over_mean),
            real(|r| r.cv),
            real(|r| r.moved_on_add),
            real(|r| r.ideal_on_add),
            real(|r| r.moved_on_remove),
            real(|r| r.ideal_on_remove),
            real(|r| r.lookup_ns),
            ColumnValues::U64(rows.iter().map(|r| r.memory_bytes).collect()),
            real(|r| r.build_ms),
            text(|r| &r.note),
        ])
        .map_err(fail)?;
    let mut staged = StagedSet::default();
    staged.push(table.finish().map_err(fail)?);
    if !growth.is_empty() {
        let specs = [
            ColumnSpec::new("strategy", ColumnType::Utf8),
            ColumnSpec::new("nodes", ColumnType::U32),
            ColumnSpec::new("moved", ColumnType::F64),
            ColumnSpec::new("ideal", ColumnType::F64),
            ColumnSpec::new("peak_over_mean", ColumnType::F64),
        ];
        let mut table = TableWriter::create(out, "growth.parquet", &specs).map_err(fail)?;
        table
            .write(vec![
                ColumnValues::Utf8(growth.iter().map(|g| g.strategy.clone()).collect()),
                ColumnValues::U32(growth.iter().map(|g| g.nodes).collect()),
                ColumnValues::F64(growth.iter().map(|g| g.moved).collect()),
                ColumnValues::F64(growth.iter().map(|g| g.ideal).collect()),
                ColumnValues::F64(growth.iter().map(|g| g.peak_over_mean).collect()),
            ])
            .map_err(fail)?;
        staged.push(table.finish().map_err(fail)?);
    }
    staged.commit().map_err(fail)?;
    Ok(())
}
