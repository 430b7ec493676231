//! `stampede._stampede`: the native half of the Python package. Three functions —
//! run a `stampede` command in process ([`command`]), read one of its Parquet tables as
//! a `pyarrow.Table` ([`read_table`]), list the built-ins ([`builtins`]) — and the
//! Python half (`stampede/__init__.py`) builds the API on them.
//!
//! The GIL is released while a command runs and while a table is decoded: the command
//! runs on a thread of its own, its replicas on every core as the CLI's do, and the
//! calling thread wakes every 100 ms to run Python's signal handlers (Ctrl-C, a
//! notebook's interrupt) and the progress callback. An interrupt sets the command's
//! cancel flag, waits for it to stop (its folder never appears), and raises.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_pyarrow::{IntoPyArrow, Table};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use stampede::cli::embed::{self, Failure, Finished, Progress};

/// How often the waiting thread takes the GIL to look at signals and report progress.
const POLL: Duration = Duration::from_millis(100);

/// What [`command`] returns to Python: `(ok, exit_code, texts, warnings, summary,
/// unreadable)` — the command's JSON documents when it ran to its end (`ok`), else its
/// error message; `run`'s summary table; whether the error is a file the input named
/// that is missing or cannot be read (Python's `StampedeIOError`).
type Outcome = (bool, u8, Vec<String>, Vec<String>, Option<String>, bool);

/// Runs `stampede ARGS…` in process; `progress(done, total)` is called about every
/// 100 ms while it runs. An exception from a signal handler (KeyboardInterrupt) or
/// from `progress` cancels the command and is raised once it has stopped.
#[pyfunction]
#[pyo3(signature = (args, progress=None))]
fn command(py: Python<'_>, args: Vec<String>, progress: Option<Bound<'_, PyAny>>) -> PyResult<Outcome> {
    let cancel = Arc::new(AtomicBool::new(false));
    let bar = Progress::default();
    let (sender, receiver) = mpsc::channel();
    // A Receiver is not Sync, and detach's closure may run on another thread.
    let receiver = std::sync::Mutex::new(receiver);
    let worker = std::thread::Builder::new()
        .name("stampede-command".into())
        // The binary runs commands on the main thread's 8 MiB; deep scenario files recurse.
        .stack_size(16 << 20)
        .spawn({
            let (cancel, bar) = (cancel.clone(), bar.clone());
            move || {
                let _ = sender.send(embed::command(&args, cancel, bar));
            }
        })
        .map_err(|error| PyOSError::new_err(format!("cannot start the command's thread: {error}")))?;
    let mut raised: Option<PyErr> = None;
    let outcome = loop {
        match py.detach(|| receiver.lock().expect("not poisoned").recv_timeout(POLL)) {
            Ok(outcome) => break Some(outcome),
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) if raised.is_none() => {
                let (done, total) = bar.position();
                let checked = py
                    .check_signals()
                    .and_then(|()| progress.as_ref().map_or(Ok(()), |p| p.call1((done, total)).map(drop)));
                if let Err(error) = checked {
                    cancel.store(true, Ordering::Relaxed);
                    raised = Some(error);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    };
    let joined = py.detach(|| worker.join());
    if let Some(error) = raised {
        return Err(error);
    }
    match (outcome, joined) {
        (Some(Ok(Finished { exit_code, documents, warnings, summary })), _) => {
            let texts = documents.iter().map(|d| serde_json::to_string(d).expect("JSON serialises")).collect();
            Ok((true, exit_code, texts, warnings, summary, false))
        }
        (Some(Err(Failure { message, exit_code, unreadable, .. })), _) => {
            Ok((false, exit_code, vec![message], Vec::new(), None, unreadable))
        }
        (None, Err(panic)) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(PyRuntimeError::new_err(format!("stampede stopped on an internal error (a bug): {why}")))
        }
        (None, Ok(())) => Err(PyRuntimeError::new_err("stampede's command thread ended without an answer")),
    }
}

/// Reads a Parquet file the run wrote into a `pyarrow.Table`: decoded here, with the
/// GIL released, and handed over through the Arrow C data interface, without a copy.
#[pyfunction]
fn read_table(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
    let read = || -> Result<Table, String> {
        let cannot = |error: &dyn std::fmt::Display| format!("cannot read {}: {error}", path.display());
        let file = std::fs::File::open(&path).map_err(|e| cannot(&e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| cannot(&e))?;
        let schema = builder.schema().clone();
        let batches = builder.build().map_err(|e| cannot(&e))?.collect::<Result<Vec<RecordBatch>, _>>();
        Table::try_new(batches.map_err(|e| cannot(&e))?, schema).map_err(|e| cannot(&e))
    };
    let table = py.detach(read).map_err(PyOSError::new_err)?;
    Ok(table.into_pyarrow(py)?.unbind())
}

/// The built-in scenarios, in `stampede list` order: (name, description).
#[pyfunction]
fn builtins() -> PyResult<Vec<(String, String)>> {
    use stampede::cli::embed::builtins;
    builtins().map_err(|error| PyValueError::new_err(error.to_string()))
}

#[pymodule]
fn _stampede(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(command, module)?)?;
    module.add_function(wrap_pyfunction!(read_table, module)?)?;
    module.add_function(wrap_pyfunction!(builtins, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
