//! The journal and the explorer against each other, on random sequences of
//! operations for every strategy: the state rebuilt from the journal equals the
//! tables; every key sits where a full recomputation puts it (so the arc-only fast
//! path never misses a key); a join moves keys only to the new node and a leave only
//! the leaver's keys, where the strategy promises it; a refused operation changes
//! nothing.

use proptest::prelude::{prop_assert_eq, prop_oneof, proptest, ProptestConfig, TestCaseError};
use proptest::strategy::Strategy as _;
use stampede_kernel::names::Named;

use crate::explorer::Op;
use crate::journal::{replay, Journal};
use crate::store::KeyStore;
use crate::strategy::{Settings, Strategy};

fn settings(strategy: Strategy) -> Settings {
    // Small knobs so that rings of a few nodes stay quick; fast hashing.
    Settings {
        strategy: strategy.name().into(),
        hash: "fast".into(),
        vnodes: 8,
        table_size: 251,
        probes: 5,
        ..Settings::default()
    }
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    let node = (0..6u8).prop_map(|i| format!("n{i}"));
    let key = (0..40u8).prop_map(|i| format!("k{i}"));
    prop_oneof![
        3 => node.clone().prop_map(|name| Op::AddNode { name, weight: 1.0 }),
        1 => (node.clone(), 1..4u8).prop_map(|(name, w)| Op::AddNode { name, weight: w as f64 }),
        2 => node.prop_map(|name| Op::RemoveNode { name }),
        3 => proptest::collection::vec(key.clone(), 1..6).prop_map(|mut names| { names.dedup(); Op::AddKeys { names } }),
        1 => (1..20u64).prop_map(|count| Op::AddGenerated { prefix: "g".into(), start: 0, count }),
        2 => key.prop_map(|name| Op::RemoveKey { name }),
    ]
}

/// What a reader sees: the keys with their owners, and the nodes.
fn snapshot(journal: &mut Journal) -> (Vec<(String, String)>, Vec<String>) {
    let nodes = journal.read(|e| Ok(e.nodes.iter().map(|n| n.name.clone()).collect())).unwrap();
    (journal.assignment().unwrap(), nodes)
}

