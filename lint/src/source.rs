//! What a file is, before any front end reads it: its language (from its name), what kind of
//! code it holds (from its path), and the tensor APIs it is read with.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What a file is for, from its path. Several rules only apply to library/model code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Library,
    /// `src/main.rs`, `src/bin/**`: an application, where choosing a device is its job.
    Binary,
    Example,
    Test,
    Bench,
    BuildScript,
}

impl FileKind {
    /// Reads the kind from the path's components (`tests/`, `benches/`, `examples/`, `src/bin/`,
    /// `main.rs`, `build.rs`, `tests.rs`, `*_test.rs`).
    pub fn of_path(path: &Path) -> FileKind {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stem = path.file_stem().and_then(|n| n.to_str()).unwrap_or("");
        if file_name == "build.rs" {
            return FileKind::BuildScript;
        }
        if Language::of_path(path) == Some(Language::Python)
            && let Some(kind) = python_kind(path, file_name, stem)
        {
            return kind;
        }
        let dirs: Vec<&str> = path
            .parent()
            .map(|p| p.components().filter_map(|c| c.as_os_str().to_str()).collect())
            .unwrap_or_default();
        for dir in dirs.iter().rev() {
            match *dir {
                "tests" | "test" => return FileKind::Test,
                "benches" | "bench" => return FileKind::Bench,
                "examples" | "example" => return FileKind::Example,
                _ => {}
            }
        }
        if stem == "tests" || stem == "test" || stem.ends_with("_test") || stem.ends_with("_tests") {
            return FileKind::Test;
        }
        if file_name == "main.rs" || dirs.windows(2).any(|w| w[0] == "src" && w[1] == "bin") {
            return FileKind::Binary;
        }
        FileKind::Library
    }

    /// Library or model code: not an application, example, test, bench or build script.
    pub fn is_library(self) -> bool {
        self == FileKind::Library
    }

    /// Tests and benches: where D001-style rules stay quiet.
    pub fn is_test_like(self) -> bool {
        matches!(self, FileKind::Test | FileKind::Bench)
    }
}

/// The languages devcheck lints, told apart by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Rust,
    Python,
}

impl Language {
    pub const ALL: [Language; 2] = [Language::Rust, Language::Python];

    /// `.rs` is Rust, `.py` and `.ipynb` (a notebook's code cells) are Python; anything else is
    /// neither (a directory walk skips it).
    pub fn of_path(path: &Path) -> Option<Language> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("rs") => Some(Language::Rust),
            Some("py" | "ipynb") => Some(Language::Python),
            _ => None,
        }
    }

    /// A file named on the command line is linted whatever its extension: as Rust, unless `.py`.
    pub fn of_named_file(path: &Path) -> Language {
        Language::of_path(path).unwrap_or(Language::Rust)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
        }
    }

    /// As people write it in prose.
    pub fn title(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::Python => "Python",
        }
    }
}

/// Python's conventions: pytest files (`test_*.py`, `*_test.py`, `conftest.py`), packaging
/// (`setup.py`), and scripts (`__main__.py`, `main.py`, `scripts/`, `tools/`), where choosing a
/// device is the script's job. `None`: decided by the rules shared with Rust.
/// Is the file in a folder of tests (`tests/`, `test/`), not only named for one (`test_net.py`)?
pub(crate) fn in_tests_folder(path: &Path) -> bool {
    in_folder(path, &["tests", "test"])
}

fn in_folder(path: &Path, names: &[&str]) -> bool {
    path.parent()
        .is_some_and(|p| p.components().any(|c| c.as_os_str().to_str().is_some_and(|c| names.contains(&c))))
}

fn python_kind(path: &Path, file_name: &str, stem: &str) -> Option<FileKind> {
    if stem.starts_with("test_") || file_name == "conftest.py" {
        return Some(FileKind::Test);
    }
    if file_name == "setup.py" {
        return Some(FileKind::BuildScript);
    }
    // A notebook runs top to bottom as a script does: choosing a device is its job.
    if matches!(file_name, "__main__.py" | "main.py") || file_name.ends_with(".ipynb") {
        return Some(FileKind::Binary);
    }
    if in_tests_folder(path) {
        return Some(FileKind::Test);
    }
    if stem.starts_with("bench_")
        || stem.ends_with("_benchmark")
        || in_folder(path, &["benchmarks", "benchmark"])
    {
        return Some(FileKind::Bench);
    }
    if in_folder(path, &["scripts", "tools", "bin"]) {
        return Some(FileKind::Binary);
    }
    None
}

