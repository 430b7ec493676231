//! Cache endpoints: each instance of the service keeps an LRU cache of request keys
//! with a TTL (`components::lru`). After the endpoint's own work (the lookup) a fresh
//! hit answers at once; a miss runs the endpoint's steps — the calls to the origin —
//! and a successful answer fills the cache. With single flight (`coalesce`), a miss for
//! a key another request is already fetching waits for that fetch and shares its
//! answer; with `serve_stale`, a fetch that fails is answered with the expired entry
//! if there is one. A flush fault or a crash empties an instance's caches.
//!
//! Invariants: a key has at most one fetch in flight per cache when coalescing (the
//! `filling` map holds its waiters); a waiting job holds no event and is woken exactly
//! once — by its fetch's answer, its fetch being abandoned, or its instance's crash.

use crate::components::lru::Lookup;
use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use super::model::Graph;
use super::params::{Cause, Failure};
use super::results::CacheResults;
use super::state::{Answer, CacheRole, Event, JobState};

/// What a lookup decided for the job.
pub(super) enum Looked {
    /// A fresh entry: answer now.
    Hit,
    /// A miss: fetch from the origin (run the steps).
    Fetch,
    /// A miss for a key being fetched: the job waits.
    Wait,
}

impl Graph<'_> {
    /// The cache of `endpoint` on global instance `i`.
    fn cache_index(&self, endpoint: u32, i: u32) -> usize {
        let service = self.p.endpoints[endpoint as usize].service as usize;
        (self.first_cache[endpoint as usize] + i - self.services[service].first_instance) as usize
    }

    /// `job`, at a cache endpoint after its own work, looks its key up.
    pub(super) fn cache_lookup(&mut self, now: Nanos, job: SlabKey) -> Looked {
        let j = self.jobs.get(job).expect("live job");
        let (endpoint, i, key, counted) = (j.endpoint, j.instance, j.key, j.counted);
        let params = self.p.endpoints[endpoint as usize].cache.expect("a cache endpoint");
        let c = self.cache_index(endpoint, i);
        let bucket = (now / self.p.bucket) as usize;
        let results = &mut self.cache_results[endpoint as usize];
        if counted {
            results.lookups += 1;
        }
        if self.caches[c].lru.lookup(now, key) == Lookup::Hit {
            if counted {
                results.hits += 1;
            }
            if let Some(hits) = self.series.cache_hits[endpoint as usize].get_mut(bucket) {
                *hits += 1;
            }
            return Looked::Hit;
        }
        if let Some(misses) = self.series.cache_misses[endpoint as usize].get_mut(bucket) {
            *misses += 1;
        }
        if params.coalesce {
            if let Some(first) = self.caches[c].filling.get_mut(&key) {
                if counted {
                    results.coalesced += 1;
                }
                // Linked beside the slab, not in every job: only waiters need the link.
                let slot = job.index();
                if self.next_waiter.len() <= slot {
                    self.next_waiter.resize(slot + 1, None);
                }
                self.next_waiter[slot] = *first;
                *first = Some(job);
                let j = self.jobs.get_mut(job).expect("live job");
                (j.cache_role, j.state) = (CacheRole::Waiting, JobState::Waiting);
                let service = self.p.endpoints[endpoint as usize].service as usize;
                if !self.p.services[service].blocking {
                    self.release_worker(now, job);
                }
                return Looked::Wait;
            }
            self.caches[c].filling.insert(key, None);
        }
        self.jobs.get_mut(job).expect("live job").cache_role = CacheRole::Fetch;
        Looked::Fetch
    }

    /// `job`'s fetch ended with `answer`: a success fills the cache; a failure is
    /// answered stale when allowed and possible; waiters share the outcome. Returns
    /// the answer the job gives.
    pub(super) fn fetch_done(
        &mut self,
        now: Nanos,
        job: SlabKey,
        answer: Answer,
        scheduler: &mut Scheduler<Event>,
    ) -> Answer {
        let j = self.jobs.get_mut(job).expect("live job");
        j.cache_role = CacheRole::None;
        let (endpoint, i, key, counted, cause) = (j.endpoint, j.instance, j.key, j.counted, j.cause);
        let params = self.p.endpoints[endpoint as usize].cache.expect("a cache endpoint");
        let c = self.cache_index(endpoint, i);
        let results = &mut self.cache_results[endpoint as usize];
        let answer = if answer == Answer::Error {
            let stale = params.serve_stale && self.caches[c].lru.lookup(now, key) == Lookup::Stale;
            if stale && counted {
                results.stale_served += 1;
            }
            if stale {
                Answer::Success
            } else {
                Answer::Error
            }
        } else {
            self.caches[c].lru.insert(now, key);
            if counted {
                results.fills += 1;
            }
            answer
        };
        if params.coalesce {
            let first = self.caches[c].filling.remove(&key).flatten();
            self.wake_waiters(now, first, answer, cause, scheduler);
        }
        answer
    }

    /// A fetching job was cancelled (its caller gave up): its waiters fail.
    pub(super) fn fetch_abandoned(&mut self, now: Nanos, job: SlabKey, scheduler: &mut Scheduler<Event>) {
        let j = self.jobs.get_mut(job).expect("live job");
        if j.cache_role != CacheRole::Fetch {
            return;
        }
        j.cache_role = CacheRole::None;
        let (endpoint, i, key) = (j.endpoint, j.instance, j.key);
        if self.p.endpoints[endpoint as usize].cache.is_some_and(|p| p.coalesce) {
            let c = self.cache_index(endpoint, i);
            let first = self.caches[c].filling.remove(&key).flatten();
            self.wake_waiters(now, first, Answer::Error, None, scheduler);
        }
    }

    /// Answers every job waiting from `first` on with `answer` (an error for `cause`,
    /// or the cache service's own error); a cancelled one is dropped.
    fn wake_waiters(
        &mut self,
        now: Nanos,
        first: Option<SlabKey>,
        answer: Answer,
        cause: Option<Cause>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let mut cursor = first;
        while let Some(waiter) = cursor {
            cursor = self.next_waiter[waiter.index()].take();
            let j = self.jobs.get_mut(waiter).expect("a waiter is live until woken");
            debug_assert_eq!(j.cache_role, CacheRole::Waiting);
            j.cache_role = CacheRole::None;
            if j.cancelled {
                self.drop_cancelled_job(now, waiter);
                continue;
            }
            if answer == Answer::Error {
                let service = self.instances[j.instance as usize].service;
                j.cause = Some(cause.unwrap_or(Cause::at(service, Failure::Error)));
            }
            self.finish_job(now, waiter, answer, scheduler);
        }
    }

    /// Empties instance `i`'s caches (a flush fault, or its crash).
    pub(super) fn flush_caches(&mut self, i: usize) {
        let service = self.instances[i].service;
        for endpoint in 0..self.p.endpoints.len() {
            if self.p.endpoints[endpoint].service == service && self.first_cache[endpoint] != u32::MAX {
                let c = self.cache_index(endpoint as u32, i as u32);
                self.caches[c].lru.clear();
            }
        }
    }

    /// Instance `i` crashed: the jobs waiting on its fetches are lost with it.
    pub(super) fn strand_cache_waiters(&mut self, now: Nanos, i: usize, scheduler: &mut Scheduler<Event>) {
        let service = self.instances[i].service;
        for endpoint in 0..self.p.endpoints.len() {
            if self.p.endpoints[endpoint].service != service || self.first_cache[endpoint] == u32::MAX {
                continue;
            }
            let c = self.cache_index(endpoint as u32, i as u32);
            let lists: Vec<Option<SlabKey>> = self.caches[c].filling.drain().map(|(_, first)| first).collect();
            for mut cursor in lists {
                while let Some(waiter) = cursor {
                    cursor = self.next_waiter[waiter.index()].take();
                    self.strand(now, waiter, scheduler);
                }
            }
        }
    }

    /// The caches' counters, evictions read from the caches.
    pub(super) fn cache_results_at_end(&mut self) -> Vec<CacheResults> {
        let mut results = std::mem::take(&mut self.cache_results);
        for (endpoint, result) in results.iter_mut().enumerate() {
            let first = self.first_cache[endpoint];
            if first != u32::MAX {
                let count = self.p.services[self.p.endpoints[endpoint].service as usize].instances as usize;
                let caches = &self.caches[first as usize..first as usize + count];
                result.evictions = caches.iter().map(|c| c.lru.evictions()).sum();
            }
        }
        results
    }
}
