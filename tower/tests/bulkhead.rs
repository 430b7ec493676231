//! The bulkhead layer on a paused clock: slots, the struct's queue order, the longest
//! wait, CoDel's drops, and a waiter whose caller went away.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use stampede_policy::bulkhead::{BulkheadConfig, CoDelConfig, Dropped, QueueOrder};
use stampede_tower::{bulkhead, BoxError, Rejected};
use tower_layer::Layer;
use tower_service::Service;

/// Records the order requests reach it; each takes `work`.
#[derive(Clone)]
struct Recorder {
    seen: Arc<Mutex<Vec<u32>>>,
    work: Duration,
}

impl Service<u32> for Recorder {
    type Response = u32;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<u32, BoxError>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, n: u32) -> Self::Future {
        self.seen.lock().unwrap().push(n);
        let work = self.work;
        Box::pin(async move {
            tokio::time::sleep(work).await;
            Ok(n)
        })
    }
}

fn config(order: QueueOrder, codel: Option<CoDelConfig>) -> BulkheadConfig {
    BulkheadConfig { slots: 2, queue_capacity: 3, order, codel }
}

fn recorder(work_ms: u64) -> Recorder {
    Recorder { seen: Arc::new(Mutex::new(Vec::new())), work: Duration::from_millis(work_ms) }
}

fn rejection(result: Result<u32, BoxError>) -> Option<Rejected> {
    result.err().and_then(|e| e.downcast_ref::<Rejected>().copied())
}

#[tokio::test(start_paused = true)]
async fn two_slots_a_queue_of_three_and_the_sixth_refused_served_in_queue_order() {
    for (order, expected) in [(QueueOrder::Fifo, vec![0, 1, 2, 3, 4]), (QueueOrder::Lifo, vec![0, 1, 4, 3, 2])] {
        let inner = recorder(100);
        let layer = bulkhead(config(order, None), Duration::from_secs(10));
        let mut service = layer.layer(inner.clone());
        let calls: Vec<_> = (0..5).map(|n| tokio::spawn(service.call(n))).collect();
        tokio::task::yield_now().await;
        assert_eq!(rejection(service.call(5).await), Some(Rejected::BulkheadFull), "{order:?}");
        assert_eq!(layer.state().read(|s| (s.bulkhead.in_use(), s.bulkhead.queued())), (2, 3));
        for call in calls {
            call.await.unwrap().expect("served");
        }
        assert_eq!(*inner.seen.lock().unwrap(), expected, "{order:?}: the struct's order");
        assert_eq!(layer.state().read(|s| (s.bulkhead.in_use(), s.bulkhead.queued())), (0, 0));
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_that_waits_its_longest_wait_is_refused() {
    let inner = recorder(1_000);
    let layer = bulkhead(config(QueueOrder::Fifo, None), Duration::from_millis(100));
    let mut service = layer.layer(inner.clone());
    let busy: Vec<_> = (0..2).map(|n| tokio::spawn(service.call(n))).collect();
    let start = tokio::time::Instant::now();
    assert_eq!(rejection(service.call(2).await), Some(Rejected::BulkheadDropped(Dropped::DeadlineExpired)));
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    for call in busy {
        call.await.unwrap().unwrap();
    }
    assert_eq!(*inner.seen.lock().unwrap(), vec![0, 1], "the expired request never reached the service");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_whose_caller_went_away_passes_its_slot_on() {
    let inner = recorder(100);
    let layer = bulkhead(config(QueueOrder::Fifo, None), Duration::from_secs(10));
    let mut service = layer.layer(inner.clone());
    let busy: Vec<_> = (0..2).map(|n| tokio::spawn(service.call(n))).collect();
    let gone = tokio::spawn(service.call(2));
    let next = tokio::spawn(service.call(3));
    tokio::task::yield_now().await;
    gone.abort();
    assert_eq!(next.await.unwrap().expect("the slot passed over the cancelled waiter"), 3);
    for call in busy {
        call.await.unwrap().unwrap();
    }
    assert_eq!(*inner.seen.lock().unwrap(), vec![0, 1, 3]);
    assert_eq!(layer.state().read(|s| (s.bulkhead.in_use(), s.bulkhead.queued())), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn codel_drops_waiters_once_the_queue_has_stood_above_its_target() {
    // Target 5 ms over a 20 ms interval; each request takes 50 ms on one of two slots,
    // and ten wait: sojourns stand far above the target, so CoDel starts dropping.
    let codel = CoDelConfig { target: 5_000_000, interval: 20_000_000 };
    let inner = recorder(50);
    let layer = bulkhead(
        BulkheadConfig { slots: 2, queue_capacity: 10, order: QueueOrder::Fifo, codel: Some(codel) },
        Duration::from_secs(10),
    );
    let mut service = layer.layer(inner.clone());
    let calls: Vec<_> = (0..12).map(|n| tokio::spawn(service.call(n))).collect();
    let mut dropped = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(_) => {}
            Err(error) => {
                assert_eq!(error.downcast_ref::<Rejected>(), Some(&Rejected::BulkheadDropped(Dropped::CoDel)));
                dropped += 1;
            }
        }
    }
    assert!(dropped > 0, "CoDel dropped some of the standing queue");
    assert_eq!(inner.seen.lock().unwrap().len() + dropped, 12, "every request was served or dropped");
    assert_eq!(layer.state().read(|s| (s.bulkhead.in_use(), s.bulkhead.queued())), (0, 0));
}
