//! Lookup time of every consistent-hashing strategy at 1,000 nodes (the vnode rings
//! with 150 virtual nodes each: 150,000 points), over a million precomputed key
//! hashes so the hash function is not what is measured. Issue 13's target: the
//! vnode ring at most 50 ns per lookup (median).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use stampede_kernel::names::Named;
use stampede_ring::hash::HashKind;
use stampede_ring::strategy::{NodeSpec, Placement, Settings, Strategy};

fn lookup(c: &mut Criterion) {
    let nodes: Vec<NodeSpec> = (0..1000).map(|i| NodeSpec { name: format!("node-{i}"), weight: 1.0 }).collect();
    let hashes: Vec<u64> = (0..1_000_000u64).map(|j| HashKind::Fast.name(&format!("key-{j}"))).collect();
    let mut group = c.benchmark_group("ring_lookup");
    const BATCH: usize = 1000;
    group.throughput(Throughput::Elements(BATCH as u64));
    for &strategy in Strategy::ALL {
        let settings =
            Settings { strategy: strategy.name().into(), hash: "fast".into(), vnodes: 150, ..Settings::default() };
        let placement = Placement::build(&settings, &nodes);
        let mut offset = 0usize;
        group.bench_function(BenchmarkId::from_parameter(strategy.name()), |b| {
            b.iter(|| {
                // A batch of lookups at a moving offset: caches see a realistic spread of keys.
                let mut sum = 0u64;
                for &h in &hashes[offset..offset + BATCH] {
                    sum = sum.wrapping_add(placement.lookup(black_box(h)).unwrap_or(0) as u64);
                }
                offset = (offset + BATCH) % (hashes.len() - BATCH);
                sum
            })
        });
    }
    group.finish();
}

criterion_group!(benches, lookup);
criterion_main!(benches);