fn run(strategy: Strategy, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = Journal::open(&dir.path().join("ring.sqlite"), true).unwrap();
    journal.init(&settings(strategy)).unwrap();
    let mut generated = 0;
    for op in ops {
        // Generated keys continue the counter, as the CLI does.
        let op = match op {
            Op::AddGenerated { prefix, count, .. } => {
                let start = generated;
                generated += count;
                Op::AddGenerated { prefix, start, count }
            }
            other => other,
        };
        let before = snapshot(&mut journal);
        match journal.apply(&op) {
            Err(_) => {
                prop_assert_eq!(snapshot(&mut journal), before, "a refused {:?} changed the ring", op);
                if let Op::AddGenerated { count, .. } = op {
                    generated -= count;
                }
            }
            Ok(applied) => {
                prop_assert_eq!(applied.moved as usize, applied.moves.len());
                let moved: Vec<&(String, String, String)> = applied.moves.iter().collect();
                match &op {
                    Op::AddNode { name, .. }
                        if matches!(
                            strategy,
                            Strategy::Ring
                                | Strategy::Vnodes
                                | Strategy::Jump
                                | Strategy::Rendezvous
                                | Strategy::Multiprobe
                        ) =>
                    {
                        for (key, _, to) in &moved {
                            prop_assert_eq!(to, name, "{:?}: {} moved to another node than the new one", strategy, key);
                        }
                    }
                    Op::RemoveNode { name }
                        if matches!(
                            strategy,
                            Strategy::Ring | Strategy::Vnodes | Strategy::Rendezvous | Strategy::Multiprobe
                        ) =>
                    {
                        for (key, from, _) in &moved {
                            prop_assert_eq!(from, name, "{:?}: {} moved though its node stayed", strategy, key);
                        }
                        let held = before.0.iter().filter(|(_, owner)| owner == name).count();
                        prop_assert_eq!(moved.len(), held, "every key of the leaver moves, and only those");
                    }
                    _ => {}
                }
            }
        }
        // Every key sits where a full recomputation puts it.
        journal
            .read(|e| {
                let keys = e.store.all_keys()?;
                let expected: Vec<Option<u32>> = if e.strategy() == Strategy::Bounded {
                    e.bounded_owners(&keys)
                } else {
                    keys.iter().map(|k| e.home(k.hash)).collect()
                };
                for (key, owner) in keys.iter().zip(expected) {
                    if key.owner != owner {
                        return Err(format!("key {} is on {:?}, placement says {owner:?}", key.id, key.owner));
                    }
                }
                Ok(())
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    // The journal alone rebuilds the tables.
    let mut rebuilt = replay(&journal.history().unwrap(), None).map_err(TestCaseError::fail)?;
    let live = snapshot(&mut journal);
    let ids = rebuilt.store.assignment();
    let replayed: Vec<(String, String)> = ids.into_iter().map(|(k, o)| (k, rebuilt.node_name(o))).collect();
    prop_assert_eq!(&replayed, &live.0);
    prop_assert_eq!(rebuilt.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>(), live.1);
    prop_assert_eq!(rebuilt.store.key_count().unwrap() as usize, live.0.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn journal_and_replay_agree_for_every_strategy(ops in proptest::collection::vec(op(), 1..30), which in 0..7usize) {
        run(Strategy::ALL[which], ops)?;
    }
}

#[test]
fn foreign_corrupt_and_newer_files_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some text, not a database, long enough to have a header.......").unwrap();
    let before = std::fs::read(&text).unwrap();
    let Err(error) = Journal::open(&text, false).and_then(|j| j.history()) else { panic!("refused") };
    let error = error.to_string();
    assert!(error.contains("not a SQLite database"), "{error}");
    assert_eq!(std::fs::read(&text).unwrap(), before);

    let foreign = dir.path().join("other.sqlite");
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
    drop(conn);
    let Err(error) = Journal::open(&foreign, false) else { panic!("refused") };
    let error = error.to_string();
    assert!(error.contains("not a stampede ring"), "{error}");

    let newer = dir.path().join("newer.sqlite");
    let mut journal = Journal::open(&newer, true).unwrap();
    journal.init(&Settings::default()).unwrap();
    drop(journal);
    let conn = rusqlite::Connection::open(&newer).unwrap();
    conn.pragma_update(None, "user_version", 2).unwrap();
    drop(conn);
    let Err(error) = Journal::open(&newer, false) else { panic!("refused") };
    let error = error.to_string();
    assert!(error.contains("newer stampede") && error.contains("schema 2"), "{error}");

    let missing = dir.path().join("missing.sqlite");
    let Err(error) = Journal::open(&missing, false) else { panic!("refused") };
    let error = error.to_string();
    assert!(error.contains("stampede ring init"), "{error}");
    assert!(!missing.exists());
}

#[test]
fn jump_hash_says_what_removing_a_middle_bucket_costs() {
    let dir = tempfile::tempdir().unwrap();
    let mut journal = Journal::open(&dir.path().join("j.sqlite"), true).unwrap();
    journal.init(&settings(Strategy::Jump)).unwrap();
    for name in ["a", "b", "c", "d"] {
        journal.apply(&Op::AddNode { name: name.into(), weight: 1.0 }).unwrap();
    }
    journal.apply(&Op::AddGenerated { prefix: "k".into(), start: 0, count: 4000 }).unwrap();
    let last = journal.apply(&Op::RemoveNode { name: "d".into() }).unwrap();
    assert!(last.note.is_none());
    assert!(last.moves.iter().all(|(_, from, _)| from == "d"), "removing the last bucket moves only its keys");
    let middle = journal.apply(&Op::RemoveNode { name: "a".into() }).unwrap();
    let note = middle.note.expect("a note");
    assert!(note.contains("can only remove its last bucket") && note.contains("renumbered"), "{note}");
    let others = middle.moves.iter().filter(|(_, from, _)| from != "a").count();
    assert!(others > 500, "renumbering moved {others} keys of the nodes that stayed");
}
