//! The `stampede` command: parses arguments, then hands over to the crates (see
//! `cli`). Exit codes: 0 success, 1 a failed claim or check, 2 bad input, 3 I/O or
//! internal error.

fn main() -> std::process::ExitCode {
    stampede::cli::main()
}
