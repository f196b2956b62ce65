//! Lint throughput against the floor it cannot beat: a bare `syn` parse and full visit of the
//! same files, both on texts already in memory. Shared by `benches/lint.rs` and the bench runner.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The cargo registry's unpacked sources: a large tree of real Rust on any machine that builds
/// this crate.
pub fn default_roots() -> Vec<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    home.map(|h| h.join("registry/src")).into_iter().collect()
}

/// Every `.rs` file under `roots` that the linter would read, sorted by path, the first `limit`.
pub fn collect(roots: &[PathBuf], limit: Option<usize>) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for root in roots {
        for entry in ignore::WalkBuilder::new(root).build().flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read_to_string(p)
                && text.len() <= devcheck_lint::MAX_FILE_BYTES
            {
                files.push((p.to_path_buf(), text));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(n) = limit {
        files.truncate(n);
    }
    files
}

/// The floor: parse, and visit every node once. Returns the number of expressions seen.
pub fn bare(text: &str) -> usize {
    struct Count(usize);
    impl<'ast> Visit<'ast> for Count {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            self.0 += 1;
            syn::visit::visit_expr(self, e);
        }
    }
    let n = match syn::parse_file(text) {
        Ok(file) => {
            let mut c = Count(0);
            c.visit_file(&file);
            c.0
        }
        Err(_) => 0,
    };
    // The linter drops span bookkeeping after each file; the floor must pay the same.
    proc_macro2::extra::invalidate_current_thread_spans();
    n
}

/// The number of findings `devcheck lint` reports on one file.
pub fn lint(path: &Path, text: &str, settings: &devcheck_lint::Settings) -> usize {
    devcheck_lint::lint_source(path, text, settings).diagnostics.len()
}
