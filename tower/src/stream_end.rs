//! How a streamed body ends when it does not end well: which of its bounds it broke
//! ([`StreamTimeout`]) or the error the provider sent inside it ([`StreamError`]).
//! Its own module because both the timed body ([`crate::stream`]) and the decisions
//! it reports ([`crate::events`]) name them, and neither may import the other both
//! ways.

use stampede_policy::classify::Outcome;

/// Which bound a stream broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamTimeout {
    /// No headers within `connect`.
    Connect,
    /// No first frame within `first_token`.
    FirstToken,
    /// A gap between frames longer than `inter_token`.
    InterToken,
    /// The body did not end within `total`.
    Total,
}

impl std::fmt::Display for StreamTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            StreamTimeout::Connect => "timeout_connect",
            StreamTimeout::FirstToken => "timeout_first_token",
            StreamTimeout::InterToken => "timeout_inter_token",
            StreamTimeout::Total => "timeout_total",
        };
        f.write_str(name)
    }
}

impl std::error::Error for StreamTimeout {}

/// An error the provider sent inside a 200 stream (an SSE `event: error` after the
/// headers): what it says, as an outcome — an overload, a rate limit, a server error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamError(pub Outcome);

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an error inside the stream: {:?}", self.0)
    }
}

impl std::error::Error for StreamError {}
