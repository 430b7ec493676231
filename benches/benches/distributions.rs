//! One draw of each service-time distribution, in nanoseconds. Target: a draw from a
//! table built from data (a sample or a histogram) ≤ 10 ns, no allocation (drawing
//! takes `&self` and the table is read-only); the parametric shapes beside it.
//!
//! `cargo bench -p stampede-benches --bench distributions`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use stampede_engine::components::distribution::{Distribution, QuantileTable, Shape};
use stampede_engine::{RngStream, StreamPurpose};

fn distributions(c: &mut Criterion) {
    let mut group = c.benchmark_group("distribution_draw");
    let mut rng = RngStream::derive(1, 0, StreamPurpose::named("bench.distributions"));
    let gamma = Distribution::gamma_mean_scv(0.05, 2.0);
    // A 100,000-value sample (reduced to the 4,097-value table) and a histogram's CDF.
    let sample: Vec<f64> = (0..100_000).map(|_| gamma.sample_s(&mut rng)).collect();
    let empirical = Distribution::new(Shape::Table(Arc::new(QuantileTable::from_sample(&sample).unwrap())));
    let buckets = [(0.0, 0.0), (0.005, 0.2), (0.01, 0.6), (0.025, 0.9), (0.1, 0.99), (1.0, 1.0)];
    let histogram = Distribution::new(Shape::Table(Arc::new(QuantileTable::from_cdf(&buckets).unwrap())));
    let cases = [
        ("empirical_table", empirical),
        ("histogram_table", histogram),
        ("exponential", Distribution::new(Shape::Exponential { mean_s: 0.05 })),
        ("lognormal", Distribution::lognormal_mean_scv(0.05, 2.0)),
        ("gamma", gamma),
        ("weibull", Distribution::new(Shape::Weibull { shape: 0.8, scale_s: 0.04 })),
    ];
    // A draw as the models take it: seconds (each model scales to its own time unit).
    for (name, distribution) in cases {
        group.bench_function(name, |b| b.iter(|| black_box(distribution.sample_s(&mut rng))));
    }
    group.finish();
}

criterion_group!(benches, distributions);
criterion_main!(benches);
