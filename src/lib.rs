//! stampede's command line as a library: [`cli::main`] is the `stampede` binary, and
//! [`cli::embed`] runs the same commands in process, for the Python package
//! (`python/`), so both answer with the same code, the same words and the same bytes.

pub mod cli;
