//! A ring and its operations: add or remove a node or keys, switch strategy. Every
//! operation returns the keys it moved, from which node to which. The logic is
//! written once over [`KeyStore`], so the SQLite journal and the in-memory replay
//! run exactly the same code.
//!
//! Which keys an operation re-examines is the strategy's [`Scope`]: on a ring, a new
//! node can only take keys in the arcs its points now end, and a removed node's keys
//! are the only ones that move; bounded loads, Maglev and a jump-hash renumbering
//! re-examine every key. Invariants (asserted in debug builds): a key's owner is
//! always a live node (or none on an empty ring), and after every operation every
//! re-examined key sits where the placement puts it.

use serde::{Deserialize, Serialize};

use crate::hash::HashKind;
use crate::store::{KeyRow, KeyStore};
use crate::strategy::{bounded_assign, NodeSpec, Placement, Scope, Settings, Strategy};

/// A live node: a stable id (never reused), its name and weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: u32,
    pub name: String,
    pub weight: f64,
}

/// One journaled operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Init {
        settings: Settings,
    },
    Strategy {
        settings: Settings,
    },
    AddNode {
        name: String,
        weight: f64,
    },
    RemoveNode {
        name: String,
    },
    AddKeys {
        names: Vec<String>,
    },
    /// `count` keys named `prefix` + start, start+1, ….
    AddGenerated {
        prefix: String,
        start: u64,
        count: u64,
    },
    RemoveKey {
        name: String,
    },
}

impl Op {
    /// One line for `history`.
    pub fn describe(&self) -> String {
        match self {
            Op::Init { settings } | Op::Strategy { settings } => {
                let verb = if matches!(self, Op::Init { .. }) { "init" } else { "strategy" };
                format!("{verb} {} (hash {}, {})", settings.strategy, settings.hash, knobs(settings))
            }
            Op::AddNode { name, weight } if *weight == 1.0 => format!("add-node {name}"),
            Op::AddNode { name, weight } => format!("add-node {name} --weight {weight}"),
            Op::RemoveNode { name } => format!("remove-node {name}"),
            Op::AddKeys { names } if names.len() <= 3 => format!("add-keys {}", names.join(" ")),
            Op::AddKeys { names } => format!("add-keys {} … ({} keys)", names[..2].join(" "), names.len()),
            Op::AddGenerated { prefix, start, count } => {
                format!("add-keys --count {count} --prefix {prefix} ({prefix}{start} … {prefix}{})", start + count - 1)
            }
            Op::RemoveKey { name } => format!("remove-key {name}"),
        }
    }
}

/// The knobs that matter for a strategy, for messages.
pub fn knobs(settings: &Settings) -> String {
    match settings.strategy() {
        Ok(Strategy::Vnodes) => format!("{} vnodes", settings.vnodes),
        Ok(Strategy::Bounded) => format!("{} vnodes, c = {}", settings.vnodes, settings.capacity_factor),
        Ok(Strategy::Multiprobe) => format!("{} probes", settings.probes),
        Ok(Strategy::Maglev) => format!("table {}", settings.table_size),
        _ => "no knobs".into(),
    }
}

/// A key that changed owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Move {
    pub key: u64,
    pub from: Option<u32>,
    pub to: Option<u32>,
}

/// What an operation did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Existing keys that changed owner.
    pub moves: Vec<Move>,
    /// Keys added (with their owner) or removed by the operation itself.
    pub added: Vec<(u64, Option<u32>)>,
    pub removed: Vec<KeyRow>,
    /// Something the user should know (a jump-hash renumbering).
    pub note: Option<String>,
}

/// A ring: settings, live nodes, and its keys in a store.
pub struct Explorer<S: KeyStore> {
    pub settings: Settings,
    pub nodes: Vec<Node>,
    pub next_node_id: u32,
    /// Keys generated so far by `add-keys --count` (the next start).
    pub generated: u64,
    pub store: S,
    placement: Placement,
}

impl<S: KeyStore> Explorer<S> {
    /// A ring with `settings` (validated) and nodes, over `store`.
    pub fn new(
        settings: Settings,
        nodes: Vec<Node>,
        next_node_id: u32,
        generated: u64,
        store: S,
    ) -> Result<Self, String> {
        settings.validate()?;
        let placement = Placement::build(&settings, &specs(&nodes));
        Ok(Explorer { settings, nodes, next_node_id, generated, store, placement })
    }

    pub fn strategy(&self) -> Strategy {
        self.settings.strategy().expect("validated settings")
    }

