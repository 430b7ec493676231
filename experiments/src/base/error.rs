//! The one error type of a run, carrying the exit code the command line maps it to.
//!
//! Messages follow one shape: what was wrong, naming the field path and the value,
//! then what is allowed. A hint line may follow.

use std::fmt;

/// Why a run could not go ahead; decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Usage, scenario file or value out of range: exit 2, nothing written.
    BadInput,
    /// Reading or writing files failed: exit 3, nothing half-written left behind.
    Io,
    /// A bug: exit 3.
    Internal,
}

/// A failed run.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub hint: Option<String>,
}

impl Error {
    /// Bad input: the message names the field, the value and what is allowed.
    pub fn bad_input(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::BadInput, message: message.into(), hint: None }
    }

    /// A file-system failure.
    pub fn io(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Io, message: message.into(), hint: None }
    }

    /// Adds a hint line ("try …").
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Prefixes the message with context, e.g. the grid point it came from.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The process exit code of the contract: 2 bad input, 3 I/O or internal.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::BadInput => 2,
            ErrorKind::Io | ErrorKind::Internal => 3,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<stampede_output::OutputError> for Error {
    fn from(error: stampede_output::OutputError) -> Self {
        Error::io(format!("cannot write {error}"))
    }
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
