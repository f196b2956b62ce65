//! Every integration test of the linter's crate, one module per file of this folder, built as one
//! test binary (one link instead of one per file); nextest still runs each test in its own process.

mod ecosystem_table;
mod inspect_python;
mod lint_fix_safety;
mod lint_fixtures;
mod lint_hostile;
mod lint_hostile_python;
mod lint_meta;
mod lint_registry;
