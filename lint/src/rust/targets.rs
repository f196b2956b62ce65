//! Which files of a package some target compiles: the crate roots Cargo finds (`src/lib.rs`,
//! `src/main.rs`, `src/bin/`, `examples/`, `tests/`, `benches/`, `build.rs`, and the paths the
//! manifest names), then every file a `mod name;` declares, from one file to the next. A file
//! reached from no package of the run is not compiled: a snapshot, a script kept beside the code,
//! a module commented out of `lib.rs`. Its findings would describe code that never runs.
//!
//! Only a walk that saw everything decides: the answer is "unknown" when a file on the way is not
//! in the run (a single file linted), declares modules in a way the walk does not follow (inside
//! an inline module, through a macro, a `cfg_attr` path), or declares a module whose file the
//! walk cannot find (then it misread something Cargo reads).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::crates::{ModDecl, normalized};

/// The crate roots of the package at `root`, `None` when they are not all known.
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
            match target.get("path").and_then(toml::Value::as_str) {
                Some(path) => roots.push(root.join(path)),
                // A target named without a path is inferred (also from the 2015 edition's
                // places); one that none of those holds is not understood.
                None => {
                    let name = target.get("name").and_then(toml::Value::as_str)?;
                    let dir = match kind {
                        "bin" => "src/bin",
                        "example" => "examples",
                        "test" => "tests",
                        _ => "benches",
                    };
                    let inferred = [
                        root.join(dir).join(format!("{name}.rs")),
                        root.join(dir).join(name).join("main.rs"),
                        root.join("src").join(format!("{name}.rs")),
                    ];
                    if !inferred.iter().any(|p| p.is_file()) {
                        return None;
                    }
                    roots.extend(inferred);
                }
            }
        }
    }
    let roots: Vec<PathBuf> =
        roots.into_iter().filter(|p| p.is_file()).filter_map(|p| normalized(&p)).collect();
    // No crate root on disk: nothing is known about what the package builds.
    (!roots.is_empty()).then_some(roots)
}

/// The files the targets of the package at `root` compile, walked through the `mod`
/// declarations of `files` (each file of the run: its path and declared modules, or `None` when
/// it declares them in a way the walk cannot follow). `None` when the walk cannot decide.
pub(crate) fn compiled(
    root: &Path,
    files: &HashMap<PathBuf, Option<&[ModDecl]>>,
) -> Option<HashSet<PathBuf>> {
    let roots = crate_roots(root)?;
    let mut compiled: HashSet<PathBuf> = HashSet::new();
    // Each file with whether it is a "mod-rs" file, whose modules sit beside it: a crate root,
    // a `mod.rs`, and any file a `#[path]` names (as rustc treats them).
    let mut queue: Vec<(PathBuf, bool)> = roots.into_iter().map(|r| (r, true)).collect();
    while let Some((file, mod_rs)) = queue.pop() {
        if !compiled.insert(file.clone()) {
            continue;
        }
        // A file on the way that the run did not read, or whose modules are not all plain
        // declarations: what it compiles is not known.
        let mods = (*files.get(&file)?)?;
        let dir = file.parent()?;
        let children_dir = if mod_rs { dir.to_path_buf() } else { dir.join(file.file_stem()?) };
        for m in mods {
            let found = match &m.path {
                Some(p) => normalized(&dir.join(p)).filter(|p| p.is_file()).map(|p| (p, true)),
                None => {
                    let flat = children_dir.join(format!("{}.rs", m.name));
                    let nested = children_dir.join(&m.name).join("mod.rs");
                    if flat.is_file() {
                        normalized(&flat).map(|p| (p, false))
                    } else if nested.is_file() {
                        normalized(&nested).map(|p| (p, true))
                    } else {
                        None
                    }
                }
            };
            // A module whose file is not where the walk looks: it misread something.
            queue.push(found?);
        }
    }
    Some(compiled)
}
