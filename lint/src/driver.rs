//! Runs the linter over paths: walks directories with the `ignore` crate (so `.gitignore` is
//! respected, symbolic links are followed and loops detected), lints files in parallel, and
//! collects one report per file in path order. What cannot be walked or read is reported as a
//! `D000` for its path; every other file is still linted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::FxHashSet;

use super::config::Settings;
use super::diagnostic::{Diagnostic, Finding, LineIndex};
use super::error::LintError;
use super::pipeline::FileReport;
use super::registry::{self, Severity};
use super::source::{FileKind, Language};
use crate::source::ApiSet;

/// The result of a run.
#[derive(Debug, Default)]
pub struct LintRun {
    /// Every file linted, in path order (files without findings included), and every path that
    /// could not be walked or read.
    pub files: Vec<FileReport>,
    /// The paths the run was given, resolved: `--fix` writes nothing outside them.
    pub(crate) roots: Vec<Root>,
    /// The classes of the run's Python files, for files that import them from each other.
    pub(crate) project: Arc<crate::python::Project>,
}

/// A run of these reports, as if their files had been named on the command line one by one.
impl From<Vec<FileReport>> for LintRun {
    fn from(files: Vec<FileReport>) -> LintRun {
        LintRun { files, roots: Vec::new(), project: Arc::default() }
    }
}

impl LintRun {
    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.files.iter().flat_map(|f| f.diagnostics.iter())
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics().filter(|d| d.severity == severity).count()
    }

    /// Did a rule fail on some file (`D999`)? The run's results are then incomplete.
    pub fn has_internal_errors(&self) -> bool {
        self.diagnostics().any(|d| d.code == registry::INTERNAL_ERROR.code)
    }

    /// Keeps only the findings at `level` or above (`--errors-only`); files that could not be
    /// analysed (`D000`) and rule failures (`D999`) are errors, so they always stay.
    pub fn keep_at_least(&mut self, level: Severity) {
        for file in &mut self.files {
            file.diagnostics.retain(|d| d.severity >= level);
        }
    }

    /// Are there findings at `level` or above?
    pub fn fails_at(&self, level: Severity) -> bool {
        self.diagnostics().any(|d| d.severity >= level)
    }
}

/// Lints every Rust and Python file under `paths` (files given explicitly are linted whatever
/// their extension or ignore rules: as Python when they end in `.py`, as Rust otherwise).
pub fn lint_paths(paths: &[PathBuf], settings: &Settings) -> Result<LintRun, LintError> {
    let Walked { files, unwalkable, mut scripts } = collect_files(paths, settings)?;
    let pool =
        crate::pipeline::pool().map_err(|source| LintError::Io { path: PathBuf::from("."), source })?;
    // Python files are read and parsed once: for the repository index, whose pass keeps each
    // file's text and tree for its lint.
    let (mut project, mut prepared) = if settings.checks_language(Language::Python) {
        let linted: Vec<PathBuf> =
            files.iter().filter(|p| Language::of_named_file(p) == Language::Python).cloned().collect();
        let (others, more_scripts) = neighbours(paths, &linted, settings);
        scripts.extend(more_scripts);
        pool.install(|| index_project(&files, &others, &scripts, MAX_KEPT_BYTES))
    } else {
        (crate::python::Project::default(), Vec::new())
    };
    project.set_target(settings.target);
    prepared.resize_with(files.len(), || None);
    let mut reports: Vec<FileReport> = pool.install(|| {
        files
            .par_iter()
            .zip(prepared.into_par_iter())
            .map(|(p, prepared)| lint_prepared(p, prepared, settings, &project))
            .collect()
    });
    // Functions that another file calls at every step run at every step, and functions that other
    // files call only on branches the default options never take do not run in a default run:
    // their files are linted again knowing it, a few rounds for helpers that call helpers of a
    // third file.
    for _ in 0..3 {
        let calls: Vec<(String, Vec<crate::python::project::HotCall>)> = reports
            .iter()
            .filter(|r| !r.calls.hot.is_empty())
            .map(|r| (r.path.clone(), r.calls.hot.clone()))
            .collect();
        let mut changed = project.set_called_from(&calls);
        let elsewhere: Vec<&[crate::python::project::ProjectCall]> =
            reports.iter().map(|r| r.calls.elsewhere.as_slice()).filter(|c| !c.is_empty()).collect();
        let judged: rustc_hash::FxHashMap<&Path, &[String]> = reports
            .iter()
            .filter(|r| !r.calls.latent.is_empty())
            .map(|r| (r.disk_path.as_path(), r.calls.latent.as_slice()))
            .collect();
        changed.extend(project.set_opt_in_callers(&elsewhere, &judged));
        changed.sort();
        changed.dedup();
        if changed.is_empty() {
            break;
        }
        // Linted again from the text read the first time (not from the disk, which may have
        // changed since); a file that could not be read or parsed stays as it was.
        pool.install(|| {
            reports
                .par_iter_mut()
                .filter(|r| changed.binary_search(&r.disk_path).is_ok())
                .filter(|r| !r.diagnostics.iter().any(|d| d.code == crate::registry::PARSE_ERROR.code))
                .for_each(|r| {
                    let path = r.disk_path.clone();
                    let source = Source { text: r.text.clone(), notebook: r.source.clone() };
                    *r = lint_read(&path, source, None, settings, &project);
                })
        });
    }
    resolve(&mut reports);
    reports.extend(unwalkable);
    reports.sort_by(|a, b| a.disk_path.cmp(&b.disk_path));
    let roots = paths.iter().filter_map(|p| Root::new(p)).collect();
    Ok(LintRun { files: reports, roots, project: Arc::new(project) })
}

