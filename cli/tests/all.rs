//! Every integration test of the command's crate, one module per file of this folder, built as one
//! test binary (one link instead of one per file); nextest still runs each test in its own process.

mod cli_checkpoint;
mod cli_commands;
mod cli_fix;
mod cli_hostile;
mod cli_hostile_python;
mod cli_inspect;
mod cli_lint;
mod cli_notebooks;
mod cli_python;
mod cli_workflow;
mod common;
mod docs;