/// A tensor library the linter knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Api {
    Devcheck,
    Candle,
    Tch,
    Burn,
}

impl Api {
    pub const ALL: [Api; 4] = [Api::Devcheck, Api::Candle, Api::Tch, Api::Burn];

    pub fn as_str(self) -> &'static str {
        match self {
            Api::Devcheck => "devcheck",
            Api::Candle => "candle",
            Api::Tch => "tch",
            Api::Burn => "burn",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The API a crate root belongs to, from the first segment of a `use` path.
    pub(crate) fn of_crate(root: &str) -> Option<Api> {
        match root {
            "devcheck" => Some(Api::Devcheck),
            "candle" | "candle_core" | "candle_nn" | "candle_transformers" | "candle_examples" => {
                Some(Api::Candle)
            }
            "tch" => Some(Api::Tch),
            _ if root == "burn" || root.starts_with("burn_") => Some(Api::Burn),
            _ => None,
        }
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The APIs a file uses. Empty means "not known": rules then use what all profiles agree on and
/// stay quiet where they differ.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ApiSet(u8);

impl ApiSet {
    pub const EMPTY: ApiSet = ApiSet(0);

    pub fn only(api: Api) -> Self {
        ApiSet(api.bit())
    }

    pub fn insert(&mut self, api: Api) {
        self.0 |= api.bit();
    }

    /// True when the file uses `api`, or when nothing is known about the file.
    pub fn may_be(self, api: Api) -> bool {
        self.0 == 0 || self.0 & api.bit() != 0
    }

    /// True only when the file is known to use `api`.
    pub fn is(self, api: Api) -> bool {
        self.0 & api.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Api> {
        Api::ALL.into_iter().filter(move |a| self.is(*a))
    }

    /// Burn only: the rules that the issue scopes to devcheck, candle and tch skip such files.
    pub fn only_burn(self) -> bool {
        self.0 == Api::Burn.bit()
    }
}

impl fmt::Display for ApiSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("unknown");
        }
        let names: Vec<&str> = self.iter().map(Api::as_str).collect();
        f.write_str(&names.join("+"))
    }
}

/// The path as diagnostics show it: without a leading `./`, with `/` between folders on every
/// system. A name that is not UTF-8 shows its odd bytes as `\xNN`; so that no two names ever
/// show alike, such a name (or one whose text holds a `\xNN` of its own) shows its backslashes
/// doubled. Only for showing: files are read and written through their `Path` (a `\` in a Unix
/// file name is a name, not a separator).
pub(crate) fn display_path(path: &Path) -> String {
    let shown = os_str_display(path.as_os_str());
    let shown = if cfg!(windows) { shown.replace('\\', "/") } else { shown };
    match shown.strip_prefix("./") {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => shown,
    }
}

#[cfg(unix)]
fn os_str_display(s: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let bytes = s.as_bytes();
    if let Ok(text) = std::str::from_utf8(bytes)
        && !has_hex_escape(text)
    {
        return text.to_string();
    }
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Does `text` hold `\x` and two hex digits, which would read as an escaped byte?
#[cfg(unix)]
fn has_hex_escape(text: &str) -> bool {
    text.as_bytes()
        .windows(4)
        .any(|w| w[0] == b'\\' && w[1] == b'x' && w[2].is_ascii_hexdigit() && w[3].is_ascii_hexdigit())
}

#[cfg(not(unix))]
fn os_str_display(s: &std::ffi::OsStr) -> String {
    s.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_shown_as_they_are_named() {
        assert_eq!(display_path(Path::new("./src/a.rs")), "src/a.rs");
        // On Unix a backslash is part of a name.
        #[cfg(unix)]
        assert_eq!(display_path(Path::new("src/a\\b.rs")), "src/a\\b.rs");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt as _;
            let name = std::ffi::OsStr::from_bytes(b"caf\xe9.rs");
            assert_eq!(display_path(Path::new(name)), "caf\\xE9.rs");
            // A name whose text is what the escape looks like shows differently.
            assert_eq!(display_path(Path::new("caf\\xE9.rs")), "caf\\\\xE9.rs");
            let both = std::ffi::OsStr::from_bytes(b"a\\b\xe9.rs");
            assert_eq!(display_path(Path::new(both)), "a\\\\b\\xE9.rs");
        }
    }
}