/// At most this many files outside the run are read for the repository index, none larger than
/// [`MAX_NEIGHBOUR_BYTES`], and no more than [`MAX_NEIGHBOURS_BYTES`] in all.
const MAX_NEIGHBOURS: usize = 20_000;
const MAX_NEIGHBOUR_BYTES: u64 = 1 << 20;
const MAX_NEIGHBOURS_BYTES: u64 = 64 << 20;

/// The Python files of the projects that the paths belong to (as pre-commit names the changed
/// files, or a run names a subfolder): the folder holding the nearest `pyproject.toml`,
/// `setup.py`, `setup.cfg` or `.git` at or above each, else the file's own folder, walked as a
/// directory is (ignore files respected), within [`MAX_NEIGHBOURS`]. They are indexed, not
/// linted, so a changed file knows the classes it imports from an unchanged one, and a folder
/// is read as part of its project whichever way it is named.
fn neighbours(paths: &[PathBuf], linted: &[PathBuf], settings: &Settings) -> (Vec<PathBuf>, Vec<PathBuf>) {
    // Many files of a run share a folder: each folder's project is looked for once.
    let mut project_of: std::collections::HashMap<PathBuf, Option<PathBuf>> =
        std::collections::HashMap::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in paths {
        let Ok(absolute) = std::path::absolute(p) else { continue };
        let folder = if absolute.is_dir() {
            absolute.clone()
        } else if Language::of_path(&absolute) == Some(Language::Python) {
            match absolute.parent() {
                Some(parent) => parent.to_path_buf(),
                None => continue,
            }
        } else {
            continue;
        };
        let dir = project_of.entry(folder.clone()).or_insert_with(|| project_dir(&folder)).clone();
        // A folder that is its project's root is walked already.
        if let Some(dir) = dir
            && !(absolute.is_dir() && dir == absolute)
        {
            dirs.push(dir);
        }
    }
    // A folder inside another is walked with it (sorted, a folder comes right after those
    // above it).
    dirs.sort();
    let mut walked: Vec<PathBuf> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        if !walked.last().is_some_and(|above| dir.starts_with(above)) {
            walked.push(dir);
        }
    }
    let dirs = walked;
    if dirs.is_empty() {
        return (Vec::new(), Vec::new());
    }
    // A linted file is indexed once, under the path it is linted by (compared as absolute paths:
    // no system call a file).
    let linted: std::collections::HashSet<PathBuf> =
        linted.iter().filter_map(|p| std::path::absolute(p).ok()).collect();
    let mut out = Vec::new();
    let mut scripts = Scripts::default();
    let (mut visited, mut bytes) = (0usize, 0u64);
    for dir in dirs {
        let walker = ignore::WalkBuilder::new(&dir).require_git(false).build();
        for entry in walker.flatten() {
            // A folder with no project above it may be a home directory: the walk stays short.
            visited += 1;
            if out.len() >= MAX_NEIGHBOURS || visited > 10 * MAX_NEIGHBOURS {
                return (out, scripts.paths);
            }
            let path = entry.path();
            scripts.note(&entry, settings);
            if entry.file_type().is_some_and(|t| t.is_file())
                && Language::of_path(path) == Some(Language::Python)
                && !settings.is_excluded(path)
                && !std::path::absolute(path).is_ok_and(|c| linted.contains(&c))
            {
                // Generated files (protobuf stubs, vendored data) are large and define nothing a
                // model imports: only files a person writes are read, within a budget for all.
                let Some(size) = entry.metadata().ok().map(|m| m.len()) else { continue };
                if size > MAX_NEIGHBOUR_BYTES {
                    continue;
                }
                bytes = bytes.saturating_add(size);
                if bytes > MAX_NEIGHBOURS_BYTES {
                    return (out, scripts.paths);
                }
                out.push(path.to_path_buf());
            }
        }
    }
    (out, scripts.paths)
}

