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
