//! Procedural macros for devcheck.
