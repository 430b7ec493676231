//! The one span every format is read into: a trace id, its own id and its parent's,
//! the service (and instance) that recorded it, its name, its kind, its interval in
//! Unix nanoseconds, whether it failed, and (when the span says) which attempt it was.
//! Names are interned: a span is a few integers, so a trace held open costs little.

use std::collections::HashMap;

/// The maps the import keys by names and ids: foldhash with a fixed seed (fast, and the
/// same on every run; no map's order reaches the output).
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// "None" for interned names (an instance a span does not give).
pub const NO_NAME: u32 = u32::MAX;

/// What a span records, OpenTelemetry's kinds (other formats map to them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Work inside a service (or a kind the format did not give).
    Internal,
    /// A service handling a request: an endpoint's invocation.
    Server,
    /// A call to another service, as the caller saw it.
    Client,
    /// A message sent for another service to consume: a call no one waits for.
    Producer,
    /// A message consumed: an invocation, as a server span is.
    Consumer,
}

impl Kind {
    /// A service's handling of a request or message: an endpoint's invocation.
    pub fn is_served(self) -> bool {
        matches!(self, Kind::Server | Kind::Consumer)
    }

    /// A call or message sent to another service, as its sender saw it.
    pub fn is_sent(self) -> bool {
        matches!(self, Kind::Client | Kind::Producer)
    }
}

/// One span, format-independent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The trace it belongs to.
    pub trace: u128,
    /// Its id, unique within the trace.
    pub id: u64,
    /// Its parent's id (`None`: a root).
    pub parent: Option<u64>,
    /// Interned service name.
    pub service: u32,
    /// Interned instance name, or [`NO_NAME`].
    pub instance: u32,
    /// Interned span name: the endpoint for a server span, the callee for a client span.
    pub name: u32,
    /// Interned callee service a client span names (`peer.service`), or [`NO_NAME`].
    pub peer: u32,
    /// Its kind.
    pub kind: Kind,
    /// Start, Unix nanoseconds.
    pub start: i64,
    /// End, Unix nanoseconds (never before `start`: a reader clips and counts).
    pub end: i64,
    /// Its status says it failed.
    pub error: bool,
    /// The attempt it was (1 the first), when the span says (`http.request.resend_count`
    /// + 1, `stampede.attempt`).
    pub attempt: Option<u32>,
}

/// Interned names.
#[derive(Debug, Default)]
pub struct Names {
    index: FastMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    /// The number of `name`, adding it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.index.get(name) {
            return n;
        }
        let n = self.names.len() as u32;
        self.index.insert(name.to_string(), n);
        self.names.push(name.to_string());
        n
    }

    /// The name numbered `n`.
    pub fn get(&self, n: u32) -> &str {
        self.names.get(n as usize).map_or("", String::as_str)
    }
}

/// Why spans were skipped or changed, counted (the summary prints them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Spans without a trace id or span id.
    pub no_id: u64,
    /// Spans whose parent is not in their trace: placed under the trace's root (one
    /// trace is one request), or the root itself when no other root is.
    pub orphans: u64,
    /// Spans that end before they start (clock skew): clipped to zero length.
    pub negative: u64,
    /// Spans in a loop of parent links (no root leads to them): skipped.
    pub in_cycle: u64,
    /// Spans whose start or duration is negative in a format that counts Unix time
    /// (Jaeger, Zipkin): skipped.
    pub bad_time: u64,
    /// Child spans that start before their parent or end after it (clock skew): their
    /// parent's self time counts only what overlaps it.
    pub skewed: u64,
    /// Records a format's reader could not read (a malformed line or row).
    pub unreadable: u64,
    /// Traces given up before they were complete (the open-trace bound was reached).
    pub cut: u64,
    /// Traces with no service-side span to start from.
    pub no_entry: u64,
    /// Spans whose id another span of a different endpoint had (numbered apart).
    pub renumbered: u64,
    /// Spans recorded twice (one id, one endpoint): merged into one.
    pub duplicates: u64,
    /// Zipkin fragments (a span's pieces without a timestamp) no timed piece matched.
    pub untimed: u64,
    /// Calls to a callee the trace does not name (Alibaba's `UNKNOWN`): skipped.
    pub unknown_callee: u64,
    /// Endpoints known only by their callers' name for them, joined to the endpoint a
    /// client/server span pair showed they are.
    pub joined: u64,
}

/// A span of trace 1 for the tests: `at` is (service, name), times in milliseconds.
#[cfg(test)]
pub(crate) fn test_span(
    names: &mut Names,
    id: u64,
    parent: Option<u64>,
    at: (&str, &str),
    kind: Kind,
    ms: (i64, i64),
) -> Span {
    Span {
        trace: 1,
        id,
        parent,
        service: names.intern(at.0),
        instance: NO_NAME,
        name: names.intern(at.1),
        peer: NO_NAME,
        kind,
        start: ms.0 * 1_000_000,
        end: ms.1 * 1_000_000,
        error: false,
        attempt: None,
    }
}
