//! Which files of a package some target compiles: the crate roots Cargo finds (`src/lib.rs`,
//! `src/main.rs`, `src/bin/`, `examples/`, `tests/`, `benches/`, `build.rs`, and the paths the
//! manifest names), then every file a `mod name;` declares, from one file to the next. A file of
//! the package reached by none of them is not compiled: a snapshot, a script kept beside the code,
//! a module commented out of `lib.rs`. Its findings would describe code that never runs.
//!
//! Only a walk that saw everything decides: the answer is "unknown" when a file on the way is not
//! in the run (a single file linted), declares modules inside an inline module, or names its
//! module's file through a macro or `cfg_attr`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::crates::{ModDecl, normalized};

/// The crate roots of the package at `root` that exist on disk.
fn crate_roots(root: &Path) -> Option<Vec<PathBuf>> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    let manifest: toml::Table = text.parse().ok()?;
    // A virtual manifest (a workspace with no package of its own) has no targets to read.
    let package = manifest.get("package")?.as_table()?;
    let mut roots = vec![root.join("src/lib.rs"), root.join("src/main.rs"), root.join("build.rs")];
    if let Some(build) = package.get("build").and_then(toml::Value::as_str) {
        roots.push(root.join(build));
    }
    for dir in ["src/bin", "examples", "tests", "benches"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                roots.push(path.join("main.rs"));
            } else if path.extension().is_some_and(|e| e == "rs") {
                roots.push(path);
            }
        }
    }
    if let Some(path) = manifest.get("lib").and_then(|l| l.get("path")).and_then(toml::Value::as_str) {
        roots.push(root.join(path));
    }
    for kind in ["bin", "example", "test", "bench"] {
        for target in manifest.get(kind).and_then(toml::Value::as_array).into_iter().flatten() {
            if let Some(path) = target.get("path").and_then(toml::Value::as_str) {
                roots.push(root.join(path));
            }
        }
    }
    Some(roots.into_iter().filter(|p| p.is_file()).filter_map(|p| normalized(&p)).collect())
}

/// The files of `files` (the package's files in the run: each path with its declared modules,
/// or `None` when the file declares them in a way the walk cannot follow) that no target of the
/// package at `root` compiles. Empty when the walk cannot decide.
pub(crate) fn not_compiled(root: &Path, files: &[(PathBuf, Option<&[ModDecl]>)]) -> Vec<usize> {
    let Some(roots) = crate_roots(root) else { return Vec::new() };
    let by_path: HashMap<PathBuf, usize> =
        files.iter().enumerate().filter_map(|(i, (p, _))| Some((normalized(p)?, i))).collect();
    let root_set: HashSet<&PathBuf> = roots.iter().collect();
    let mut compiled: HashSet<PathBuf> = HashSet::new();
    let mut queue: Vec<PathBuf> = roots.clone();
    while let Some(file) = queue.pop() {
        if !compiled.insert(file.clone()) {
            continue;
        }
        // A file on the way that the run did not read, or whose modules are not all plain
        // declarations: what it compiles is not known.
        let Some(&i) = by_path.get(&file) else { return Vec::new() };
        let Some(mods) = files[i].1 else { return Vec::new() };
        let Some(dir) = file.parent() else { return Vec::new() };
        // `mod x;` in a crate root or a `mod.rs` is beside it; in `a.rs` it is under `a/`.
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let children_dir = if root_set.contains(&file) || matches!(name, "mod.rs" | "lib.rs" | "main.rs") {
            dir.to_path_buf()
        } else {
            dir.join(name.strip_suffix(".rs").unwrap_or(name))
        };
        for m in mods {
            let candidates = match &m.path {
                Some(p) => vec![dir.join(p)],
                None => vec![
                    children_dir.join(format!("{}.rs", m.name)),
                    children_dir.join(&m.name).join("mod.rs"),
                ],
            };
            queue.extend(candidates.iter().filter(|c| c.is_file()).filter_map(|c| normalized(c)));
        }
    }
    files
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| normalized(p).is_some_and(|p| !compiled.contains(&p)))
        .map(|(i, _)| i)
        .collect()
}