/// The text files of the walked folders besides the code: run scripts (`scripts/train.sh`),
/// configuration files and documents, at most [`MAX_SCRIPTS`] of them, none larger than
/// [`MAX_SCRIPT_BYTES`]. Their names of functions and classes say what the project uses
/// ([`crate::python::project`]'s references); a run script's command lines also say which options
/// it runs with (its options; documents are not read for those: a README names alternatives,
/// `use --sample_type ddpm_noisy for more variance`, beside the runs it recommends).
#[derive(Default)]
struct Scripts {
    paths: Vec<PathBuf>,
}

/// Is the file a configuration file (YAML, TOML, INI), whose settings the project may merge into
/// its options?
fn is_configuration(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "toml" | "cfg" | "ini"))
}

/// Is the file a run script, whose command lines are runs of the project?
fn is_run_script(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "sh" | "bash" | "zsh"))
}

const MAX_SCRIPTS: usize = 4_000;
const MAX_SCRIPT_BYTES: u64 = 256 << 10;

impl Scripts {
    fn note(&mut self, entry: &ignore::DirEntry, settings: &Settings) {
        let path = entry.path();
        let text = is_run_script(path)
            || is_configuration(path)
            || path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "md" | "rst"));
        if text
            && self.paths.len() < MAX_SCRIPTS
            && entry.file_type().is_some_and(|t| t.is_file())
            && entry.metadata().is_ok_and(|m| m.len() <= MAX_SCRIPT_BYTES)
            && !settings.is_excluded(path)
        {
            self.paths.push(path.to_path_buf());
        }
    }
}

/// The nearest folder at or above `folder` that holds a project marker, else `folder`.
fn project_dir(folder: &Path) -> Option<PathBuf> {
    let own = std::path::absolute(folder).ok()?;
    const MARKERS: [&str; 4] = ["pyproject.toml", "setup.py", "setup.cfg", ".git"];
    let found = own.ancestors().find(|dir| MARKERS.iter().any(|m| dir.join(m).exists()));
    Some(found.map(Path::to_path_buf).unwrap_or(own))
}

/// At most this many bytes of source have their trees kept from the index pass for their lint
/// (a tree takes about twelve times its text): past it, a file is parsed again when it is linted.
const MAX_KEPT_BYTES: usize = 16 << 20;

/// A Python file of the run as the index pass leaves it for its lint: its text (or the `D000`
/// report of a file that could not be read), and what its parse found (its tree, while
/// [`MAX_KEPT_BYTES`] allows).
struct Prepared {
    source: Result<Source, Box<FileReport>>,
    tree: Option<crate::python::Tree>,
}

