//! The `D000` findings of files that are not analysed, whichever their language: too large,
//! too deeply nested, or no stack to be had for their tree. Each front end refuses a file for its
//! own reasons; the findings read the same.

use crate::diagnostic::Finding;
use crate::registry;

/// Files larger than this are reported (`D000`) instead of parsed.
pub const MAX_FILE_BYTES: usize = 8 << 20;

/// Where and how deep a file first nests beyond the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooDeep {
    /// Byte offset of the token that went past the limit.
    pub at: usize,
    /// The token's length in bytes (at least 1), for the label.
    pub len: usize,
}

/// The `D000` of a file whose tree needed more stack than its thread had, when the system gave
/// none.
pub(crate) fn no_stack(error: &std::io::Error) -> Finding {
    Finding::new(
        &registry::PARSE_ERROR,
        0..0,
        format!("file not linted: no stack could be set up to analyse it ({error})"),
    )
    .help("the system is out of threads or memory; run again with fewer other processes")
}

/// The `D000` of a file larger than [`MAX_FILE_BYTES`] (`bytes` when its size is known).
pub(crate) fn too_large(bytes: Option<u64>) -> Finding {
    let message = match bytes {
        Some(b) => format!("file not linted: it is {b} bytes, more than the limit of {MAX_FILE_BYTES} bytes"),
        None => format!("file not linted: it is larger than the limit of {MAX_FILE_BYTES} bytes"),
    };
    Finding::new(&registry::PARSE_ERROR, 0..0, message)
        .help("generated files this large are best excluded (`exclude` in devcheck.toml)")
}

/// A message from a parser, in the linter's voice: lowercase first, unless it starts with a
/// name or an acronym.
pub(crate) fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_uppercase() && chars.clone().next().is_some_and(|n| n.is_lowercase()) => {
            c.to_lowercase().chain(chars).collect()
        }
        _ => s.to_string(),
    }
}
