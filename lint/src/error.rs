//! Errors of a lint run itself (bad configuration, a missing path): the run stops with exit 2.
//! Problems in the linted files are diagnostics, never errors.

use std::path::PathBuf;

use miette::{Diagnostic, NamedSource, SourceSpan};

#[derive(Debug, thiserror::Error, Diagnostic)]
#[non_exhaustive]
pub enum LintError {
    #[error("path `{}` does not exist", path.display())]
    #[diagnostic(
        code(devcheck_lint::no_such_path),
        help("pass files or directories that exist; with no path, `.` is linted")
    )]
    NoSuchPath { path: PathBuf },

    #[error("could not read `{}`: {source}", path.display())]
    #[diagnostic(code(devcheck_lint::io), help("check the path and its permissions"))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(Box<ConfigError>),

    #[error("unknown rule `{code}`{}", context.as_deref().map(|c| format!(" in {c}")).unwrap_or_default())]
    #[diagnostic(
        code(devcheck_lint::unknown_rule),
        help("valid rules: {valid} (codes or names), or ALL; `devcheck lint --list-rules` lists them")
    )]
    UnknownRule { code: String, context: Option<String>, valid: String },

    #[error("invalid glob `{pattern}`: {message}")]
    #[diagnostic(
        code(devcheck_lint::glob),
        help("globs use `*`, `**`, `?` and `[..]`, e.g. `tests/**` or `examples/*.rs`")
    )]
    Glob { pattern: String, message: String },

    #[error("could not write the fixed `{}`: {source}", path.display())]
    #[diagnostic(code(devcheck_lint::write), help("check that the file is writable"))]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A `devcheck.toml` that does not read as configuration, with the offending span.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("invalid configuration in `{}`: {message}", path.display())]
#[diagnostic(code(devcheck_lint::config), help("{help}"))]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
    pub help: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("here")]
    pub span: Option<SourceSpan>,
}
