//! Timeouts of a streamed answer, as the simulated gateway keeps them per attempt:
//! **connect** (until the response's headers: the provider answered or gave the call
//! a slot), **first token** (until the body's first frame), **inter-token** (the
//! longest gap between frames) and **total** (the last frame), each measured from
//! the call's start like the simulation's. A layer bounds the headers; the response's
//! body is wrapped ([`TimedBody`]) so the other three hold while the caller reads it —
//! a layer around the response future alone sees only the headers of a stream.
//!
//! A body timeout ends the body with a [`StreamTimeout`] error naming which one, the
//! reason the simulation reports (`timeout_first_token`, `timeout_inter_token`,
//! `timeout_total`). [`TimedBody::frames`] says how much was delivered before it, for
//! the caller's "do not retry past N% delivered" rule (the simulated
//! `no_retry_past_delivered`): only the reader of a stream knows its progress.
//!
//! Invariant: exactly one timer is armed while the body is read — the earliest of the
//! bounds that apply to the next frame.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use stampede_policy::classify::Outcome;
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

use crate::events::{emit, Event};
pub use crate::stream_end::{StreamError, StreamTimeout};
use crate::BoxError;

/// The four bounds of a streamed call (`None`: no such bound), as a class's
/// `timeouts_s` gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamTimeouts {
    /// Until the response's headers.
    pub connect: Option<Duration>,
    /// Until the body's first frame, from the call's start.
    pub first_token: Option<Duration>,
    /// The longest wait for each later frame.
    pub inter_token: Option<Duration>,
    /// Until the body's end, from the call's start.
    pub total: Option<Duration>,
}

/// Reads a frame's bytes for an error event: `Some(outcome)` ends the stream with a
/// [`StreamError`]. [`provider_stream_error`] reads Anthropic's and OpenAI's.
pub type ErrorEvent = fn(&[u8]) -> Option<Outcome>;

/// Anthropic's and OpenAI's error events inside a streamed 200, read structurally
/// ([`crate::sse`]): Anthropic's `event: error` (or `{"type": "error", …}`) with
/// `overloaded_error` (an overload), `rate_limit_error` (a rate limit) or `api_error`
/// (a server error); OpenAI's `data: {"error": …}` with a `rate_limit` type or code (a
/// rate limit), else a server error. Every other event — a content delta whose text
/// says `event: error` included — is `None`.
pub fn provider_stream_error(frame: &[u8]) -> Option<Outcome> {
    let text = std::str::from_utf8(frame).ok()?;
    crate::sse::events(text).iter().find_map(crate::sse::provider_error)
}

/// The layer.
#[derive(Clone, Copy, Debug)]
pub struct StreamTimeoutLayer {
    timeouts: StreamTimeouts,
    errors: Option<ErrorEvent>,
}

/// Bounds each call's headers by `connect` (and `first_token` and `total`, which
/// also run from the start) and wraps its body in a [`TimedBody`].
pub fn stream_timeouts(timeouts: StreamTimeouts) -> StreamTimeoutLayer {
    StreamTimeoutLayer { timeouts, errors: None }
}

impl StreamTimeoutLayer {
    /// The bounds it keeps.
    pub fn timeouts(&self) -> StreamTimeouts {
        self.timeouts
    }

    /// Also reads each frame with `errors` (e.g. [`provider_stream_error`]): an error
    /// event in the first frame fails the attempt (the response future's error, which
    /// every layer outside reads as the event's outcome, a 529 for an overload), a later
    /// one ends the body with a [`StreamError`] — a 200 followed by an overload is not
    /// a success.
    pub fn errors_in_stream(self, errors: ErrorEvent) -> Self {
        StreamTimeoutLayer { errors: Some(errors), ..self }
    }
}

impl<S> Layer<S> for StreamTimeoutLayer {
    type Service = StreamTimeoutService<S>;

    fn layer(&self, inner: S) -> StreamTimeoutService<S> {
        StreamTimeoutService { inner, timeouts: self.timeouts, errors: self.errors }
    }
}

