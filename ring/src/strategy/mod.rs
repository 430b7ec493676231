//! The seven placement strategies and what they are built from. A [`Placement`] is
//! made from the live nodes (in join order) and the ring's [`Settings`], and answers
//! which node a key hash belongs to. It also says which keys a change can move —
//! the arcs a new ring node takes, or the removed node's keys — so the explorer
//! re-examines only those where the strategy allows ([`Scope`]).
//!
//! Bounded loads is the ring's home node plus a cap on keys per node; the cap
//! depends on every key, so its assignment is computed over all keys
//! (`crate::explorer`), not per lookup.

pub mod jump;
pub mod maglev;
pub mod sorted_ring;

use serde::{Deserialize, Serialize};
use stampede_kernel::names::Named;

use self::maglev::Maglev;
use self::sorted_ring::SortedRing;
use crate::hash::{derive, position, HashKind};

stampede_kernel::named_enum! {
    /// How keys are placed on nodes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Strategy {
        /// The seed's ring: one point per node (Karger et al. 1997).
        Ring = "ring",
        /// The ring with V virtual nodes per node (weight × V for a weighted node).
        Vnodes = "vnodes",
        /// The V-vnode ring with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018).
        Bounded = "bounded",
        /// Jump consistent hash (Lamping, Veach 2014).
        Jump = "jump",
        /// Rendezvous / highest random weight (Thaler, Ravishankar 1998).
        Rendezvous = "rendezvous",
        /// Maglev (Eisenbud et al. 2016), a prime-size lookup table.
        Maglev = "maglev",
        /// Multi-probe consistent hashing (Appleton, O'Reilly 2015).
        Multiprobe = "multiprobe",
    }
}

/// A ring's strategy and its knobs, fixed at `init` (or a strategy switch). Fields
/// left out of a JSON body take their defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub strategy: String,
    pub hash: String,
    /// Virtual nodes per unit of weight (vnodes, bounded).
    pub vnodes: u32,
    /// Bounded loads: no node holds more than ⌈c · keys / nodes⌉.
    pub capacity_factor: f64,
    /// Multi-probe: hashes per key.
    pub probes: u32,
    /// Maglev: the table's size, a prime.
    pub table_size: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            strategy: "vnodes".into(),
            hash: "sha256".into(),
            vnodes: 150,
            capacity_factor: 1.25,
            probes: 21,
            table_size: maglev::DEFAULT_TABLE_SIZE,
        }
    }
}

impl Settings {
    /// The strategy, checked.
    pub fn strategy(&self) -> Result<Strategy, String> {
        Strategy::from_name(&self.strategy).ok_or_else(|| {
            format!("--strategy {:?}: not a strategy; one of {}", self.strategy, Strategy::NAMES.join(", "))
        })
    }

    pub fn hash_kind(&self) -> Result<HashKind, String> {
        HashKind::from_name(&self.hash)
            .ok_or_else(|| format!("--hash {:?}: one of {}", self.hash, HashKind::NAMES.join(", ")))
    }

    /// Every knob in range, each message naming the flag, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        self.strategy()?;
        self.hash_kind()?;
        if !(1..=10_000).contains(&self.vnodes) {
            return Err(format!("--vnodes {}: must be 1 to 10000", self.vnodes));
        }
        if !(self.capacity_factor.is_finite() && self.capacity_factor >= 1.0) {
            return Err(format!(
                "--capacity-factor {}: must be a number ≥ 1 (1.25 = 25% above the mean)",
                self.capacity_factor
            ));
        }
        if !(1..=1000).contains(&self.probes) {
            return Err(format!("--probes {}: must be 1 to 1000", self.probes));
        }
        if !maglev::is_prime(self.table_size) || self.table_size > 10_000_019 {
            return Err(format!(
                "--table-size {}: must be a prime up to 10000019 (65537 is Envoy's default)",
                self.table_size
            ));
        }
        Ok(())
    }

    /// Whether the strategy honours node weights.
    pub fn weighted(&self) -> bool {
        matches!(self.strategy(), Ok(Strategy::Vnodes | Strategy::Bounded | Strategy::Rendezvous))
    }
}

/// A live node as a placement sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    pub weight: f64,
}

