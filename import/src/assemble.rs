//! Spans arrive in any order; a trace is analysed once it is complete. A trace is
//! taken as complete when [`WINDOW`] spans have been read since its last one (exports
//! keep a trace's spans near each other: a Jaeger or Zipkin trace is one block, an
//! OTLP batch holds whole traces), and at the end of the input. At most [`MAX_HELD`]
//! spans are held: beyond, the oldest traces are analysed as they are and counted as
//! cut. Memory is bounded by those two numbers, not by the input's size.

use std::collections::VecDeque;

use crate::infer::Model;
use crate::span::{FastMap, Names, Span};

/// Spans read after a trace's last one before it counts as complete (a collector's
/// batches of a few seconds of traffic stay well inside it).
pub const WINDOW: u64 = 100_000;
/// Spans held in open traces at most (about 100 MB).
pub const MAX_HELD: usize = 1_000_000;

/// Open traces, in the order they were last seen.
#[derive(Debug, Default)]
pub struct Assembler {
    open: FastMap<u128, (Vec<Span>, u64)>,
    /// (sequence number of a span, its trace), oldest first.
    seen: VecDeque<(u64, u128)>,
    sequence: u64,
    held: usize,
}

impl Assembler {
    /// Adds `span`; analyses the traces it completes.
    pub fn push(&mut self, span: Span, model: &mut Model, names: &mut Names) {
        self.sequence += 1;
        let entry = self.open.entry(span.trace).or_default();
        entry.0.push(span);
        entry.1 = self.sequence;
        self.seen.push_back((self.sequence, span.trace));
        self.held += 1;
        while let Some(&(at, trace)) = self.seen.front() {
            let stale = self.sequence - at > WINDOW;
            if !stale && self.held <= MAX_HELD {
                break;
            }
            self.seen.pop_front();
            let Some((_, last)) = self.open.get(&trace) else { continue };
            if *last == at || !stale {
                if !stale {
                    model.skipped.cut += 1;
                }
                self.close(trace, model, names);
            }
        }
    }

    fn close(&mut self, trace: u128, model: &mut Model, names: &mut Names) {
        if let Some((mut spans, _)) = self.open.remove(&trace) {
            self.held -= spans.len();
            model.add_trace(&mut spans, names);
        }
    }

    /// The input ended: every open trace is complete, analysed in the order last seen.
    pub fn finish(mut self, model: &mut Model, names: &mut Names) {
        while let Some((at, trace)) = self.seen.pop_front() {
            if self.open.get(&trace).is_some_and(|(_, last)| *last == at) {
                self.close(trace, model, names);
            }
        }
        debug_assert!(self.open.is_empty() && self.held == 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::span::{Kind, Span, NO_NAME};

    /// Memory is the window, not the input: after 2.5 windows of one-span traces, at
    /// most a window's spans are held, and every trace is analysed by the end.
    #[test]
    fn traces_close_a_window_after_their_last_span_and_memory_stays_within_it() {
        let (mut assembler, mut model, mut names) = (Assembler::default(), Model::new(1_000_000_000), Names::default());
        let service = names.intern("api");
        let count = WINDOW * 5 / 2;
        for trace in 0..count {
            let span = Span {
                trace: u128::from(trace),
                id: 1,
                parent: None,
                service,
                instance: NO_NAME,
                name: service,
                peer: NO_NAME,
                kind: Kind::Server,
                start: trace as i64 * 1_000_000,
                end: trace as i64 * 1_000_000 + 500_000,
                error: false,
                attempt: None,
            };
            assembler.push(span, &mut model, &mut names);
            assert!(assembler.held <= WINDOW as usize + 1, "{} held after {trace}", assembler.held);
        }
        assert_eq!(model.traces, count - WINDOW - 1, "the traces more than a window behind are analysed");
        assembler.finish(&mut model, &mut names);
        assert_eq!((model.traces, model.skipped.cut), (count, 0));
    }
}
