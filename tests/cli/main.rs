//! Integration tests of the `stampede` binary, as one test binary (one link instead
//! of five): bad input, output files and determinism, the cluster and gateway
//! commands, and DuckDB/pandas reading the output. In-process tests of the same
//! layers live in `run/src/tests.rs`.

mod bad_input;
mod big_sweeps;
mod calibrate;
mod cdp;
mod ci_checks;
mod cluster_cli;
mod column_types;
mod common;
mod compare;
mod duckdb_interop;
mod embed;
mod figures;
mod folder;
mod fuzz;
mod gateway_cli;
mod import;
mod inputs;
mod integrity;
mod llm_launch;
mod llm_pages;
mod map;
mod optimize;
mod precision;
mod rare;
mod readme;
mod report;
mod resume;
mod ring;
mod run_output;
mod sealed;
mod serve_files;
mod serve_guard;
mod shards;
mod shop;
mod slurm;
mod tail;
mod trace;
mod user_files;
