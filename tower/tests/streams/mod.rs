//! Scripted streamed answers for the stream tests: a provider whose headers and
//! frames come at given times, the retry loop the stacks share, and a reader that
//! drains a body and says how it ended.

#![allow(dead_code)] // each test file uses some of these

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame};
use stampede_policy::backoff::BackoffKind;
use stampede_policy::classify::RetryClassifier;
use stampede_policy::retry_budget::RetryBudget;
use stampede_tower::{backoff, retry, BoxError, HttpStatus, RetryConfig, StreamTimeouts};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

/// A body whose frames come after the given gaps (the first gap from the headers).
pub struct Scripted {
    gaps: VecDeque<Duration>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// What frame `n` says (past the end: a token).
    says: Vec<&'static [u8]>,
    sent: usize,
}

impl Body for Scripted {
    type Data = &'static [u8];
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, BoxError>>> {
        let Some(gap) = self.gaps.front().copied() else { return Poll::Ready(None) };
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(gap)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.sleep = None;
        self.gaps.pop_front();
        let said = self.says.get(self.sent).copied().unwrap_or(&b"event: content_block_delta\ndata: {}\n\n"[..]);
        self.sent += 1;
        Poll::Ready(Some(Ok(Frame::data(said))))
    }
}

/// Answers 200 after `headers`, then frames after `gaps`; counts its calls.
#[derive(Clone)]
pub struct Streams {
    pub headers: Duration,
    pub gaps: Vec<Duration>,
    pub says: Vec<&'static [u8]>,
    pub calls: Arc<AtomicU32>,
}

pub fn streams(headers_ms: u64, gaps_ms: &[u64]) -> Streams {
    Streams {
        headers: Duration::from_millis(headers_ms),
        gaps: gaps_ms.iter().map(|g| Duration::from_millis(*g)).collect(),
        says: Vec::new(),
        calls: Arc::default(),
    }
}

impl Service<&'static str> for Streams {
    type Response = http::Response<Scripted>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: &'static str) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (headers, gaps, says) = (self.headers, self.gaps.clone(), self.says.clone());
        Box::pin(async move {
            tokio::time::sleep(headers).await;
            Ok(http::Response::new(Scripted { gaps: gaps.into(), sleep: None, says, sent: 0 }))
        })
    }
}

/// The retry loop of the stacks here: two attempts, 0.25 s apart, reading HTTP.
pub fn two_attempts() -> stampede_tower::RetryLayer<HttpStatus> {
    retry(
        RetryConfig {
            max_attempts: 2,
            backoff: backoff(BackoffKind::Constant, Duration::from_millis(250), Duration::from_millis(250)),
            classifier: RetryClassifier::default(),
            deadline: None,
        },
        RetryBudget::Unlimited,
        3,
    )
    .classify(HttpStatus)
}

pub const BOUNDS: StreamTimeouts = StreamTimeouts {
    connect: Some(Duration::from_secs(1)),
    first_token: Some(Duration::from_secs(2)),
    inter_token: Some(Duration::from_millis(500)),
    total: Some(Duration::from_secs(4)),
};

/// Calls `service` and reads its whole body: the frames read, and the error that
/// ended it (`None`: it ended well), with when it ended since the call.
pub async fn read<S, B>(service: &mut S) -> (u64, Option<String>, Duration)
where
    S: Service<&'static str, Response = http::Response<B>, Error = BoxError>,
    B: Body<Error = BoxError>,
{
    let started = Instant::now();
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let mut body = match service.call("hi").await {
        Ok(response) => Box::pin(response.into_body()),
        Err(error) => return (0, Some(error.to_string()), started.elapsed()),
    };
    let mut frames = 0;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        match frame {
            Ok(_) => frames += 1,
            Err(error) => return (frames, Some(error.to_string()), started.elapsed()),
        }
    }
    (frames, None, started.elapsed())
}