/// The repository index ([`crate::python::project`]) of the run's Python `files` and of
/// `others` (files of the same projects that are indexed, not linted), each read and parsed once,
/// in parallel; and for each of `files`, what its lint starts from (`None`: not a Python file),
/// with the trees of at most `max_kept_bytes` of source.
/// A file that cannot be read or parsed adds nothing to the index (it gets its `D000` when it is
/// linted).
fn index_project(
    files: &[PathBuf],
    others: &[PathBuf],
    scripts: &[PathBuf],
    max_kept_bytes: usize,
) -> (crate::python::Project, Vec<Option<Prepared>>) {
    let budget = std::sync::atomic::AtomicUsize::new(max_kept_bytes);
    let keep = |bytes: usize| {
        use std::sync::atomic::Ordering::Relaxed;
        budget.fetch_update(Relaxed, Relaxed, |left| left.checked_sub(bytes)).is_ok()
    };
    let (mut entries, prepared): (Vec<_>, Vec<_>) = files
        .par_iter()
        .map(|path| {
            if Language::of_named_file(path) != Language::Python {
                return (None, None);
            }
            let source = read_source(path);
            let (entry, tree) = match &source {
                Ok(source) => crate::python::index_entry(path, &source.text, &|| keep(source.text.len())),
                Err(_) => (None, None),
            };
            (entry, Some(Prepared { source, tree }))
        })
        .unzip();
    // The other files' texts are kept until the project's names are counted.
    let (more, other_texts): (Vec<_>, Vec<_>) = others
        .par_iter()
        .filter_map(|path| {
            let source = read_source(path).ok()?;
            Some((crate::python::index_entry(path, &source.text, &|| false).0, (path, source.text)))
        })
        .unzip();
    entries.extend(more);
    let mut project = crate::python::Project::new(entries.into_iter().flatten().collect());
    let scripts: Vec<(&PathBuf, String)> = scripts
        .par_iter()
        .filter_map(|path| Some((path, String::from_utf8_lossy(&std::fs::read(path).ok()?).into_owned())))
        .collect();
    // A library's packages offer what their `__init__.py` imports to its users: the packages
    // under a folder with a `setup.py`, `setup.cfg` or `pyproject.toml` (not those beside a
    // custom op's own `setup.py` in another folder).
    let named =
        |p: &Path, names: &[&str]| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| names.contains(&n));
    let libraries: FxHashSet<&Path> = files
        .iter()
        .chain(others)
        .chain(scripts.iter().map(|(p, _)| *p))
        .filter(|p| named(p, &["setup.py", "setup.cfg", "pyproject.toml"]))
        .filter_map(|p| p.parent())
        .collect();
    let offers =
        |p: &Path| named(p, &["__init__.py"]) && p.ancestors().skip(1).any(|a| libraries.contains(a));
    let code: Vec<crate::python::Code<'_>> = files
        .iter()
        .zip(&prepared)
        .filter_map(|(path, p)| Some((path, &*p.as_ref()?.source.as_ref().ok()?.text)))
        .chain(other_texts.iter().map(|(path, t)| (*path, &**t)))
        .map(|(path, text)| crate::python::Code { text, offers: offers(path) })
        .collect();
    project.unsettle_options(&code.iter().map(|c| c.text).collect::<Vec<_>>());
    // The files whose calls the lint will not see: indexed only, or naming no torch.
    let unseen: Vec<&str> = prepared
        .iter()
        .filter_map(|p| p.as_ref()?.source.as_ref().ok().map(|s| &*s.text))
        .filter(|t| !crate::python::may_import_torch(t))
        .chain(other_texts.iter().map(|(_, t)| &**t))
        .collect();
    project.set_unseen(&unseen);
    // Only a project that declares options asks what its run scripts pass.
    if project.has_options() {
        let mut passed = Vec::new();
        for (path, text) in &scripts {
            if is_run_script(path) {
                crate::python::options_passed(text, &mut passed);
            } else if is_configuration(path) {
                crate::python::options_configured(text, &mut passed);
            }
        }
        project.pass_options(passed.into_iter());
    }
    // A file that is not UTF-8 is not linted, but what it names is still named.
    let unreadable: Vec<String> = files
        .iter()
        .zip(&prepared)
        .filter(|(path, p)| {
            p.as_ref().is_some_and(|p| p.source.is_err())
                && std::fs::metadata(path).is_ok_and(|m| m.len() <= MAX_NEIGHBOUR_BYTES)
        })
        .filter_map(|(path, _)| Some(String::from_utf8_lossy(&std::fs::read(path).ok()?).into_owned()))
        .collect();
    let others: Vec<&str> =
        scripts.iter().map(|(_, t)| t.as_str()).chain(unreadable.iter().map(String::as_str)).collect();
    project.judge_unimported(&libraries);
    project.find_unreferenced(&code, &others);
    (project, prepared)
}

/// What the walk of a run's paths finds.
struct Walked {
    /// The files to lint.
    files: Vec<PathBuf>,
    /// A `D000` report for each path the walk could not enter or read.
    unwalkable: Vec<FileReport>,
    /// The run scripts of the walked folders ([`Scripts`]).
    scripts: Vec<PathBuf>,
}

