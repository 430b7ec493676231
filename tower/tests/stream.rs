//! Streamed answers under the simulated gateway's four timeouts: connect (headers),
//! first token, inter-token and total, on tokio's paused clock so every time is exact;
//! and the stack issue 53 asked for — a streamed call whose first token is too slow is
//! retried and then served by the fallback, as the simulated stack does it.

mod streams;

use std::sync::atomic::Ordering;
use std::time::Duration;

use stampede_tower::{fallback, stream_timeouts, HttpStatus, StreamTimeout, StreamTimeouts};
use streams::{read, streams, two_attempts, Streams, BOUNDS};
use tower_layer::Layer;

#[tokio::test(start_paused = true)]
async fn each_bound_ends_the_stream_with_its_own_reason_at_its_own_time() {
    let ms = Duration::from_millis;
    let mut within = stream_timeouts(BOUNDS).layer(streams(200, &[300, 400, 400, 100]));
    assert_eq!(read(&mut within).await, (4, None, ms(1400)), "every bound kept");
    let mut late_headers = stream_timeouts(BOUNDS).layer(streams(1500, &[10]));
    assert_eq!(read(&mut late_headers).await, (0, Some(StreamTimeout::Connect.to_string()), ms(1000)));
    // Headers at 0.5 s, the first token at 2.6 s: the response fails at 2 s, as an attempt.
    let mut slow_first = stream_timeouts(BOUNDS).layer(streams(500, &[2100]));
    assert_eq!(read(&mut slow_first).await, (0, Some("timeout_first_token".into()), ms(2000)));
    // Two tokens, then a gap of 0.8 s: broken 0.5 s after the second.
    let mut gap = stream_timeouts(BOUNDS).layer(streams(100, &[100, 200, 800]));
    assert_eq!(read(&mut gap).await, (2, Some("timeout_inter_token".into()), ms(900)));
    // Tokens every 0.4 s go on past the 4 s total: the 9th (at 3.7 s) is the last.
    let mut long = stream_timeouts(BOUNDS).layer(streams(100, &[400; 20]));
    assert_eq!(read(&mut long).await, (9, Some("timeout_total".into()), ms(4000)));
    // No bounds: nothing is armed.
    let mut free = stream_timeouts(StreamTimeouts::default()).layer(streams(5000, &[9000]));
    assert_eq!(read(&mut free).await, (1, None, ms(14000)));
}

/// Issue 53's production twin of the simulated stack `[..., "retry", "fallback"]`
/// for a streamed class: the first token is too slow on both attempts (each given up
/// at the 2 s first-token bound, a timeout to the retry loop), then the fallback tier
/// streams the answer.
#[tokio::test(start_paused = true)]
async fn a_first_token_timeout_is_retried_then_served_by_the_fallback() {
    let (primary, smaller) = (streams(300, &[5000]), streams(100, &[200, 200]));
    let retries = two_attempts();
    let timed = stream_timeouts(BOUNDS);
    let mut stack =
        fallback(timed.layer(smaller.clone()), HttpStatus).layer(retries.layer(timed.layer(primary.clone())));
    let (frames, error, took) = read(&mut stack).await;
    assert_eq!((frames, error), (2, None), "the fallback's two tokens");
    assert_eq!((primary.calls.load(Ordering::SeqCst), smaller.calls.load(Ordering::SeqCst)), (2, 1));
    // Two attempts of 2 s, a 0.25 s wait, the fallback's first token at 0.3 s and its second at 0.5 s.
    assert_eq!(took, Duration::from_millis(2000 + 250 + 2000 + 500));
}

const OVERLOADED: &[u8] =
    b"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";

/// An answer whose text mentions SSE errors is an answer (issue 72 item 4: the reader
/// matched substrings, so an assistant explaining `event: error` had its answer killed
/// as a server error). Only an event of type `error` or a top-level error object is one.
#[test]
fn a_delta_that_mentions_an_error_event_is_an_answer() {
    use stampede_tower::provider_stream_error;
    let delta = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\
                  \"text\":\"a stream ends with event: error and data: {\\\"type\\\":\\\"error\\\"} on overloaded_error\"}}\n\n";
    assert_eq!(provider_stream_error(delta), None);
    let openai = b"data: {\"choices\":[{\"delta\":{\"content\":\"data: {\\\"error\\\": rate_limit}\"}}]}\n\n";
    assert_eq!(provider_stream_error(openai), None);
    // Two events in one frame: the error after a delta is still found.
    let both = [&delta[..], OVERLOADED].concat();
    assert_eq!(provider_stream_error(&both), Some(stampede_policy::classify::Outcome::Overloaded));
}

/// A 200 whose stream carries an overload is not a success: in the first frame it
/// fails the attempt (retried, then served by the fallback, as a 529 would be); later
/// it ends the body with the event's outcome. Without the reader, both read as answers.
#[tokio::test(start_paused = true)]
async fn an_overload_inside_a_200_stream_is_an_overload() {
    use stampede_policy::classify::Outcome;
    use stampede_tower::{provider_stream_error, StreamError};
    assert_eq!(provider_stream_error(OVERLOADED), Some(Outcome::Overloaded));
    assert_eq!(
        provider_stream_error(b"data: {\"error\": {\"type\": \"server_error\"}}\n\n"),
        Some(Outcome::ServerError)
    );
    assert_eq!(provider_stream_error(b"event: content_block_delta\ndata: {\"type\": \"text\"}\n\n"), None);
    let at_once = Streams { says: vec![OVERLOADED], ..streams(100, &[100, 100]) };
    let reading = stream_timeouts(BOUNDS).errors_in_stream(provider_stream_error);
    let (frames, error, _) = read(&mut reading.layer(at_once.clone())).await;
    assert_eq!((frames, error), (0, Some(StreamError(Outcome::Overloaded).to_string())));
    let (frames, error, _) = read(&mut stream_timeouts(BOUNDS).layer(at_once.clone())).await;
    assert_eq!((frames, error), (2, None), "not read: a 200 and two frames, a success");
    // Later in the stream: the body ends with it, after what was delivered.
    let later = Streams { says: vec![b"data: {}\n\n", OVERLOADED], ..streams(100, &[100, 100, 100]) };
    let (frames, error, _) = read(&mut reading.layer(later)).await;
    assert_eq!((frames, error), (1, Some(StreamError(Outcome::Overloaded).to_string())));
    // In the stack: both attempts overloaded at their first frame, then the fallback.
    let smaller = streams(100, &[200]);
    let retries = two_attempts();
    let primary = Streams { says: vec![OVERLOADED], ..streams(100, &[100, 100]) };
    let mut stack =
        fallback(reading.layer(smaller.clone()), HttpStatus).layer(retries.layer(reading.layer(primary.clone())));
    let (frames, error, _) = read(&mut stack).await;
    assert_eq!((frames, error), (1, None));
    assert_eq!((primary.calls.load(Ordering::SeqCst), smaller.calls.load(Ordering::SeqCst)), (2, 1));
}