/// A service whose streamed answers are timed.
#[derive(Clone, Debug)]
pub struct StreamTimeoutService<S> {
    inner: S,
    timeouts: StreamTimeouts,
    errors: Option<ErrorEvent>,
}

/// The frame's error event, if `errors` reads one in its data.
fn error_in<D: Buf>(frame: &Frame<D>, errors: Option<ErrorEvent>) -> Option<StreamError> {
    let (errors, data) = (errors?, frame.data_ref()?);
    errors(data.chunk()).map(StreamError)
}

impl<S, Req, B> Service<Req> for StreamTimeoutService<S>
where
    S: Service<Req, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<TimedBody<B>>;
    type Error = BoxError;
    type Future = HeadersFuture<S::Future, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let started = Instant::now();
        let t = self.timeouts;
        // The headers come before the first token and the end: all three bound them.
        let bounds = [
            (t.connect, StreamTimeout::Connect),
            (t.first_token, StreamTimeout::FirstToken),
            (t.total, StreamTimeout::Total),
        ];
        HeadersFuture {
            inner: self.inner.call(request),
            deadline: Deadline::new(earliest(started, &bounds)),
            started,
            timeouts: t,
            errors: self.errors,
            waiting: None,
        }
    }
}

/// The earliest of `bounds` (each from `from`), and which it is.
fn earliest(from: Instant, bounds: &[(Option<Duration>, StreamTimeout)]) -> (Option<Instant>, StreamTimeout) {
    bounds
        .iter()
        .filter_map(|(after, which)| after.map(|a| (from + a, *which)))
        .min_by_key(|(at, _)| *at)
        .map_or((None, StreamTimeout::Total), |(at, which)| (Some(at), which))
}

pin_project! {
    /// The one timer a stream keeps: the bound the next event must meet, and which
    /// bound it is (disarmed when no bound applies).
    struct Deadline {
        #[pin]
        sleep: Sleep,
        armed: bool,
        which: StreamTimeout,
    }
}

impl Deadline {
    /// Armed at `at` for `which` (`None`: disarmed).
    fn new((at, which): (Option<Instant>, StreamTimeout)) -> Self {
        Deadline { sleep: tokio::time::sleep_until(at.unwrap_or_else(far_future)), armed: at.is_some(), which }
    }

    /// Moves the timer to `at` for `which` (`None`: disarms it).
    fn reset(self: Pin<&mut Self>, (at, which): (Option<Instant>, StreamTimeout)) {
        let this = self.project();
        if let Some(at) = at {
            this.sleep.reset(at);
        }
        (*this.armed, *this.which) = (at.is_some(), which);
    }

    /// The bound broken, once its time has come.
    fn poll_expired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<StreamTimeout> {
        let this = self.project();
        if !*this.armed {
            return Poll::Pending;
        }
        ready!(this.sleep.poll(cx));
        Poll::Ready(*this.which)
    }
}

/// An instant no call reaches (a year on), for a timer that is not armed.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(365 * 86_400)
}

pin_project! {
    /// The response, once its headers and its first frame have come within their bounds.
    pub struct HeadersFuture<F, B> {
        #[pin]
        inner: F,
        #[pin]
        deadline: Deadline,
        started: Instant,
        timeouts: StreamTimeouts,
        errors: Option<ErrorEvent>,
        // The headers came: the response waits for its body's first frame.
        waiting: Option<(http::response::Parts, B)>,
    }
}

