//! Spans arrive in any order; a trace is analysed once it is complete. A trace is
//! taken as complete when [`WINDOW`] spans have been read since its last one (exports
//! keep a trace's spans near each other: a Jaeger or Zipkin trace is one block, an
//! OTLP batch holds whole traces), and at the end of the input. At most [`MAX_HELD`]
//! spans are held: beyond, the oldest traces are analysed as they are and counted as
//! cut. Memory is bounded by those two numbers, not by the input's size.

use std::collections::{HashMap, VecDeque};

use crate::infer::Model;
use crate::span::{Names, Span};

/// Spans read after a trace's last one before it counts as complete.
pub const WINDOW: u64 = 1_000_000;
/// Spans held in open traces at most.
pub const MAX_HELD: usize = 4_000_000;

/// Open traces, in the order they were last seen.
#[derive(Debug, Default)]
pub struct Assembler {
    open: HashMap<u128, (Vec<Span>, u64)>,
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
