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
    /// Bad input of one kind: a load the model has no steady state for (an unbounded
    /// queue at ρ ≥ 1), or more events than a replica may run. `stampede map` counts
    /// such a point as beyond the level instead of refusing the map.
    pub overloaded: bool,
    /// Bad input of another kind: a file the input names (a scenario, a data file, a
    /// trace) is missing or cannot be read. Exit 2 like any bad input; Python raises
    /// `StampedeIOError` (an `OSError`) for it.
    pub unreadable: bool,
}

impl Error {
    /// Bad input: the message names the field, the value and what is allowed.
    /// Very long numbers are abbreviated (`1e308`, not 309 digits).
    pub fn bad_input(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::BadInput,
            message: abbreviate_words(&abbreviate_numbers(&message.into())),
            hint: None,
            overloaded: false,
            unreadable: false,
        }
    }

    /// Bad input that is a load with no steady state or beyond the event budget (see
    /// [`Error::overloaded`]): exit 2 like any bad input.
    pub fn overloaded(message: impl Into<String>) -> Self {
        Error { overloaded: true, ..Error::bad_input(message) }
    }

    /// Bad input that names a file which is missing or cannot be read (see
    /// [`Error::unreadable`]): exit 2 like any bad input.
    pub fn unreadable(message: impl Into<String>) -> Self {
        Error { unreadable: true, ..Error::bad_input(message) }
    }

    /// A file-system failure.
    pub fn io(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Io, message: message.into(), hint: None, overloaded: false, unreadable: false }
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
        // Every kind, not only bad input: a number of 300 digits reads as `1e-300` in an
        // I/O error, a context or a hint too.
        write!(f, "{}", abbreviate_numbers(&self.message))?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {}", abbreviate_numbers(hint))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<stampede_output::OutputError> for Error {
    fn from(error: stampede_output::OutputError) -> Self {
        match error.kind {
            stampede_output::OutputErrorKind::Io => Error::io(format!("cannot write {error}")),
            stampede_output::OutputErrorKind::Foreign => Error::bad_input(error.to_string()).with_hint(REPLACE_HINT),
            stampede_output::OutputErrorKind::NotAFolder => {
                Error::bad_input(error.to_string()).with_hint("move the file away, or choose another folder with --out")
            }
        }
    }
}

/// What to do about a destination that holds something stampede did not write.
pub(crate) const REPLACE_HINT: &str =
    "choose another folder with --out (or another name with --set name=...), or pass --force to replace the \
     folder and everything in it";

/// Rewrites every number of more than 15 digits in scientific notation with six
/// significant digits (`1e308`, `1.23457e-300`). A number already in scientific
/// notation is kept whole, so abbreviating twice changes nothing.
fn abbreviate_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let mut end = tail.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(tail.len());
        // An exponent belongs to its number: `9.99e299` is one token.
        let exponent = tail[end..]
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .filter(|e| e.starts_with(|c: char| c.is_ascii_digit()));
        if let Some(digits) = exponent {
            let after = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
            end = tail.len() - digits.len() + after;
        }
        let number = &tail[..end];
        let digits = number.chars().take_while(|c| !matches!(c, 'e' | 'E')).filter(char::is_ascii_digit).count();
        match number.parse::<f64>() {
            Ok(value) if digits > 15 => out.push_str(&super::numbers::scientific(value, 6)),
            _ => out.push_str(number),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The most characters a message quotes of one word (a value, a path) before cutting it.
const LONGEST_WORD: usize = 80;

/// Cuts every word (a run without spaces) longer than [`LONGEST_WORD`] characters to
/// its start and its length: a 20,000-character value is named, not printed.
fn abbreviate_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4096));
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        // Punctuation after the word stays: `"yyy…(20002 characters):`.
        let body = word.trim_end_matches([':', ',', ';']);
        let length = body.chars().count();
        if length > LONGEST_WORD {
            let start: String = body.chars().take(40).collect();
            out.push_str(&format!("{start}…({length} characters){}", &word[body.len()..]));
        } else {
            out.push_str(word);
        }
    }
    out
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviating_twice_changes_nothing() {
        let once = Error::bad_input(format!("rate = {}: too high", 1e300 / 1.000_000_000_000_000_2)).message;
        assert_eq!(once, "rate = 1e300: too high");
        assert_eq!(abbreviate_numbers(&once), once);
        assert_eq!(abbreviate_numbers("9.999999999999998e299 and 0.000000000000000001234"), "1e300 and 1.234e-18");
        assert_eq!(Error::io(format!("x = {}", 1e-300)).to_string(), "x = 1e-300");
    }

    #[test]
    fn long_numbers_are_abbreviated_and_short_ones_kept() {
        let huge = format!("queue.arrival_rate_per_s = {}: must be at most 1e12", 1e308);
        assert_eq!(Error::bad_input(huge).message, "queue.arrival_rate_per_s = 1e308: must be at most 1e12");
        assert_eq!(Error::bad_input("verify[2].x = 0.25 of 1000000").message, "verify[2].x = 0.25 of 1000000");
    }

    #[test]
    fn very_long_values_are_named_not_printed() {
        let long = format!("scenario field name = \"{}\": must be letters", "y".repeat(20_000));
        let message = Error::bad_input(long).message;
        assert_eq!(message, format!("scenario field name = \"{}…(20002 characters): must be letters", "y".repeat(39)));
        let path = "a".repeat(80);
        assert_eq!(Error::bad_input(format!("{path} = 1")).message, format!("{path} = 1"), "80 characters stay");
    }
}
