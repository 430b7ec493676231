//! The ring's SQLite file: the journal of operations is the source of truth; the
//! `nodes` and `keys` tables are derived state, kept in step by the same transaction
//! that appends each operation, and always rebuildable by replaying the journal
//! ([`replay`]), which the tests compare with the tables.
//!
//! Keys are stored in ring order (`WITHOUT ROWID`, keyed by position): the keys a new
//! node takes lie in a few arcs, so moving them rewrites a few contiguous pages
//! rather than touching the whole table — what keeps a join on a million-key ring
//! well under a second.
//!
//! The file is WAL-mode with a busy timeout, so `stampede ring` and `stampede serve`
//! can share it. Each operation is one `BEGIN IMMEDIATE` transaction: a refused
//! operation (bad input) rolls back and leaves the database as it was. The file is
//! marked with an application id and a schema version; a foreign, corrupt or newer
//! file is refused with a message saying which.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde::Serialize;

use crate::explorer::{Explorer, Node, Op, Outcome};
use crate::hash::position;
use crate::store::{KeyRow, KeyStore, MemoryStore};
use crate::strategy::Settings;

/// 'STMP': marks a stampede ring database (`PRAGMA application_id`).
pub const APPLICATION_ID: i32 = 0x5354_4d50;
/// The schema this version reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i32 = 1;
/// Individual moves are kept for operations that move at most this many keys (the
/// web page highlights them); larger ones keep their totals per (from, to).
pub const MOVES_KEPT: usize = 10_000;

const SCHEMA: &str = "
CREATE TABLE ring (id INTEGER PRIMARY KEY CHECK (id = 1), settings TEXT NOT NULL,
                   next_node_id INTEGER NOT NULL, generated INTEGER NOT NULL);
CREATE TABLE journal (seq INTEGER PRIMARY KEY, op TEXT NOT NULL, moved INTEGER NOT NULL,
                      flows TEXT NOT NULL, note TEXT, at INTEGER NOT NULL);
CREATE TABLE nodes (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, weight REAL NOT NULL,
                    joined INTEGER NOT NULL);
CREATE TABLE keys (position INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL UNIQUE,
                   hash INTEGER NOT NULL, owner INTEGER, PRIMARY KEY (position, id)) WITHOUT ROWID;
CREATE UNIQUE INDEX keys_id ON keys(id);
CREATE INDEX keys_owner ON keys(owner, position);
CREATE TABLE moves (seq INTEGER NOT NULL, key TEXT NOT NULL, from_node TEXT, to_node TEXT);
CREATE INDEX moves_seq ON moves(seq);
";

/// A problem with the database or the operation: bad input (exit 2) or I/O (exit 3).
#[derive(Debug)]
pub enum JournalError {
    BadInput(String),
    Io(String),
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::BadInput(m) | JournalError::Io(m) => f.write_str(m),
        }
    }
}

type Result<T> = std::result::Result<T, JournalError>;

fn io(path: &Path) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
    move |e| {
        let text = e.to_string();
        if text.contains("not a database") || text.contains("malformed") {
            JournalError::BadInput(format!("{}: not a SQLite database, or a corrupt one ({text})", path.display()))
        } else {
            JournalError::Io(format!("{}: {text}", path.display()))
        }
    }
}

/// An open ring database.
pub struct Journal {
    conn: Connection,
    path: std::path::PathBuf,
}

/// One journal entry as `history` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    pub seq: u64,
    pub op: Op,
    pub description: String,
    pub moved: u64,
    /// (from, to, keys) — who gave keys to whom.
    pub flows: Vec<(String, String, u64)>,
    pub note: Option<String>,
    /// When it was applied, in seconds since 1970 (UTC).
    pub at: u64,
}

/// What an applied operation reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Applied {
    pub seq: u64,
    pub description: String,
    pub moved: u64,
    pub flows: Vec<(String, String, u64)>,
    pub added: u64,
    pub removed: u64,
    pub note: Option<String>,
    /// The moved keys as (key, from, to), when at most [`MOVES_KEPT`].
    pub moves: Vec<(String, String, String)>,
}

