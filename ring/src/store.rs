//! Where a ring's keys live while the explorer works on them: in memory (replay,
//! tests, `compare`) or in the SQLite journal's `keys` table. The explorer's logic is
//! written once against [`KeyStore`], so both give the same answers — which the
//! property tests check.

use std::collections::BTreeMap;

/// A key as the explorer needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRow {
    /// Stable id, in insertion order (bounded loads assigns in this order).
    pub id: u64,
    pub hash: u64,
    /// The owning node's id; `None` while the ring has no node.
    pub owner: Option<u32>,
}

/// Storage of keys, with the range and owner queries the explorer's scopes need.
pub trait KeyStore {
    /// Keys whose ring position (the hash's top 32 bits) lies in (from, to], wrapping;
    /// every key when from == to.
    fn keys_in_arc(&mut self, from: u32, to: u32) -> Result<Vec<KeyRow>, String>;
    fn keys_owned_by(&mut self, node: u32) -> Result<Vec<KeyRow>, String>;
    /// Every key, in id order.
    fn all_keys(&mut self) -> Result<Vec<KeyRow>, String>;
    fn set_owner(&mut self, key: &KeyRow, owner: Option<u32>) -> Result<(), String>;
    /// Adds a key; `Err` if the name exists.
    fn insert_key(&mut self, name: &str, hash: u64, owner: Option<u32>) -> Result<u64, String>;
    /// Removes a key, returning it; `Ok(None)` if absent.
    fn remove_key(&mut self, name: &str) -> Result<Option<KeyRow>, String>;
    fn find_key(&mut self, name: &str) -> Result<Option<KeyRow>, String>;
    fn key_count(&mut self) -> Result<u64, String>;
    /// Keys per owner id.
    fn counts(&mut self) -> Result<BTreeMap<Option<u32>, u64>, String>;
    /// Up to `limit` keys as (name, hash, owner), in id order, for display.
    fn sample(&mut self, limit: usize) -> Result<Vec<(String, u64, Option<u32>)>, String>;
    /// The names of keys with these ids (for reporting moves).
    fn names(&mut self, ids: &[u64]) -> Result<Vec<String>, String>;
}

/// Keys in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryStore {
    /// id → (name, hash, owner)
    pub keys: BTreeMap<u64, (String, u64, Option<u32>)>,
    names: BTreeMap<String, u64>,
    next_id: u64,
}

impl MemoryStore {
    fn row(id: u64, entry: &(String, u64, Option<u32>)) -> KeyRow {
        KeyRow { id, hash: entry.1, owner: entry.2 }
    }

    /// (name, owner id) of every key, in id order.
    pub fn assignment(&self) -> Vec<(String, Option<u32>)> {
        self.keys.values().map(|(name, _, owner)| (name.clone(), *owner)).collect()
    }
}

pub fn in_arc(position: u32, from: u32, to: u32) -> bool {
    if from == to {
        true
    } else if from < to {
        position > from && position <= to
    } else {
        position > from || position <= to
    }
}

impl KeyStore for MemoryStore {
    fn keys_in_arc(&mut self, from: u32, to: u32) -> Result<Vec<KeyRow>, String> {
        Ok(self
            .keys
            .iter()
            .filter(|(_, k)| in_arc(crate::hash::position(k.1), from, to))
            .map(|(&id, k)| Self::row(id, k))
            .collect())
    }

    fn keys_owned_by(&mut self, node: u32) -> Result<Vec<KeyRow>, String> {
        Ok(self.keys.iter().filter(|(_, k)| k.2 == Some(node)).map(|(&id, k)| Self::row(id, k)).collect())
    }

    fn all_keys(&mut self) -> Result<Vec<KeyRow>, String> {
        Ok(self.keys.iter().map(|(&id, k)| Self::row(id, k)).collect())
    }

    fn set_owner(&mut self, key: &KeyRow, owner: Option<u32>) -> Result<(), String> {
        self.keys.get_mut(&key.id).ok_or_else(|| format!("no key with id {}", key.id))?.2 = owner;
        Ok(())
    }

    fn insert_key(&mut self, name: &str, hash: u64, owner: Option<u32>) -> Result<u64, String> {
        if self.names.contains_key(name) {
            return Err(format!("key {name:?} already exists"));
        }
        self.next_id += 1;
        self.keys.insert(self.next_id, (name.to_string(), hash, owner));
        self.names.insert(name.to_string(), self.next_id);
        Ok(self.next_id)
    }

    fn remove_key(&mut self, name: &str) -> Result<Option<KeyRow>, String> {
        let Some(id) = self.names.remove(name) else { return Ok(None) };
        let entry = self.keys.remove(&id).expect("names and keys agree");
        Ok(Some(Self::row(id, &entry)))
    }

    fn find_key(&mut self, name: &str) -> Result<Option<KeyRow>, String> {
        Ok(self.names.get(name).map(|&id| Self::row(id, &self.keys[&id])))
    }

    fn key_count(&mut self) -> Result<u64, String> {
        Ok(self.keys.len() as u64)
    }

    fn sample(&mut self, limit: usize) -> Result<Vec<(String, u64, Option<u32>)>, String> {
        Ok(self.keys.values().take(limit).map(|(n, h, o)| (n.clone(), *h, *o)).collect())
    }

    fn names(&mut self, ids: &[u64]) -> Result<Vec<String>, String> {
        Ok(ids.iter().map(|id| self.keys.get(id).map_or_else(String::new, |k| k.0.clone())).collect())
    }

    fn counts(&mut self) -> Result<BTreeMap<Option<u32>, u64>, String> {
        let mut counts = BTreeMap::new();
        for (_, _, owner) in self.keys.values() {
            *counts.entry(*owner).or_insert(0) += 1;
        }
        Ok(counts)
    }
}
