//! stampede-scenario shows other crates only what they use. Every module below is
//! named by another crate of the workspace (the command, run, optimize, report, serve,
//! import, tower, the benches or the Python package); the rest of the crate is
//! `pub(crate)`, so a type used only inside it can change without touching anyone.
//!
//! A new public module fails this test: if another crate needs it, add it here; if
//! not, declare it `pub(crate) mod`. The item count (functions, methods, types,
//! constants, re-exports and fields in these modules) may only fall: lower
//! `MOST_ITEMS` when it does.

const PUBLIC_MODULES: &[&str] = &[
    "",
    "base",
    "base::error",
    "base::limits",
    "base::numbers",
    "base::provenance",
    "base::suggest",
    "base::typing",
    "inputs",
    "inputs::fit",
    "inputs::observed",
    "inputs::sealed",
    "models",
    "models::cluster",
    "models::expression",
    "models::gateway",
    "models::gateway::capacity",
    "models::gateway::fixture",
    "models::graph",
    "models::graph::build",
    "models::metrics",
    "models::presentation",
    "models::rare",
    "resolved",
    "scenario",
    "scenario::builtin",
    "scenario::claims",
    "scenario::document",
    "scenario::overrides",
    "schema",
    "schema::columns",
];

/// The public items of the modules above: 1,069 in 49 public modules before the
/// surface was narrowed (issue 74), 636 in 30 after; 645 with `stampede rare`'s
/// probe and splitting (issue 76: `Probe`, `Observed` and `ModelConfig`'s two); 648
/// with a scenario's `[rare]` section (`RareSection`, `seconds`, `rare_section`); 649
/// with `base::numbers::duration_s`, the one duration reader (import's was its own);
/// 651 with events judged at the end (`ModelConfig::probe`, `no_output`; `Observed`'s
/// `finish` and `ModelSpec::end_score` count too); 653 with `Error::unreadable` (the
/// field and its constructor: Python's `StampedeIOError` for a missing input file).
const MOST_ITEMS: usize = 653;

#[test]
fn the_public_surface_is_what_other_crates_use() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let surface = stampede_devtools::public_surface(&src);
    let new: Vec<&String> = surface.modules.iter().filter(|m| !PUBLIC_MODULES.contains(&m.as_str())).collect();
    let gone: Vec<&&str> = PUBLIC_MODULES.iter().filter(|m| !surface.modules.iter().any(|s| s == *m)).collect();
    assert!(
        new.is_empty(),
        "public modules no other crate was known to use: {new:?} — add them to PUBLIC_MODULES if one does, \
         else declare them pub(crate) mod"
    );
    assert!(gone.is_empty(), "modules no longer public: {gone:?} — remove them from PUBLIC_MODULES");
    assert!(
        surface.items <= MOST_ITEMS,
        "{} public items, more than {MOST_ITEMS}: make the new ones pub(crate) unless another crate uses them",
        surface.items
    );
}