impl Journal {
    /// Opens the ring at `path`; `create` allows a new file (for `init`).
    pub fn open(path: &Path, create: bool) -> Result<Journal> {
        if !create && !path.exists() {
            return Err(JournalError::BadInput(format!(
                "{}: no ring database here; start one with `stampede ring init` (or pass --db FILE)",
                path.display()
            )));
        }
        if path.is_dir() {
            return Err(JournalError::BadInput(format!("{}: is a folder, not a ring database", path.display())));
        }
        let conn = Connection::open(path).map_err(io(path))?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(io(path))?;
        let journal = Journal { conn, path: path.to_path_buf() };
        let (application, version, tables) = journal.identity()?;
        if tables > 0 && application != APPLICATION_ID {
            return Err(JournalError::BadInput(format!(
                "{}: a SQLite database, but not a stampede ring (application id {application:#x}); refusing to touch it",
                path.display()
            )));
        }
        if version > SCHEMA_VERSION {
            return Err(JournalError::BadInput(format!(
                "{}: written by a newer stampede (ring schema {version}); this one ({}) reads schema {SCHEMA_VERSION}",
                path.display(),
                env!("CARGO_PKG_VERSION")
            )));
        }
        if tables > 0 || !create {
            journal.wal()?;
        }
        Ok(journal)
    }

    /// WAL, so readers and one writer share the file; `synchronous = NORMAL`, WAL's
    /// usual pairing: a crash never corrupts the file, a power cut may lose the last
    /// committed operation.
    fn wal(&self) -> Result<()> {
        let e = io(&self.path);
        self.conn.pragma_update(None, "journal_mode", "WAL").map_err(&e)?;
        self.conn.pragma_update(None, "synchronous", "NORMAL").map_err(&e)
    }

    fn identity(&self) -> Result<(i32, i32, i64)> {
        let e = io(&self.path);
        let application: i32 = self.conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(&e)?;
        let version: i32 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(&e)?;
        let tables: i64 = self.conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(&e)?;
        Ok((application, version, tables))
    }

    /// Whether the file holds a ring.
    pub fn initialised(&self) -> Result<bool> {
        Ok(self.identity()?.0 == APPLICATION_ID)
    }

