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

    #[error("`{}` is a symbolic link to `{}`, which does not exist", path.display(), target.display())]
    #[diagnostic(
        code(devcheck_lint::dangling_link),
        help("point the link at an existing file or directory, or pass its target instead")
    )]
    DanglingLink { path: PathBuf, target: PathBuf },

    #[error("`{}` is a symbolic link to `{}` that cannot be followed", path.display(), target.display())]
    #[diagnostic(
        code(devcheck_lint::unfollowable_link),
        help(
            "a link that leads back to itself (directly or through other links) never reaches a file; fix the link or pass a real path"
        )
    )]
    UnfollowableLink {
        path: PathBuf,
        target: PathBuf,
        #[source]
        source: std::io::Error,
    },

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