/// Which keys a change can move.
#[derive(Clone, Debug, PartialEq)]
pub enum Scope {
    /// Keys whose ring position lies in one of these arcs, (from, to] wrapping.
    Arcs(Vec<(u32, u32)>),
    /// The removed node's keys.
    OwnedByRemoved,
    /// Every key (the strategy's assignment depends on all of them, or renumbers).
    All,
}

/// A strategy built over the live nodes.
#[derive(Clone, Debug)]
pub enum Placement {
    Empty,
    Ring(SortedRing),
    Jump {
        buckets: u32,
    },
    /// `uniform`: every weight equal, so the plain hash ranks (no logarithm per node).
    Rendezvous {
        hashes: Vec<u64>,
        weights: Vec<f64>,
        uniform: bool,
    },
    Maglev(Maglev),
    Multiprobe {
        ring: SortedRing,
        probes: u32,
    },
}

/// Virtual nodes of a node of `weight` at `vnodes` per unit weight (at least one).
pub fn vnode_count(vnodes: u32, weight: f64) -> u32 {
    ((vnodes as f64 * weight).round() as u32).max(1)
}

/// The points of node `index` named `name`: its first point is its name's hash (the
/// seed's position), the others `name#1`, `name#2`, ….
fn node_points(name: &str, index: u32, count: u32, hash: HashKind, out: &mut Vec<(u32, u32, u64)>) {
    let rank_base = hash.name(name) & !0xffff;
    out.push((position(hash.name(name)), index, rank_base));
    for v in 1..count {
        out.push((position(hash.name(&format!("{name}#{v}"))), index, rank_base | v as u64));
    }
}

impl Placement {
    /// The placement of `nodes` under `settings` (already validated).
    pub fn build(settings: &Settings, nodes: &[NodeSpec]) -> Placement {
        if nodes.is_empty() {
            return Placement::Empty;
        }
        let hash = settings.hash_kind().expect("validated settings");
        let strategy = settings.strategy().expect("validated settings");
        let ring = |per_node: &dyn Fn(&NodeSpec) -> u32| {
            let mut points = Vec::new();
            for (i, node) in nodes.iter().enumerate() {
                node_points(&node.name, i as u32, per_node(node), hash, &mut points);
            }
            SortedRing::new(points)
        };
        match strategy {
            Strategy::Ring => Placement::Ring(ring(&|_| 1)),
            Strategy::Vnodes | Strategy::Bounded => {
                Placement::Ring(ring(&|n: &NodeSpec| vnode_count(settings.vnodes, n.weight)))
            }
            Strategy::Jump => Placement::Jump { buckets: nodes.len() as u32 },
            Strategy::Rendezvous => Placement::Rendezvous {
                hashes: nodes.iter().map(|n| hash.name(&n.name)).collect(),
                weights: nodes.iter().map(|n| n.weight).collect(),
                uniform: nodes.iter().all(|n| n.weight == nodes[0].weight),
            },
            Strategy::Maglev => {
                let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
                Placement::Maglev(Maglev::new(&names, settings.table_size, hash))
            }
            Strategy::Multiprobe => Placement::Multiprobe { ring: ring(&|_| 1), probes: settings.probes },
        }
    }

    /// The node (index into the node list) of a key with 64-bit `hash`; `None` without nodes.
    #[inline]
    pub fn lookup(&self, hash: u64) -> Option<u32> {
        Some(match self {
            Placement::Empty => return None,
            Placement::Ring(ring) => ring.lookup(position(hash)),
            Placement::Jump { buckets } => jump::jump(hash, *buckets),
            Placement::Rendezvous { hashes, weights, uniform } => rendezvous(hash, hashes, weights, *uniform),
            Placement::Maglev(maglev) => maglev.lookup(hash),
            Placement::Multiprobe { ring, probes } => multiprobe(ring, hash, *probes),
        })
    }

    /// The ring arc a key falls in (ring strategies only).
    pub fn arc(&self, hash: u64) -> Option<(u32, u32)> {
        match self {
            Placement::Ring(ring) => Some(ring.arc(position(hash))),
            _ => None,
        }
    }

