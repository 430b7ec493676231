//! Kernel hold time against a bare `std::collections::BinaryHeap` hold loop, at
//! 1e3, 1e4 and 1e5 pending events. Target: kernel ≤ 1.3× the reference.
//!
//! `cargo bench -p stampede-benches --bench kernel`
//!
//! `STAMPEDE_BENCH_SLOWDOWN=1` makes the kernel's holds run twice per iteration (the
//! deliberate slowdown `benches/abba --self-test` must catch); the reference is unchanged.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use stampede_benches::{kernel_hold, slowdown_factor, ReferenceHold};

const HOLDS_PER_ITERATION: u64 = 1000;

fn hold(c: &mut Criterion) {
    let mut group = c.benchmark_group("hold");
    group.throughput(Throughput::Elements(HOLDS_PER_ITERATION));
    for pending in [1_000usize, 10_000, 100_000] {
        group.bench_with_input(BenchmarkId::new("kernel", pending), &pending, |b, &pending| {
            let mut simulation = kernel_hold(pending);
            let holds = HOLDS_PER_ITERATION * slowdown_factor() as u64;
            b.iter(|| {
                for _ in 0..holds {
                    simulation.step();
                }
            });
        });
        group.bench_with_input(BenchmarkId::new("std_binary_heap", pending), &pending, |b, &pending| {
            let mut reference = ReferenceHold::new(pending);
            b.iter(|| {
                for _ in 0..HOLDS_PER_ITERATION {
                    reference.hold();
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, hold);
criterion_main!(benches);