impl<F, B, E> Future for HeadersFuture<F, B>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Output = Result<http::Response<TimedBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if this.waiting.is_none() {
            if let Poll::Ready(result) = this.inner.poll(cx) {
                let (parts, body) = result.map_err(Into::into)?.into_parts();
                *this.waiting = Some((parts, body));
                // The connect bound is met; the first token's and the total's remain.
                let bounds = [
                    (this.timeouts.first_token, StreamTimeout::FirstToken),
                    (this.timeouts.total, StreamTimeout::Total),
                ];
                this.deadline.as_mut().reset(earliest(*this.started, &bounds));
            }
        }
        if let Some((_, body)) = this.waiting.as_mut() {
            if let Poll::Ready(frame) = Pin::new(body).poll_frame(cx) {
                let first = frame.transpose().map_err(Into::into)?;
                if let Some(error) = first.as_ref().and_then(|f| error_in(f, *this.errors)) {
                    emit(Event::StreamError { outcome: error.0, frames: 0 });
                    return Poll::Ready(Err(Box::new(error)));
                }
                if first.is_none() {
                    emit(Event::StreamEnded { frames: 0 });
                }
                let (parts, body) = this.waiting.take().expect("waiting");
                let timed = TimedBody::after_first(body, *this.started, *this.timeouts, *this.errors, first);
                return Poll::Ready(Ok(http::Response::from_parts(parts, timed)));
            }
        }
        let broken = ready!(this.deadline.poll_expired(cx));
        emit(Event::StreamTimedOut { which: broken, frames: 0 });
        Poll::Ready(Err(Box::new(broken)))
    }
}

pin_project! {
    /// A streamed body under its first-token, inter-token and total bounds.
    pub struct TimedBody<B: Body> {
        #[pin]
        inner: B,
        #[pin]
        deadline: Deadline,
        started: Instant,
        timeouts: StreamTimeouts,
        errors: Option<ErrorEvent>,
        frames: u64,
        broken: bool,
        // The first frame, read while the response waited for it, not yet handed on.
        first: Option<Frame<B::Data>>,
        // The body ended before any frame (an empty answer).
        ended: bool,
    }
}

impl<B: Body> TimedBody<B> {
    /// `body`, of a call that started at `started`, under `timeouts`, its first frame
    /// (`None`: the body ended without one) already read.
    fn after_first(
        body: B,
        started: Instant,
        timeouts: StreamTimeouts,
        errors: Option<ErrorEvent>,
        first: Option<Frame<B::Data>>,
    ) -> Self {
        let frames = u64::from(first.is_some());
        TimedBody {
            inner: body,
            deadline: Deadline::new(next_deadline(frames, Instant::now(), started, &timeouts)),
            started,
            timeouts,
            errors,
            frames,
            broken: false,
            ended: first.is_none(),
            first,
        }
    }

    /// Frames delivered so far (for a "do not retry past N% delivered" rule).
    pub fn frames(&self) -> u64 {
        self.frames
    }
}

/// The bound on the next frame after `frames` of them, seen at `now`: the first
/// token's (before any frame) or the inter-token gap's, and the total's, whichever is
/// earlier.
fn next_deadline(frames: u64, now: Instant, started: Instant, t: &StreamTimeouts) -> (Option<Instant>, StreamTimeout) {
    let next = if frames == 0 {
        (t.first_token.map(|a| started + a), StreamTimeout::FirstToken)
    } else {
        (t.inter_token.map(|a| now + a), StreamTimeout::InterToken)
    };
    let total = (t.total.map(|a| started + a), StreamTimeout::Total);
    match (next.0, total.0) {
        (Some(a), Some(b)) if b < a => total,
        (Some(_), _) => next,
        (None, _) => total,
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let mut this = self.project();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        if *this.broken || *this.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = this.inner.as_mut().poll_frame(cx) {
            let frame = frame.map(|f| f.map_err(Into::into));
            if let Some(error) = frame.as_ref().and_then(|f| f.as_ref().ok()).and_then(|f| error_in(f, *this.errors)) {
                *this.broken = true;
                emit(Event::StreamError { outcome: error.0, frames: *this.frames });
                return Poll::Ready(Some(Err(Box::new(error))));
            }
            match frame {
                Some(Ok(_)) => {
                    *this.frames += 1;
                    let next = next_deadline(*this.frames, Instant::now(), *this.started, this.timeouts);
                    this.deadline.as_mut().reset(next);
                }
                None => {
                    *this.ended = true;
                    emit(Event::StreamEnded { frames: *this.frames });
                }
                Some(Err(_)) => {}
            }
            return Poll::Ready(frame);
        }
        let broken = ready!(this.deadline.poll_expired(cx));
        emit(Event::StreamTimedOut { which: broken, frames: *this.frames });
        *this.broken = true;
        Poll::Ready(Some(Err(Box::new(broken))))
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && (self.broken || self.ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