    pub fn hash_kind(&self) -> HashKind {
        self.settings.hash_kind().expect("validated settings")
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The node with id `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The name of node `id` (or "(none)").
    pub fn node_name(&self, id: Option<u32>) -> String {
        id.and_then(|id| self.node(id)).map_or_else(|| "(none)".into(), |n| n.name.clone())
    }

    /// The owner id of a key hash under the current placement (not bounded loads).
    pub fn home(&self, hash: u64) -> Option<u32> {
        self.placement.lookup(hash).map(|i| self.nodes[i as usize].id)
    }

    /// Applies `op`; on `Err` the caller discards the store's changes (a transaction).
    pub fn apply(&mut self, op: &Op) -> Result<Outcome, String> {
        let outcome = match op {
            Op::Init { .. } => return Err("a ring is initialised once".into()),
            Op::Strategy { settings } => {
                settings.validate()?;
                if !settings.weighted() {
                    if let Some(node) = self.nodes.iter().find(|n| n.weight != 1.0) {
                        return Err(format!(
                            "strategy {} ignores weights, and node {} has weight {}; remove it first or choose vnodes, bounded or rendezvous",
                            settings.strategy, node.name, node.weight
                        ));
                    }
                }
                self.settings = settings.clone();
                self.rebuild();
                Outcome { moves: self.reassign(Scope::All)?, ..Outcome::default() }
            }
            Op::AddNode { name, weight } => self.add_node(name, *weight)?,
            Op::RemoveNode { name } => self.remove_node(name)?,
            Op::AddKeys { names } => self.add_keys(names.iter().map(String::as_str))?,
            Op::AddGenerated { prefix, start, count } => {
                let names: Vec<String> = (*start..start + count).map(|i| format!("{prefix}{i}")).collect();
                let outcome = self.add_keys(names.iter().map(String::as_str))?;
                self.generated = self.generated.max(start + count);
                outcome
            }
            Op::RemoveKey { name } => {
                let key = self.store.remove_key(name)?.ok_or_else(|| format!("remove-key {name}: no such key"))?;
                let moves = if self.strategy() == Strategy::Bounded { self.reassign(Scope::All)? } else { Vec::new() };
                Outcome { moves, removed: vec![key], ..Outcome::default() }
            }
        };
        self.check()?;
        Ok(outcome)
    }

    fn rebuild(&mut self) {
        self.placement = Placement::build(&self.settings, &specs(&self.nodes));
    }

    fn add_node(&mut self, name: &str, weight: f64) -> Result<Outcome, String> {
        check_name("node", name)?;
        if self.nodes.iter().any(|n| n.name == name) {
            return Err(format!("add-node {name}: a node with that name exists"));
        }
        if !(weight.is_finite() && weight > 0.0 && weight <= 1000.0) {
            return Err(format!("add-node {name} --weight {weight}: must be a number above 0 and at most 1000"));
        }
        if weight != 1.0 && !self.settings.weighted() {
            return Err(format!(
                "add-node {name} --weight {weight}: strategy {} gives every node one share; weights work with vnodes, bounded and rendezvous",
                self.settings.strategy
            ));
        }
        if self.strategy() == Strategy::Maglev && self.nodes.len() + 1 >= self.settings.table_size as usize {
            return Err(format!(
                "add-node {name}: a Maglev table of {} slots holds fewer nodes",
                self.settings.table_size
            ));
        }
        let id = self.next_node_id;
        self.next_node_id += 1;
        self.nodes.push(Node { id, name: name.to_string(), weight });
        self.rebuild();
        let scope = match self.strategy() {
            Strategy::Ring | Strategy::Vnodes => self.placement.add_scope(self.nodes.len() as u32 - 1),
            _ => Scope::All,
        };
        Ok(Outcome { moves: self.reassign(scope)?, ..Outcome::default() })
    }

    fn remove_node(&mut self, name: &str) -> Result<Outcome, String> {
        let index = self
            .nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| format!("remove-node {name}: no such node (nodes: {})", self.node_names()))?;
        let last = index + 1 == self.nodes.len();
        let removed = self.nodes.remove(index);
        self.rebuild();
        let scope = match self.strategy() {
            Strategy::Ring | Strategy::Vnodes | Strategy::Rendezvous | Strategy::Multiprobe => Scope::OwnedByRemoved,
            Strategy::Jump if last => Scope::OwnedByRemoved,
            Strategy::Jump | Strategy::Maglev | Strategy::Bounded => Scope::All,
        };
        let owned = self.store.keys_owned_by(removed.id)?;
        let own = owned.len();
        let moves = match scope {
            Scope::OwnedByRemoved => self.reassign_rows(owned)?,
            other => self.reassign(other)?,
        };
        let note = (self.strategy() == Strategy::Jump && !last).then(|| {
            format!(
                "jump hash can only remove its last bucket: {name} was bucket {index} of {}, so the {} bucket(s) after it \
                 were renumbered and {} keys moved, where removing the last bucket moves only that bucket's keys ({own} here \
                 were {name}'s)",
                self.nodes.len() + 1,
                self.nodes.len() - index,
                moves.len()
            )
        });
        Ok(Outcome { moves, note, ..Outcome::default() })
    }

    fn add_keys<'n>(&mut self, names: impl Iterator<Item = &'n str>) -> Result<Outcome, String> {
        let hash = self.hash_kind();
        let bounded = self.strategy() == Strategy::Bounded;
        let mut added = Vec::new();
        for name in names {
            check_name("key", name)?;
            let h = hash.name(name);
            let owner = if bounded { None } else { self.home(h) };
            let id = self.store.insert_key(name, h, owner).map_err(|e| format!("add-keys: {e}"))?;
            added.push((id, owner));
        }
        let mut moves = Vec::new();
        if bounded {
            // New keys were inserted without an owner: their placement is not a move.
            // Their ids ascend, so each is found by binary search.
            for m in self.reassign(Scope::All)? {
                match added.binary_search_by_key(&m.key, |a| a.0) {
                    Ok(i) => added[i].1 = m.to,
                    Err(_) => moves.push(m),
                }
            }
        }
        Ok(Outcome { moves, added, ..Outcome::default() })
    }

    /// Re-examines the keys in `scope` and moves those whose owner changed.
    fn reassign(&mut self, scope: Scope) -> Result<Vec<Move>, String> {
        match scope {
            Scope::All if self.strategy() == Strategy::Bounded => {
                let keys = self.store.all_keys()?;
                let owners = self.bounded_owners(&keys);
                let mut moves = Vec::new();
                for (key, owner) in keys.iter().zip(owners) {
                    if key.owner != owner {
                        self.store.set_owner(key, owner)?;
                        moves.push(Move { key: key.id, from: key.owner, to: owner });
                    }
                }
                Ok(moves)
            }
            Scope::All => {
                let keys = self.store.all_keys()?;
                self.reassign_rows(keys)
            }
            Scope::Arcs(arcs) => {
                let mut keys = Vec::new();
                for (from, to) in arcs {
                    keys.extend(self.store.keys_in_arc(from, to)?);
                }
                self.reassign_rows(keys)
            }
            Scope::OwnedByRemoved => unreachable!("handled by remove_node"),
        }
    }

    fn reassign_rows(&mut self, keys: Vec<KeyRow>) -> Result<Vec<Move>, String> {
        let mut moves = Vec::new();
        for key in keys {
            let owner = self.home(key.hash);
            if key.owner != owner {
                self.store.set_owner(&key, owner)?;
                moves.push(Move { key: key.id, from: key.owner, to: owner });
            }
        }
        Ok(moves)
    }

    /// Bounded loads over `keys` in id order (see [`bounded_assign`]).
    pub fn bounded_owners(&self, keys: &[KeyRow]) -> Vec<Option<u32>> {
        let weights: Vec<f64> = self.nodes.iter().map(|n| n.weight).collect();
        let hashes: Vec<u64> = keys.iter().map(|k| k.hash).collect();
        let owners = bounded_assign(&self.placement, &weights, self.settings.capacity_factor, &hashes);
        if owners.is_empty() {
            return vec![None; keys.len()];
        }
        owners.into_iter().map(|i| Some(self.nodes[i as usize].id)).collect()
    }

    fn node_names(&self) -> String {
        if self.nodes.is_empty() {
            "none".into()
        } else {
            self.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
        }
    }

    /// Debug builds: every key is owned by a live node, or by none on an empty ring.
    fn check(&mut self) -> Result<(), String> {
        if cfg!(debug_assertions) {
            let counts = self.store.counts()?;
            for owner in counts.keys() {
                match owner {
                    None => debug_assert!(self.nodes.is_empty(), "a key without owner on a ring with nodes"),
                    Some(id) => debug_assert!(self.node(*id).is_some(), "a key owned by removed node {id}"),
                }
            }
        }
        Ok(())
    }
}

/// Names are 1–200 printable characters.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(format!("{what} name {name:?}: must be 1 to 200 printable characters"));
    }
    Ok(())
}

fn specs(nodes: &[Node]) -> Vec<NodeSpec> {
    nodes.iter().map(|n| NodeSpec { name: n.name.clone(), weight: n.weight }).collect()
}
