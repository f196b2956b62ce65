//! Backends compute; they never see names, origins or mismatched devices. The op front end in
//! `src/tensor/` checks everything first and attaches origins to the results.

pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod fake;
pub(crate) mod op;
