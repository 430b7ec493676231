//! A per-attempt timeout: the inner call is given up after the edge's `timeout_s` and
//! answers tokio's `Elapsed`, which every classifier here reads as a timeout. `None`
//! is no timeout (a scenario edge without `timeout_s`), with no timer armed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::BoxError;

/// The layer.
#[derive(Clone, Copy, Debug)]
pub struct TimeoutLayer {
    after: Option<Duration>,
}

/// A timeout of `after` per call (`None`: none).
pub fn timeout(after: Option<Duration>) -> TimeoutLayer {
    TimeoutLayer { after }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout { inner, after: self.after }
    }
}

/// A service whose calls give up after a while.
#[derive(Clone, Debug)]
pub struct Timeout<S> {
    inner: S,
    after: Option<Duration>,
}

impl<S, Req> Service<Req> for Timeout<S>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = TimeoutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let future = self.inner.call(request);
        match self.after {
            Some(after) => TimeoutFuture::Timed { future: tokio::time::timeout(after, future) },
            None => TimeoutFuture::Untimed { future },
        }
    }
}

pin_project! {
    /// A call with or without its timer.
    // pin-project-lite takes no doc comment on a variant's field.
    #[allow(missing_docs)]
    #[project = TimeoutProj]
    pub enum TimeoutFuture<F> {
        /// With a timer.
        Timed { #[pin] future: tokio::time::Timeout<F> },
        /// Without one (no timeout configured).
        Untimed { #[pin] future: F },
    }
}

impl<F, Res, E> Future for TimeoutFuture<F>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            TimeoutProj::Timed { future } => match std::task::ready!(future.poll(cx)) {
                Ok(result) => Poll::Ready(result.map_err(Into::into)),
                Err(elapsed) => Poll::Ready(Err(Box::new(elapsed))),
            },
            TimeoutProj::Untimed { future } => future.poll(cx).map_err(Into::into),
        }
    }
}
