//! One file being linted: its text, what kind of code it holds, and byte ranges of syn spans.

use std::ops::Range;
use std::path::Path;

use proc_macro2::Span;
use serde::Serialize;

use super::profile::ApiSet;

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

    /// `.rs` is Rust, `.py` is Python; anything else is neither (a directory walk skips it).
    pub fn of_path(path: &Path) -> Option<Language> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("rs") => Some(Language::Rust),
            Some("py") => Some(Language::Python),
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
fn python_kind(path: &Path, file_name: &str, stem: &str) -> Option<FileKind> {
    if stem.starts_with("test_") || file_name == "conftest.py" {
        return Some(FileKind::Test);
    }
    if file_name == "setup.py" {
        return Some(FileKind::BuildScript);
    }
    if matches!(file_name, "__main__.py" | "main.py") {
        return Some(FileKind::Binary);
    }
    let in_dir = |names: &[&str]| {
        path.parent().is_some_and(|p| {
            p.components().any(|c| c.as_os_str().to_str().is_some_and(|c| names.contains(&c)))
        })
    };
    if in_dir(&["tests", "test"]) {
        return Some(FileKind::Test);
    }
    if in_dir(&["scripts", "tools", "bin"]) {
        return Some(FileKind::Binary);
    }
    None
}

/// A parsed file as the rules see it.
pub(crate) struct FileCx<'a> {
    pub text: &'a str,
    /// Bytes stripped before parsing (a BOM, a shebang line): add to every span offset.
    pub base: usize,
    pub kind: FileKind,
    pub apis: ApiSet,
    /// Preview patterns of stable rules run too (`--preview`).
    pub preview: bool,
    /// Under a backend or kernel directory (`backends/vulkan/mod.rs`, `src/cpu_backend/ops.rs`).
    pub backend: bool,
}

impl FileCx<'_> {
    /// The byte range of a span in the file's text.
    pub fn range(&self, span: Span) -> Range<usize> {
        let r = span.byte_range();
        (r.start + self.base)..(r.end + self.base)
    }

    /// The source text of a range, for messages; empty if out of bounds.
    pub fn snippet(&self, range: &Range<usize>) -> &str {
        self.text.get(range.clone()).unwrap_or("")
    }

    /// The source text of a range on one line, shortened for a message.
    pub fn short(&self, range: &Range<usize>) -> String {
        let s = self.snippet(range);
        let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 60 {
            let cut: String = one_line.chars().take(57).collect();
            format!("{cut}...")
        } else {
            one_line
        }
    }
}
