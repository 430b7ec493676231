//! Where a generated graph's time goes, by size: the replica's setup, its events in
//! steady state (ns per event over the second half of the run, after its first
//! half has touched every entity) and its end.
//!
//! `cargo run --release -p stampede-benches --example graph_size_probe [SECONDS [SIZES,…]]`
use stampede_engine::models::graph::{Graph, GraphParams};
use stampede_engine::{secs_to_nanos, LatencyHistogram};
use std::time::Instant;

fn main() {
    let seconds: f64 = std::env::args().nth(1).map_or(30.0, |s| s.parse().expect("seconds"));
    println!("| services | setup | ns/event, whole | ns/event, 2nd half | end | events |");
    println!("|---|---|---|---|---|---|");
    let sizes: Vec<u32> = match std::env::args().nth(2) {
        Some(list) => list.split(',').map(|s| s.parse().expect("a size")).collect(),
        None => vec![10, 100, 1_000, 5_000],
    };
    for services in sizes {
        let params = GraphParams::pairs(services, 2_000.0, secs_to_nanos(seconds));
        let mut histograms: Vec<LatencyHistogram> = params.workloads.iter().map(|_| LatencyHistogram::new()).collect();
        let mut best = [f64::MAX; 4];
        let mut events_total = 0;
        for _ in 0..5 {
            histograms.iter_mut().for_each(LatencyHistogram::reset);
            let start = Instant::now();
            let mut simulation = Graph::new(params.clone(), 1, 0, &mut histograms).into_simulation();
            let built = Instant::now();
            let first = simulation.run_until(secs_to_nanos(seconds / 2.0));
            let half = Instant::now();
            let second = simulation.run_until(secs_to_nanos(seconds));
            let ran = Instant::now();
            let now = simulation.now();
            let events = simulation.events_handled();
            let _ = simulation.model.finish(now, events);
            let end = Instant::now();
            events_total = first + second;
            let figures = [
                (built - start).as_secs_f64() * 1e3,
                (ran - built).as_secs_f64() * 1e9 / (first + second) as f64,
                (ran - half).as_secs_f64() * 1e9 / second as f64,
                (end - ran).as_secs_f64() * 1e3,
            ];
            for (b, f) in best.iter_mut().zip(figures) {
                *b = b.min(f);
            }
        }
        println!(
            "| {services} | {:.1} ms | {:.0} | {:.0} | {:.1} ms | {events_total} |",
            best[0], best[1], best[2], best[3]
        );
    }
}