fn collect_files(paths: &[PathBuf], settings: &Settings) -> Result<Walked, LintError> {
    let mut files = Vec::new();
    let mut unwalkable = Vec::new();
    let mut scripts = Scripts::default();
    for root in paths {
        let meta = std::fs::metadata(root).map_err(|e| missing_root(root, e))?;
        if meta.is_file() {
            files.push(root.clone());
            continue;
        }
        if !meta.is_dir() {
            let source = std::io::Error::other("it is neither a file nor a directory");
            return Err(LintError::Io { path: root.clone(), source });
        }
        let walker = ignore::WalkBuilder::new(root).require_git(false).follow_links(true).build();
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    unwalkable.extend(walk_error(root, &e, settings));
                    continue;
                }
            };
            let path = entry.path();
            scripts.note(&entry, settings);
            if entry.file_type().is_some_and(|t| t.is_file())
                && Language::of_path(path).is_some()
                && !settings.is_excluded(path)
            {
                files.push(path.to_path_buf());
            }
        }
    }
    files.sort();
    files.dedup();
    Ok(Walked { files: dedup_same_file(files), unwalkable, scripts: scripts.paths })
}

/// One path per file: a file reached both directly and through a symbolic link is linted (and
/// fixed) once, under the path the project's imports name — the folder whose name a Python file
/// of the run imports (`from xlm.trainer import ..` picks `xlm/trainer.py` over
/// `src/trainer.py` through `src -> xlm`; `from mypkg.meter import ..` picks the link `mypkg`
/// over its target `mypkg_v2`) — else the one with the fewest links, its own; the first in order
/// among equals.
fn dedup_same_file(files: Vec<PathBuf>) -> Vec<PathBuf> {
    let identities: Vec<_> = files.iter().map(|p| file_identity(p)).collect();
    // The paths of each file reached more than once, by index.
    let mut groups: std::collections::HashMap<_, Vec<usize>> = std::collections::HashMap::new();
    for (i, id) in identities.iter().enumerate() {
        if let Some(id) = id {
            groups.entry(id).or_default().push(i);
        }
    }
    groups.retain(|_, paths| paths.len() > 1);
    let mut keep = vec![true; files.len()];
    if !groups.is_empty() {
        // For each path of such a file, the name of its first folder that differs from the
        // others' (`xlm` beside `src`): what an import of it would start with.
        let names: Vec<(usize, String)> = groups
            .values()
            .flat_map(|paths| {
                paths.iter().filter_map(|&i| Some((i, differing_folder(&files[i], paths, &files)?)))
            })
            .collect();
        let imported = imported_names(&files, names.iter().map(|(_, n)| n.as_str()));
        let name_of: std::collections::HashMap<usize, &str> =
            names.iter().map(|(i, n)| (*i, n.as_str())).collect();
        for paths in groups.values() {
            let rank =
                |i: usize| (!name_of.get(&i).is_some_and(|n| imported.contains(*n)), links_in(&files[i]), i);
            let best = paths.iter().copied().min_by_key(|&i| rank(i));
            for &i in paths {
                keep[i] = Some(i) == best;
            }
        }
    }
    files.into_iter().zip(keep).filter_map(|(p, keep)| keep.then_some(p)).collect()
}

/// The name of the first folder of `files[i]` that differs from the other paths' of the same file
/// (`xlm` of `a/xlm/trainer.py` beside `a/src/trainer.py`).
fn differing_folder(path: &Path, paths: &[usize], files: &[PathBuf]) -> Option<String> {
    let mine: Vec<_> = path.components().collect();
    let other = paths.iter().map(|&j| &files[j]).find(|p| p.as_path() != path)?;
    let theirs: Vec<_> = other.components().collect();
    let at = mine.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
    // (Not the file's own name: a folder.)
    (at + 1 < mine.len()).then(|| mine[at].as_os_str().to_string_lossy().into_owned())
}

/// Which of `names` a Python file of the run imports (`import xlm`, `from xlm.utils import ..`).
/// Read only when a file is reached through a link: rare, and the texts are small beside a run.
fn imported_names<'n>(
    files: &[PathBuf],
    names: impl Iterator<Item = &'n str>,
) -> std::collections::HashSet<String> {
    let wanted: std::collections::HashSet<&str> = names.collect();
    let mut found = std::collections::HashSet::new();
    for file in files.iter().filter(|f| Language::of_path(f) == Some(Language::Python)) {
        // (Read as the lint reads: no further than its limit, nothing but a regular file.)
        let Ok(bytes) = devcheck_files::read_limited(file, super::MAX_FILE_BYTES as u64) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        for name in &wanted {
            if found.contains(*name) {
                continue;
            }
            let imports = [format!("from {name}."), format!("from {name} import"), format!("import {name}")];
            if imports.iter().any(|pattern| {
                memchr::memmem::find_iter(text.as_bytes(), pattern.as_bytes()).any(|at| {
                    // `import xlm` / `import xlm.model`, not `import xlmr`.
                    text.as_bytes()
                        .get(at + pattern.len())
                        .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                        || pattern.ends_with('.')
                })
            }) {
                found.insert((*name).to_string());
            }
        }
        if found.len() == wanted.len() {
            break;
        }
    }
    found
}