    /// Each node's expected share of uniformly hashed keys: exact for the ring,
    /// jump (1/n), Maglev (table slots) and weighted rendezvous; for multi-probe
    /// estimated from 2^16 evenly spread hashes.
    pub fn shares(&self, nodes: usize) -> Vec<f64> {
        match self {
            Placement::Empty => Vec::new(),
            Placement::Ring(ring) => ring.shares(nodes),
            Placement::Jump { buckets } => vec![1.0 / *buckets as f64; nodes],
            Placement::Rendezvous { weights, .. } => {
                let total: f64 = weights.iter().sum();
                weights.iter().map(|w| w / total).collect()
            }
            Placement::Maglev(maglev) => maglev.shares(nodes),
            Placement::Multiprobe { .. } => {
                let mut shares = vec![0.0; nodes];
                let samples = 1u64 << 16;
                for i in 0..samples {
                    let hash = derive(i, 0x5eed);
                    shares[self.lookup(hash).expect("nodes exist") as usize] += 1.0 / samples as f64;
                }
                shares
            }
        }
    }

    /// The points drawn on the ring, as (position, node index), for the ring strategies.
    pub fn points(&self) -> Vec<(u32, u32)> {
        match self {
            Placement::Ring(ring) | Placement::Multiprobe { ring, .. } => ring.points().collect(),
            _ => Vec::new(),
        }
    }

    /// Bytes the placement holds.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Placement>()
            + match self {
                Placement::Empty | Placement::Jump { .. } => 0,
                Placement::Ring(ring) | Placement::Multiprobe { ring, .. } => ring.memory_bytes(),
                Placement::Rendezvous { hashes, weights, .. } => hashes.len() * 8 + weights.len() * 8,
                Placement::Maglev(maglev) => maglev.memory_bytes(),
            }
    }
}

/// Rendezvous: the node with the highest weighted score. With equal weights the score
/// is the plain hash; with weights, `w / −ln(u)` (the logarithmic method), which gives
/// node i a share of w_i / Σw.
#[inline]
fn rendezvous(key: u64, hashes: &[u64], weights: &[f64], uniform: bool) -> u32 {
    let mut best = 0;
    let mut best_score = f64::NEG_INFINITY;
    let mut best_raw = 0u64;
    for (i, &node) in hashes.iter().enumerate() {
        let raw = derive(key, node);
        if uniform {
            if i == 0 || raw > best_raw {
                best_raw = raw;
                best = i;
            }
        } else {
            let u = ((raw >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let score = weights[i] / -u.ln();
            if score > best_score {
                best_score = score;
                best = i;
            }
        }
    }
    best as u32
}

/// Multi-probe: hash the key `probes` times; the probe nearest (clockwise) to a node
/// point wins, and that point's node takes the key.
#[inline]
fn multiprobe(ring: &SortedRing, key: u64, probes: u32) -> u32 {
    let mut best = (u32::MAX, 0u32);
    for i in 0..probes {
        let probe = if i == 0 { position(key) } else { position(derive(key, i as u64)) };
        let point = ring.successor(probe);
        let distance = ring.position_at(point).wrapping_sub(probe);
        if distance < best.0 {
            best = (distance, ring.owner_at(point));
        }
    }
    best.1
}

/// Bounded loads over `hashes` in order: each key walks clockwise from its home point
/// to the first node holding fewer than its cap, ⌈c · m · wᵢ / Σw⌉ (m keys). Returns
/// node indexes; empty without a ring.
pub fn bounded_assign(placement: &Placement, weights: &[f64], capacity_factor: f64, hashes: &[u64]) -> Vec<u32> {
    let Placement::Ring(ring) = placement else { return Vec::new() };
    let total: f64 = weights.iter().sum();
    let m = hashes.len() as f64;
    let caps: Vec<u64> = weights.iter().map(|w| ((capacity_factor * m * w / total).ceil() as u64).max(1)).collect();
    let mut loads = vec![0u64; weights.len()];
    hashes
        .iter()
        .map(|&hash| {
            let start = ring.successor(position(hash));
            for step in 0..ring.len() {
                let owner = ring.owner_at((start + step) % ring.len());
                if loads[owner as usize] < caps[owner as usize] {
                    loads[owner as usize] += 1;
                    debug_assert!(loads[owner as usize] <= caps[owner as usize]);
                    return owner;
                }
            }
            unreachable!("the caps add up to at least c·m ≥ m keys")
        })
        .collect()
}

impl Placement {
    /// The keys a new node (the last in the list) can take.
    pub fn add_scope(&self, new_node: u32) -> Scope {
        match self {
            Placement::Ring(ring) => Scope::Arcs(ring.arcs_of(new_node)),
            _ => Scope::All,
        }
    }
}
