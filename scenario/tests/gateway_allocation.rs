//! Proves the gateway's hot loop allocates nothing once a replica has warmed up,
//! with the full seven-gate stack of `llm-stack` (its stack grid point) under a
//! brownout: turns, calls and attempts live in slabs, queues were sized up front,
//! and the worklists keep their capacity.

use stampede_engine::testing::{allocations, CountingAllocator};

use stampede_engine::models::gateway::{Gateway, Incident, IncidentKind};
use stampede_engine::{secs_to_nanos, LatencyHistogram};
use stampede_scenario::models::gateway::Gateway as GatewayModel;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn the_gateway_allocates_nothing_per_event_after_warmup() {
    let source = load_scenario_source("llm-stack").unwrap();
    let scenario = Scenario::resolve(source, &Overrides::default()).unwrap();
    let point = scenario.grid_points().unwrap().remove(1);
    let config = point.model.downcast::<GatewayModel>().expect("llm-stack is a gateway scenario");
    let mut params = config.params(&point.run);
    params.horizon = secs_to_nanos(1_200.0);
    // A brownout during warm-up, so every queue and slab reaches its peak size first;
    // the same load (20 turns/s, three times what the quota sustains) continues after.
    params.incidents =
        vec![Incident { tier: 2, kind: IncidentKind::BROWNOUT, start: secs_to_nanos(60.0), end: secs_to_nanos(120.0) }];
    let mut histograms: Vec<LatencyHistogram> =
        (0..params.latency_histograms()).map(|_| LatencyHistogram::with_counts()).collect();
    let mut simulation = Gateway::new(params, 5, 0, &mut histograms).into_simulation();
    simulation.run_until(secs_to_nanos(300.0));
    // The counter counts (it is this binary's global allocator).
    let probe = allocations();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(16)));
    assert_eq!(allocations(), probe + 1);
    let before = allocations();
    let events = simulation.run_until(secs_to_nanos(1_200.0));
    let allocated = allocations() - before;
    assert!(events > 50_000, "{events}");
    assert_eq!(allocated, 0, "{allocated} allocations over {events} events");
}