/// How many of a path's folders (and itself) are symbolic links.
fn links_in(path: &Path) -> usize {
    path.ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .filter(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
        .count()
}

#[cfg(unix)]
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_identity(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// Why a path given on the command line cannot be linted: missing, or a symbolic link that
/// points nowhere or back at itself.
fn missing_root(root: &Path, error: std::io::Error) -> LintError {
    match std::fs::symlink_metadata(root) {
        Ok(link) if link.file_type().is_symlink() => {
            let target = std::fs::read_link(root).unwrap_or_default();
            if error.kind() == std::io::ErrorKind::NotFound {
                LintError::DanglingLink { path: root.to_path_buf(), target }
            } else {
                LintError::UnfollowableLink { path: root.to_path_buf(), target, source: error }
            }
        }
        Ok(_) => LintError::Io { path: root.to_path_buf(), source: error },
        Err(_) if error.kind() == std::io::ErrorKind::NotFound => {
            LintError::NoSuchPath { path: root.to_path_buf() }
        }
        Err(_) => LintError::Io { path: root.to_path_buf(), source: error },
    }
}

/// A `D000` for a path the directory walk could not follow (a symbolic link loop, a directory
/// it may not read, a path too long for the system, a broken link named `*.rs` or `*.py`). A broken link
/// to something else would not have been linted anyway, and excluded paths are not reported.
fn walk_error(root: &Path, error: &ignore::Error, settings: &Settings) -> Option<FileReport> {
    let (path, message) = describe_walk_error(error);
    let path = path.unwrap_or_else(|| root.to_path_buf());
    let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
    let loops = is_loop(error);
    if settings.is_excluded(&path) || (is_link && !loops && Language::of_path(&path).is_none()) {
        return None;
    }
    let shown = crate::source::display_path(&path);
    let help =
        "fix or remove the path, or exclude it (`exclude` in devcheck.toml); the other files were linted";
    Some(unreadable(&path, &shown, FileKind::of_path(&path), message, help, 0..0, "".into()))
}

fn is_loop(error: &ignore::Error) -> bool {
    match error {
        ignore::Error::Loop { .. } => true,
        ignore::Error::WithPath { err, .. }
        | ignore::Error::WithDepth { err, .. }
        | ignore::Error::WithLineNumber { err, .. } => is_loop(err),
        _ => false,
    }
}

fn describe_walk_error(error: &ignore::Error) -> (Option<PathBuf>, String) {
    match error {
        ignore::Error::Loop { ancestor, child } => (
            Some(child.clone()),
            format!(
                "not linted: a symbolic link loop (`{}` leads back to `{}`)",
                crate::source::display_path(child),
                crate::source::display_path(ancestor)
            ),
        ),
        ignore::Error::WithPath { path, err } => {
            let (inner, message) = describe_walk_error(err);
            let path = inner.unwrap_or_else(|| path.clone());
            let message = broken_link(&path).unwrap_or(message);
            (Some(path), message)
        }
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            describe_walk_error(err)
        }
        // The path is the diagnostic's location; the system's reason alone says the rest.
        ignore::Error::Io(e) => match system_reason(e) {
            Some(reason) => (None, format!("could not be read: {reason}")),
            None => (None, format!("could not be read: {e}")),
        },
        other => (None, format!("could not be read while walking the directory: {other}")),
    }
}

/// What is wrong with `path` if it is a symbolic link that leads nowhere.
fn broken_link(path: &Path) -> Option<String> {
    let link = std::fs::symlink_metadata(path).ok()?;
    if !link.file_type().is_symlink() {
        return None;
    }
    let error = std::fs::metadata(path).err()?;
    let target = crate::source::display_path(&std::fs::read_link(path).unwrap_or_default());
    Some(if error.kind() == std::io::ErrorKind::NotFound {
        format!("not linted: a symbolic link to `{target}`, which does not exist")
    } else {
        format!("not linted: a symbolic link to `{target}` that cannot be followed ({error})")
    })
}

/// The system's own words for an I/O error ("File name too long (os error 36)"), found in its
/// chain of causes: the walker wraps them in messages that repeat the path.
fn system_reason(error: &std::io::Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(c) = cause {
        if let Some(code) = c.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) {
            return Some(std::io::Error::from_raw_os_error(code).to_string());
        }
        cause = match c.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner),
            None => c.source(),
        };
    }
    None
}