    /// Creates the ring with `settings`: operation 1.
    pub fn init(&mut self, settings: &Settings) -> Result<Applied> {
        settings.validate().map_err(JournalError::BadInput)?;
        if self.initialised()? {
            return Err(JournalError::BadInput(format!(
                "{}: already holds a ring; `stampede ring strategy` switches its strategy, or use another --db",
                self.path.display()
            )));
        }
        let e = io(&self.path);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&e)?;
        tx.execute_batch(SCHEMA).map_err(&e)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(&e)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(&e)?;
        let text = serde_json::to_string(settings).expect("settings serialise");
        tx.execute("INSERT INTO ring VALUES (1, ?1, 0, 0)", params![text]).map_err(&e)?;
        let op = Op::Init { settings: settings.clone() };
        append(&tx, &op, &Outcome::default(), &BTreeMap::new(), &[]).map_err(&e)?;
        tx.commit().map_err(&e)?;
        self.wal()?;
        Ok(Applied {
            seq: 1,
            description: op.describe(),
            moved: 0,
            flows: vec![],
            added: 0,
            removed: 0,
            note: None,
            moves: vec![],
        })
    }

    fn require_ring(&self) -> Result<()> {
        if self.initialised()? {
            Ok(())
        } else {
            Err(JournalError::BadInput(format!(
                "{}: holds no ring yet; start one with `stampede ring init`",
                self.path.display()
            )))
        }
    }

    /// Applies `op` in one transaction; a refused operation changes nothing.
    pub fn apply(&mut self, op: &Op) -> Result<Applied> {
        self.require_ring()?;
        let path = self.path.clone();
        let e = io(&path);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&e)?;
        let (settings, nodes, next_node_id, generated) = load_ring(&tx).map_err(&e)?;
        let names_before: BTreeMap<u32, String> = nodes.iter().map(|n| (n.id, n.name.clone())).collect();
        let store = SqliteStore { tx: &tx };
        let mut explorer =
            Explorer::new(settings, nodes, next_node_id, generated, store).map_err(JournalError::BadInput)?;
        let outcome = explorer.apply(op).map_err(JournalError::BadInput)?;
        // Node names before and after: a move may name a node that just left or joined.
        let mut names = names_before;
        names.extend(explorer.nodes.iter().map(|n| (n.id, n.name.clone())));
        let moved_names = if outcome.moves.len() <= MOVES_KEPT {
            let ids: Vec<u64> = outcome.moves.iter().map(|m| m.key).collect();
            explorer.store.names(&ids).map_err(JournalError::Io)?
        } else {
            Vec::new()
        };
        let (settings, nodes, next_node_id, generated) =
            (explorer.settings.clone(), explorer.nodes.clone(), explorer.next_node_id, explorer.generated);
        drop(explorer);
        save_ring(&tx, &settings, &nodes, next_node_id, generated).map_err(&e)?;
        let seq = append(&tx, op, &outcome, &names, &moved_names).map_err(&e)?;
        tx.commit().map_err(&e)?;
        let name = |id: Option<u32>| id.and_then(|id| names.get(&id).cloned()).unwrap_or_else(|| "(none)".into());
        Ok(Applied {
            seq,
            description: op.describe(),
            moved: outcome.moves.len() as u64,
            flows: flows(&outcome, &names),
            added: outcome.added.len() as u64,
            removed: outcome.removed.len() as u64,
            note: outcome.note.clone(),
            moves: outcome
                .moves
                .iter()
                .zip(&moved_names)
                .map(|(m, key)| (key.clone(), name(m.from), name(m.to)))
                .collect(),
        })
    }

    /// Adds `count` generated keys, `prefix` + the next numbers of the ring's counter.
    pub fn add_generated(&mut self, prefix: String, count: u64) -> Result<Applied> {
        let start = self.read(|e| Ok(e.generated))?;
        self.apply(&Op::AddGenerated { prefix, start, count })
    }

    /// Runs `f` on the current ring, read-only.
    pub fn read<T>(
        &mut self,
        f: impl FnOnce(&mut Explorer<SqliteStore>) -> std::result::Result<T, String>,
    ) -> Result<T> {
        self.require_ring()?;
        let path = self.path.clone();
        let e = io(&path);
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Deferred).map_err(&e)?;
        let (settings, nodes, next_node_id, generated) = load_ring(&tx).map_err(&e)?;
        let mut explorer = Explorer::new(settings, nodes, next_node_id, generated, SqliteStore { tx: &tx })
            .map_err(JournalError::BadInput)?;
        let value = f(&mut explorer).map_err(JournalError::BadInput)?;
        drop(explorer);
        tx.commit().map_err(&e)?;
        Ok(value)
    }

    /// Every journal entry in order.
    pub fn history(&self) -> Result<Vec<Entry>> {
        self.require_ring()?;
        let e = io(&self.path);
        let mut statement =
            self.conn.prepare("SELECT seq, op, moved, flows, note, at FROM journal ORDER BY seq").map_err(&e)?;
        let rows = statement
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            })
            .map_err(&e)?;
        let mut entries = Vec::new();
        for row in rows {
            let (seq, op, moved, flows, note, at) = row.map_err(&e)?;
            let op: Op = serde_json::from_str(&op).map_err(|err| {
                JournalError::BadInput(format!("{}: journal entry {seq} is unreadable: {err}", self.path.display()))
            })?;
            entries.push(Entry {
                seq: seq as u64,
                description: op.describe(),
                op,
                moved: moved as u64,
                flows: serde_json::from_str(&flows).unwrap_or_default(),
                note,
                at: at as u64,
            });
        }
        Ok(entries)
    }

    /// Every key with its owner's name, in insertion order (straight from the tables).
    pub fn assignment(&self) -> Result<Vec<(String, String)>> {
        self.require_ring()?;
        let e = io(&self.path);
        let mut statement = self
            .conn
            .prepare(
                "SELECT k.name, coalesce(n.name, '(none)') FROM keys k LEFT JOIN nodes n ON k.owner = n.id ORDER BY k.id",
            )
            .map_err(&e)?;
        let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(&e)?;
        rows.collect::<std::result::Result<_, _>>().map_err(&e)
    }

    /// The kept moves of operation `seq`: (key, from, to).
    pub fn moves(&self, seq: u64) -> Result<Vec<(String, String, String)>> {
        let e = io(&self.path);
        let mut statement = self
            .conn
            .prepare("SELECT key, coalesce(from_node, '(none)'), coalesce(to_node, '(none)') FROM moves WHERE seq = ?1")
            .map_err(&e)?;
        let rows = statement.query_map(params![seq as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(&e)?;
        rows.collect::<std::result::Result<_, _>>().map_err(&e)
    }
}

/// (from, to, keys) per pair, by node name.
fn flows(outcome: &Outcome, names: &BTreeMap<u32, String>) -> Vec<(String, String, u64)> {
    let mut pairs: BTreeMap<(String, String), u64> = BTreeMap::new();
    let name = |id: Option<u32>| id.and_then(|id| names.get(&id).cloned()).unwrap_or_else(|| "(none)".into());
    for m in &outcome.moves {
        *pairs.entry((name(m.from), name(m.to))).or_insert(0) += 1;
    }
    pairs.into_iter().map(|((from, to), n)| (from, to, n)).collect()
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn append(
    tx: &Transaction,
    op: &Op,
    outcome: &Outcome,
    names: &BTreeMap<u32, String>,
    moved_names: &[String],
) -> rusqlite::Result<u64> {
    let text = serde_json::to_string(op).expect("operations serialise");
    let flows = serde_json::to_string(&flows(outcome, names)).expect("flows serialise");
    tx.execute(
        "INSERT INTO journal (op, moved, flows, note, at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![text, outcome.moves.len() as i64, flows, outcome.note, now()],
    )?;
    let seq = tx.last_insert_rowid() as u64;
    if !moved_names.is_empty() {
        let mut insert = tx.prepare_cached("INSERT INTO moves VALUES (?1, ?2, ?3, ?4)")?;
        let name = |id: Option<u32>| id.and_then(|id| names.get(&id).cloned());
        for (m, key) in outcome.moves.iter().zip(moved_names) {
            insert.execute(params![seq as i64, key, name(m.from), name(m.to)])?;
        }
    }
    Ok(seq)
}

type RingRow = (Settings, Vec<Node>, u32, u64);

fn load_ring(tx: &Transaction) -> rusqlite::Result<RingRow> {
    let (settings, next, generated): (String, i64, i64) =
        tx.query_row("SELECT settings, next_node_id, generated FROM ring WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let settings: Settings = serde_json::from_str(&settings)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e)))?;
    let mut statement = tx.prepare_cached("SELECT id, name, weight FROM nodes ORDER BY joined")?;
    let nodes = statement
        .query_map([], |r| Ok(Node { id: r.get::<_, i64>(0)? as u32, name: r.get(1)?, weight: r.get(2)? }))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((settings, nodes, next as u32, generated as u64))
}

fn save_ring(tx: &Transaction, settings: &Settings, nodes: &[Node], next: u32, generated: u64) -> rusqlite::Result<()> {
    let text = serde_json::to_string(settings).expect("settings serialise");
    tx.execute(
        "UPDATE ring SET settings = ?1, next_node_id = ?2, generated = ?3 WHERE id = 1",
        params![text, next as i64, generated as i64],
    )?;
    let existing: Vec<i64> =
        tx.prepare_cached("SELECT id FROM nodes")?.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    for id in &existing {
        if !nodes.iter().any(|n| n.id as i64 == *id) {
            tx.execute("DELETE FROM nodes WHERE id = ?1", params![id])?;
        }
    }
    for (joined, node) in nodes.iter().enumerate() {
        tx.execute(
            "INSERT INTO nodes (id, name, weight, joined) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(id) DO UPDATE SET joined = excluded.joined",
            params![node.id as i64, node.name, node.weight, joined as i64],
        )?;
    }
    Ok(())
}

/// Keys in the `keys` table, inside the operation's transaction.
pub struct SqliteStore<'t> {
    tx: &'t Transaction<'t>,
}

fn sql(e: rusqlite::Error) -> String {
    e.to_string()
}

fn row(r: &rusqlite::Row) -> rusqlite::Result<KeyRow> {
    Ok(KeyRow {
        id: r.get::<_, i64>(0)? as u64,
        hash: r.get::<_, i64>(1)? as u64,
        owner: r.get::<_, Option<i64>>(2)?.map(|o| o as u32),
    })
}

impl SqliteStore<'_> {
    fn query(&self, sql_text: &str, args: impl rusqlite::Params) -> std::result::Result<Vec<KeyRow>, String> {
        let mut statement = self.tx.prepare_cached(sql_text).map_err(sql)?;
        let rows = statement.query_map(args, row).map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }
}

impl KeyStore for SqliteStore<'_> {
    fn keys_in_arc(&mut self, from: u32, to: u32) -> std::result::Result<Vec<KeyRow>, String> {
        let select = "SELECT id, hash, owner FROM keys";
        if from == to {
            self.all_keys()
        } else if from < to {
            self.query(&format!("{select} WHERE position > ?1 AND position <= ?2"), params![from as i64, to as i64])
        } else {
            self.query(&format!("{select} WHERE position > ?1 OR position <= ?2"), params![from as i64, to as i64])
        }
    }

    fn keys_owned_by(&mut self, node: u32) -> std::result::Result<Vec<KeyRow>, String> {
        self.query("SELECT id, hash, owner FROM keys WHERE owner = ?1 ORDER BY id", params![node as i64])
    }

    fn all_keys(&mut self) -> std::result::Result<Vec<KeyRow>, String> {
        self.query("SELECT id, hash, owner FROM keys ORDER BY id", [])
    }

    fn set_owner(&mut self, key: &KeyRow, owner: Option<u32>) -> std::result::Result<(), String> {
        let mut statement =
            self.tx.prepare_cached("UPDATE keys SET owner = ?1 WHERE position = ?2 AND id = ?3").map_err(sql)?;
        statement.execute(params![owner.map(|o| o as i64), position(key.hash) as i64, key.id as i64]).map_err(sql)?;
        Ok(())
    }

    fn insert_key(&mut self, name: &str, hash: u64, owner: Option<u32>) -> std::result::Result<u64, String> {
        let id: i64 = self
            .tx
            .prepare_cached("SELECT coalesce(max(id), 0) + 1 FROM keys")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(sql)?;
        let mut statement = self
            .tx
            .prepare_cached("INSERT INTO keys (position, id, name, hash, owner) VALUES (?1, ?2, ?3, ?4, ?5)")
            .map_err(sql)?;
        match statement.execute(params![position(hash) as i64, id, name, hash as i64, owner.map(|o| o as i64)]) {
            Ok(_) => Ok(id as u64),
            Err(e) if e.to_string().contains("UNIQUE") => Err(format!("key {name:?} already exists")),
            Err(e) => Err(sql(e)),
        }
    }

    fn remove_key(&mut self, name: &str) -> std::result::Result<Option<KeyRow>, String> {
        let found = self.find_key(name)?;
        if let Some(key) = found {
            self.tx
                .execute(
                    "DELETE FROM keys WHERE position = ?1 AND id = ?2",
                    params![position(key.hash) as i64, key.id as i64],
                )
                .map_err(sql)?;
        }
        Ok(found)
    }

    fn find_key(&mut self, name: &str) -> std::result::Result<Option<KeyRow>, String> {
        let mut statement = self.tx.prepare_cached("SELECT id, hash, owner FROM keys WHERE name = ?1").map_err(sql)?;
        statement.query_row(params![name], row).optional().map_err(sql)
    }

    fn key_count(&mut self) -> std::result::Result<u64, String> {
        self.tx.query_row("SELECT count(*) FROM keys", [], |r| r.get::<_, i64>(0)).map(|n| n as u64).map_err(sql)
    }

    fn counts(&mut self) -> std::result::Result<BTreeMap<Option<u32>, u64>, String> {
        let mut statement = self.tx.prepare_cached("SELECT owner, count(*) FROM keys GROUP BY owner").map_err(sql)?;
        let rows = statement
            .query_map([], |r| Ok((r.get::<_, Option<i64>>(0)?.map(|o| o as u32), r.get::<_, i64>(1)? as u64)))
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<BTreeMap<_, _>>>().map_err(sql)
    }

    fn sample(&mut self, limit: usize) -> std::result::Result<Vec<(String, u64, Option<u32>)>, String> {
        let mut statement =
            self.tx.prepare_cached("SELECT name, hash, owner FROM keys ORDER BY id LIMIT ?1").map_err(sql)?;
        let rows = statement
            .query_map(params![limit as i64], |r| {
                Ok((r.get(0)?, r.get::<_, i64>(1)? as u64, r.get::<_, Option<i64>>(2)?.map(|o| o as u32)))
            })
            .map_err(sql)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
    }

    fn names(&mut self, ids: &[u64]) -> std::result::Result<Vec<String>, String> {
        let mut statement =
            self.tx.prepare_cached("SELECT name FROM keys INDEXED BY keys_id WHERE id = ?1").map_err(sql)?;
        ids.iter()
            .map(|&id| statement.query_row(params![id as i64], |r| r.get(0)).optional().map(Option::unwrap_or_default))
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(sql)
    }
}

/// The ring after operation `to` (all of them when `None`), rebuilt in memory from
/// the journal alone.
pub fn replay(entries: &[Entry], to: Option<u64>) -> std::result::Result<Explorer<MemoryStore>, String> {
    let mut explorer: Option<Explorer<MemoryStore>> = None;
    for entry in entries.iter().filter(|e| to.is_none_or(|to| e.seq <= to)) {
        match (&entry.op, explorer.as_mut()) {
            (Op::Init { settings }, None) => {
                explorer = Some(Explorer::new(settings.clone(), Vec::new(), 0, 0, MemoryStore::default())?);
            }
            (op, Some(explorer)) => {
                explorer.apply(op).map_err(|e| format!("replaying operation {}: {e}", entry.seq))?;
            }
            (_, None) => return Err("the journal does not start with init".into()),
        }
    }
    explorer.ok_or_else(|| "the journal is empty".into())
}