/// Reads and lints one file; a file that cannot be read, is too large or is not UTF-8 gets a
/// `D000`.
pub(crate) fn lint_file(path: &Path, settings: &Settings, project: &crate::python::Project) -> FileReport {
    match read_source(path) {
        Ok(source) => lint_read(path, source, None, settings, project),
        Err(report) => *report,
    }
}

/// A file's text as it is linted, and a notebook's JSON (whose code cells are `text`), kept to
/// write fixes back into.
struct Source {
    text: Arc<str>,
    notebook: Option<Arc<str>>,
}

/// Reads one file for its lint: `Err` is its `D000` report when it cannot be read, is too large,
/// is not UTF-8 or is a notebook that does not parse.
fn read_source(path: &Path) -> Result<Source, Box<FileReport>> {
    let shown = || crate::source::display_path(path);
    let kind = || FileKind::of_path(path);
    // Read no further than the limit, so a huge or endless file costs nothing.
    let bytes = match devcheck_files::read_limited(path, super::MAX_FILE_BYTES as u64) {
        Ok(b) => b,
        Err(devcheck_files::ReadError::TooLarge { .. }) => {
            let size = std::fs::metadata(path).ok().map(|m| m.len());
            let finding = crate::unlinted::too_large(size);
            return Err(Box::new(report_finding(path, &shown(), kind(), finding, "".into())));
        }
        Err(e) => {
            let message = format!("could not read the file: {e}");
            let help = "check the file's permissions";
            return Err(Box::new(unreadable(path, &shown(), kind(), message, help, 0..0, "".into())));
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let lossy: Arc<str> = Arc::from(String::from_utf8_lossy(e.as_bytes()).into_owned());
            // The lossy text keeps the valid prefix byte for byte, so `at` still points there.
            let message = format!("file is not valid UTF-8 (invalid byte at offset {at})");
            let help = "source files must be UTF-8; the file was skipped";
            return Err(Box::new(unreadable(path, &shown(), kind(), message, help, at..at, lossy)));
        }
    };
    // A notebook: its code cells are linted, and its JSON kept to write fixes back into.
    if crate::python::source_type(path) == ruff_python_ast::PySourceType::Ipynb {
        return match crate::python::notebook::Notebook::parse(&text) {
            Ok(notebook) => Ok(Source { text: Arc::from(notebook.text()), notebook: Some(Arc::from(text)) }),
            Err(why) => {
                let help =
                    "open and save it in Jupyter to repair it, or exclude it (`exclude` in devcheck.toml)";
                Err(Box::new(unreadable(path, &shown(), kind(), why, help, 0..0, Arc::from(text))))
            }
        };
    }
    Ok(Source { text: Arc::from(text), notebook: None })
}

/// Lints a file as the index pass left it (`None`: a file it did not read, such as a Rust one).
fn lint_prepared(
    path: &Path,
    prepared: Option<Prepared>,
    settings: &Settings,
    project: &crate::python::Project,
) -> FileReport {
    match prepared {
        Some(Prepared { source: Ok(source), tree }) => lint_read(path, source, tree, settings, project),
        Some(Prepared { source: Err(report), .. }) => *report,
        None => lint_file(path, settings, project),
    }
}

/// Lints a file read by [`read_source`] (`tree`: its tree, when the index pass kept it).
fn lint_read(
    path: &Path,
    source: Source,
    tree: Option<crate::python::Tree>,
    settings: &Settings,
    project: &crate::python::Project,
) -> FileReport {
    let shown = crate::source::display_path(path);
    let kind = FileKind::of_path(path);
    let mut report = super::pipeline::lint_text(path, &shown, kind, source.text, settings, project, tree);
    report.source = source.notebook;
    report
}

fn unreadable(
    disk_path: &Path,
    shown: &str,
    kind: FileKind,
    message: String,
    help: &str,
    range: std::ops::Range<usize>,
    text: Arc<str>,
) -> FileReport {
    let finding = Finding::new(&registry::PARSE_ERROR, range, message).help(help);
    report_finding(disk_path, shown, kind, finding, text)
}

/// A report of one finding that is not a rule's (the file was not analysed).
fn report_finding(
    disk_path: &Path,
    shown: &str,
    kind: FileKind,
    finding: Finding,
    text: Arc<str>,
) -> FileReport {
    let index = LineIndex::new(&text);
    let start = index.line_col(&text, finding.range.start);
    let diagnostic = Diagnostic {
        code: finding.rule.code,
        name: finding.rule.name,
        severity: finding.rule.default_severity(),
        message: finding.message,
        path: shown.to_string(),
        range: finding.range.clone(),
        start,
        end: start,
        label: None,
        help: finding.help,
        fix: None,
        related: Vec::new(),
        also: Vec::new(),
        scope: None,
        cell: None,
    };
    FileReport {
        path: shown.to_string(),
        disk_path: disk_path.to_path_buf(),
        kind,
        apis: ApiSet::EMPTY,
        text,
        diagnostics: vec![diagnostic],
        summary: None,
        source: None,
        calls: Default::default(),
        not_compiled: false,
        host_only: false,
    }
}

/// A path the run was given, as the file system resolves it.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    resolved: PathBuf,
    is_dir: bool,
}

impl Root {
    pub(crate) fn new(path: &Path) -> Option<Root> {
        let resolved = std::fs::canonicalize(path).ok()?;
        let is_dir = resolved.is_dir();
        Some(Root { resolved, is_dir })
    }

    /// Is the file at this resolved path the root, or inside it?
    pub(crate) fn holds(&self, resolved: &Path) -> bool {
        if self.is_dir { resolved.starts_with(&self.resolved) } else { resolved == self.resolved }
    }
}

/// The crate-wide pass over the reports of a run (see [`crate::rust::crates`]).
pub(crate) fn resolve(reports: &mut [FileReport]) {
    let mut passes: Vec<crate::rust::crates::Pass<'_>> = reports
        .iter_mut()
        .map(|r| crate::rust::crates::Pass {
            summary: r.summary.as_deref(),
            diagnostics: &mut r.diagnostics,
            not_compiled: &mut r.not_compiled,
            host_only: &mut r.host_only,
            unread: r.summary.is_none() && Language::of_path(&r.disk_path) == Some(Language::Rust),
        })
        .collect();
    crate::rust::crates::resolve(&mut passes);
    for report in reports {
        crate::diagnostic::group_repeats(&mut report.diagnostics);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a run reports, file by file: path, code, line and message.
    fn findings(reports: &[FileReport]) -> Vec<(String, &'static str, usize, String)> {
        reports
            .iter()
            .flat_map(|r| {
                r.diagnostics.iter().map(|d| (r.path.clone(), d.code, d.start.line, d.message.clone()))
            })
            .collect()
    }

    /// A file whose tree the index pass kept is linted as one parsed again: the same findings
    /// whether every tree, or none, fits the budget.
    #[test]
    fn kept_trees_and_trees_parsed_again_give_the_same_findings() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/project");
        let overrides = crate::Overrides { preview: true, ..crate::Overrides::default() };
        let Ok(settings) = Settings::from_table(crate::LintTable::default(), root.clone(), None, &overrides)
        else {
            panic!("settings")
        };
        let Ok(Walked { files, .. }) = collect_files(std::slice::from_ref(&root), &settings) else {
            panic!("walk")
        };
        let lint = |budget: usize| {
            let (project, prepared) = index_project(&files, &[], &[], budget);
            let kept = prepared
                .iter()
                .filter(|p| matches!(p, Some(Prepared { tree: Some(crate::python::Tree::Kept { .. }), .. })))
                .count();
            let reports: Vec<FileReport> = files
                .iter()
                .zip(prepared)
                .map(|(p, prepared)| lint_prepared(p, prepared, &settings, &project))
                .collect();
            (kept, findings(&reports))
        };
        let (all_kept, with_trees) = lint(usize::MAX);
        let (none_kept, parsed_again) = lint(0);
        assert!(all_kept > 0, "no tree was kept");
        assert_eq!(none_kept, 0);
        assert!(!with_trees.is_empty(), "the fixture project has findings");
        assert_eq!(with_trees, parsed_again);
    }
}
