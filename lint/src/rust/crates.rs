//! What a rule can only decide with the whole crate in view: which functions run once per layer
//! (called, directly or not, from a per-layer loop of another function), which run at every
//! training step (they take one, or a step calls them), which read device data back (so a call
//! to them waits for the device), which free functions are an application's entry points
//! (called from `main`), whether the crate deals with devices at all, which methods the crate
//! defines itself, and what its `Cargo.toml` says.
//!
//! Each file is parsed once. While the walker reads it, it records a [`FileSummary`]: the
//! functions it defines, the calls they make (with the loop and gate they sit in), its `use`
//! imports, a few crate-wide facts, and the findings whose fate depends on the crate
//! ([`Condition`]s). Once every file is read, [`resolve`] groups the files by package (the
//! nearest `Cargo.toml`), builds the call graph and keeps the pending findings whose conditions
//! hold. The graph is built from names, without types: a call is resolved only when its target
//! is clear (`self.m()`, `self.field.m()` through the field's declared type, `Type::f()` and
//! `Type::new(..).m()`, a free function of the crate, a method name the crate defines once; where
//! several modules define the name, the one the caller's file imports); an unclear call adds no
//! edge, so the graph may miss a path but never invents one.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use super::api::{Api, ApiSet};
use crate::diagnostic::Diagnostic;

pub(crate) use crate::diagnostic::{Condition, FnId};

/// A function defined in a file.
#[derive(Clone, Debug)]
pub(crate) struct FnInfo {
    /// Test code: never the target of a call from the crate's own code.
    pub test: bool,
    /// The type of the enclosing `impl` (or trait), if any.
    pub self_ty: Option<String>,
    pub name: String,
    /// Takes `self`.
    pub method: bool,
    /// Parameters other than `self`.
    pub arity: usize,
    /// A top-level `fn main`.
    pub main: bool,
    /// Parameters (by position, `self` not counted) whose tensor the function reads back to the
    /// host.
    pub reads_params: Vec<u32>,
    /// Takes a training step itself, outside its loops (not `main`).
    pub takes_step: bool,
    /// Reads device data back to the host somewhere in its body: a call to it waits for the
    /// device.
    pub reads_host: bool,
}

/// Where a call goes, as far as the syntax tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Callee {
    /// `self.m(..)`.
    SelfMethod(String),
    /// `self.field.m(..)`, or `x.m(..)` where `x` iterates `self.field`.
    FieldMethod { field: String, name: String },
    /// `Type::f(..)`, with `Self` already replaced by the impl's type.
    TypeFn { ty: String, name: String },
    /// `m.f(..)` where a `match` arm bound `m` to an enum variant's value (`Self::Conv(m)`).
    VariantMethod { ty: String, variant: String, name: String },
    /// `f(..)`, or `module::f(..)` (`qualified`: the module is named at the call).
    Free { name: String, qualified: bool },
    /// `x.m(..)` on a receiver of unknown type.
    Method(String),
}

/// A call made by a function of the file.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub caller: FnId,
    /// Where the call's name starts in the file.
    pub at: usize,
    pub callee: Callee,
    pub args: usize,
    /// Inside a per-layer loop of the caller.
    pub per_layer: bool,
    /// Made at every training step of the caller (in a loop that takes a step, or in a function
    /// that takes one), not in a gated branch.
    pub per_step: bool,
    /// In a branch taken every N steps, or when debugging (or after a guard that returns unless
    /// so): a function that runs at every step does not make this callee run at every step.
    pub gated: bool,
    /// Inside a loop of the caller.
    pub in_loop: bool,
    /// The loops around the call, outermost first, by their number in the file.
    pub loops: Vec<u32>,
}

/// A struct declared in the file, with the type names each field mentions (`Vec<Block>` →
/// `Vec`, `Block`), for calls through `self.field`; an enum, with those of each variant's value
/// as a field named for the variant, for calls through a `match` arm.
#[derive(Clone, Debug)]
pub(crate) struct StructInfo {
    pub name: String,
    pub fields: Vec<(String, Vec<String>)>,
}

/// What the crate-wide pass needs from one file.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileSummary {
    /// The file on disk, for finding its package; `None` for text linted on its own.
    pub disk_path: Option<PathBuf>,
    /// APIs named by the file itself.
    pub apis: ApiSet,
    pub fns: Vec<FnInfo>,
    pub calls: Vec<Call>,
    pub structs: Vec<StructInfo>,
    pub uses_devices: bool,
    /// Names an accelerator somewhere, also in a comment or a string: a CUDA, Metal or wgpu
    /// device, backend or feature ([`names_accelerator`]).
    pub names_accelerator: bool,
    /// The configuration declares where the code runs (`target`).
    pub target_declared: bool,
    /// Names of in-place methods the file defines (`fn to_device(&mut self, ..)` returning nothing).
    pub in_place: Vec<String>,
    /// Findings that wait for the crate, already placed in the file.
    pub pending: Vec<(Diagnostic, Vec<Condition>)>,
    /// The file's `use` imports: the name in scope (or `*` for a glob) and the path it names
    /// (`use crate::loss::ctc::CtcLoss as Ctc;` → `Ctc`, `[crate, loss, ctc, CtcLoss]`).
    pub uses: Vec<(String, Vec<String>)>,
    /// The `uses` that are `pub` (re-exports), by index.
    pub reexported: Vec<usize>,
    /// The file's `mod name;` declarations (not inline modules): what it compiles.
    pub mods: Vec<ModDecl>,
    /// It may declare modules the walk cannot see (inside an inline module, a macro, a
    /// `cfg_attr(.., path = ..)`): which files it compiles is not known.
    pub mods_unknown: bool,
}

/// `mod name;`, or `#[path = "p.rs"] mod name;`.
#[derive(Clone, Debug)]
pub(crate) struct ModDecl {
    pub name: String,
    pub path: Option<String>,
}

/// Method names that many libraries define: a call by one of these names on a receiver of
/// unknown type is not resolved to the crate's own method of that name.
const COMMON_METHODS: &[&str] = &[
    "forward",
    "forward_t",
    "new",
    "default",
    "from",
    "into",
    "clone",
    "step",
    "sample",
    "call",
    "run",
    "apply",
    "get",
    "set",
    "len",
    "is_empty",
    "iter",
    "next",
    "load",
    "save",
    "to_device",
    "to",
    "device",
    "dtype",
    "shape",
    "dims",
    "build",
    "init",
    "update",
    "reset",
    "train",
    "eval",
    "encode",
    "decode",
    "push",
    "insert",
    "remove",
    "contains",
    "as_ref",
    "as_mut",
    "fmt",
    "eq",
    "hash",
    "drop",
    "deref",
];

/// One file as the crate-wide pass sees it: what its analysis left for the pass, and its
/// diagnostics, which the pending findings that hold join.
pub(crate) struct Pass<'r> {
    pub summary: Option<&'r FileSummary>,
    pub diagnostics: &'r mut Vec<Diagnostic>,
    /// Set when no target of the file's package compiles it ([`super::targets`]): its findings
    /// are dropped.
    pub not_compiled: &'r mut bool,
    /// Set when the run's Rust code runs only on the CPU ([`runs_on_cpu_only`]): the findings of
    /// the rules whose hazard needs an accelerator are dropped.
    pub host_only: &'r mut bool,
    /// A Rust file that could not be read or parsed: what it names is not known.
    pub unread: bool,
}

/// Applies the crate-wide conditions: every pending finding whose conditions hold joins its
/// file's diagnostics. Files are grouped by package (the nearest `Cargo.toml`); files without one
/// form a single group. Running it again (after `--fix` re-lints some files) adds nothing twice.
pub(crate) fn resolve(reports: &mut [Pass<'_>]) {
    let mut packages = Packages::default();
    let mut groups: HashMap<Option<PathBuf>, Vec<usize>> = HashMap::new();
    for (i, report) in reports.iter().enumerate() {
        let Some(summary) = report.summary else { continue };
        let root = summary.disk_path.as_deref().and_then(|p| packages.root_of(p));
        groups.entry(root).or_default().push(i);
    }
    let mut groups: Vec<(Option<PathBuf>, Vec<usize>)> = groups.into_iter().collect();
    groups.sort();
    let dropped = not_compiled(reports, &groups);
    let host_only = runs_on_cpu_only(reports, &groups, &dropped);
    // In-place moves are looked up across the whole run: the type may come from another package
    // of the workspace (a tokenizer crate's `Encoding::to_device(&mut self, ..)`).
    let in_place: HashSet<String> = reports
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i))
        .filter_map(|(_, r)| r.summary)
        .flat_map(|s| s.in_place.iter().cloned())
        .collect();
    for (root, members) in groups {
        // Code nothing compiles takes no part: only the file's own errors (unreadable, a rule
        // failing) stay.
        let (gone, members): (Vec<usize>, Vec<usize>) =
            members.into_iter().partition(|i| dropped.contains(i));
        for i in gone {
            let report = &mut reports[i];
            report.diagnostics.retain(|d| {
                crate::registry::lookup(d.code).is_some_and(|r| r.group == crate::registry::Group::Meta)
            });
            *report.not_compiled = true;
        }
        let package = root.as_deref().and_then(|r| packages.info(r));
        let summaries: Vec<&FileSummary> = members.iter().filter_map(|&i| reports[i].summary).collect();
        let graph = Graph::build(&summaries, package.as_ref(), &in_place);
        let verdicts: Vec<Vec<Diagnostic>> = summaries
            .iter()
            .enumerate()
            .map(|(f, s)| {
                s.pending
                    .iter()
                    .filter(|(d, _)| !(host_only && needs_accelerator(d.code)))
                    .filter(|(_, conditions)| conditions.iter().all(|c| graph.holds(f, c)))
                    .map(|(d, _)| d.clone())
                    .collect()
            })
            .collect();
        for (&i, kept) in members.iter().zip(verdicts) {
            let report = &mut reports[i];
            if host_only {
                report.diagnostics.retain(|d| !needs_accelerator(d.code));
                *report.host_only = true;
            }
            if !kept.is_empty() {
                report.diagnostics.extend(kept);
                report.diagnostics.sort_by(|a, b| {
                    (a.range.start, a.code, a.range.end).cmp(&(b.range.start, b.code, b.range.end))
                });
                report.diagnostics.dedup_by(|a, b| a.code == b.code && a.range == b.range);
            }
        }
    }
}

/// The rules whose hazard needs an accelerator: a tensor on the wrong device (D001, D004), a
/// wait for the device (D005), timing that misses queued work (D007). On the CPU they cannot
/// bite.
fn needs_accelerator(code: &str) -> bool {
    matches!(code, "D001" | "D004" | "D005" | "D007")
}

/// Does the run's Rust code run only on the CPU? Yes when it holds an entry point (a `main`
/// that picks the device or backend) and no file or manifest of it names an accelerator, and no
/// configuration says where it runs: undeclared, code is taken to run on the machines it names.
/// A run of model files alone (no `main`) does not tell, so it is linted as code for a GPU.
fn runs_on_cpu_only(
    reports: &[Pass<'_>],
    groups: &[(Option<PathBuf>, Vec<usize>)],
    dropped: &HashSet<usize>,
) -> bool {
    let summaries: Vec<&FileSummary> = reports
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i))
        .filter_map(|(_, r)| r.summary)
        .collect();
    // A build script's `main` runs at build time: it picks no device.
    let is_build_script =
        |s: &FileSummary| s.disk_path.as_deref().and_then(Path::file_name).is_some_and(|n| n == "build.rs");
    let has_main = summaries.iter().any(|s| !is_build_script(s) && s.fns.iter().any(|f| f.main && !f.test));
    let roots: Vec<&Path> = groups.iter().filter_map(|(root, _)| root.as_deref()).collect();
    has_main
        && !reports.iter().any(|r| r.unread)
        && summaries.iter().all(|s| !s.names_accelerator && !s.target_declared)
        // The run may hold only some files of its packages (a hook given the changed files): the
        // one that picks the device may be elsewhere in the package, or in the workspace's manifest.
        && roots.iter().all(|root| !on_disk_names_accelerator(root) && !workspace_names_accelerator(root))
}

/// Does any Rust file or manifest under the package's folder name an accelerator? One that
/// cannot be read, or a folder too large to look through, may: then it is taken to.
fn on_disk_names_accelerator(root: &Path) -> bool {
    const MAX_ENTRIES: usize = 20_000;
    let limit = crate::unlinted::MAX_FILE_BYTES as u64;
    for (n, entry) in ignore::WalkBuilder::new(root).build().enumerate() {
        if n > MAX_ENTRIES {
            return true;
        }
        let Ok(entry) = entry else { return true };
        let path = entry.path();
        let wanted = path.extension().is_some_and(|e| e == "rs")
            || path.file_name().is_some_and(|f| f == "Cargo.toml");
        if !wanted || !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        match devcheck_files::read_limited(path, limit) {
            Ok(bytes) if !names_accelerator(&String::from_utf8_lossy(&bytes)) => {}
            _ => return true,
        }
    }
    false
}

/// Does the manifest of the workspace above the package (the nearest one up that declares
/// `[workspace]`) name an accelerator (`[workspace.dependencies] candle-core = { features =
/// ["cuda"] }`)? The package's own manifest is among the files [`on_disk_names_accelerator`] reads.
fn workspace_names_accelerator(root: &Path) -> bool {
    root.ancestors()
        .skip(1)
        .take(16)
        .find_map(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml")).ok().filter(|text| text.contains("[workspace"))
        })
        .is_some_and(|text| names_accelerator(&text))
}

/// Does the text name an accelerator: `cuda`, `gpu`, `wgpu`, `vulkan` or `rocm` anywhere (any
/// case: `CudaDevice`, `new_cuda`, `CUDAGraph`), or a word (of an identifier split at `_` and
/// at case changes, or of a comment or string) such as `Metal`, `Mps`, `hip` or `xla`?
pub(crate) fn names_accelerator(text: &str) -> bool {
    const ANYWHERE: &[&str] = &["cuda", "gpu", "nccl", "vulkan", "rocm"];
    const WORDS: &[&str] = &["metal", "mps", "hip", "xla", "tpu", "npu", "xpu", "opencl", "accelerator"];
    let lower = text.to_ascii_lowercase();
    if ANYWHERE.iter().any(|w| lower.contains(w)) {
        return true;
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_alphabetic() {
            i += 1;
            continue;
        }
        // One word: letters up to the next non-letter or a lower-to-upper case change.
        let start = i;
        i += 1;
        while i < bytes.len()
            && bytes[i].is_ascii_alphabetic()
            && !(bytes[i - 1].is_ascii_lowercase() && bytes[i].is_ascii_uppercase())
        {
            i += 1;
        }
        let word = &bytes[start..i];
        let singular = word.strip_suffix(b"s").unwrap_or(word);
        if WORDS
            .iter()
            .any(|w| word.eq_ignore_ascii_case(w.as_bytes()) || singular.eq_ignore_ascii_case(w.as_bytes()))
        {
            return true;
        }
    }
    false
}

/// The reports of files no target compiles ([`super::targets`]): in a package whose walk from
/// its crate roots decided, reached from no package of the run (a `#[path]` may reach into
/// another package's folder).
fn not_compiled(reports: &[Pass<'_>], groups: &[(Option<PathBuf>, Vec<usize>)]) -> HashSet<usize> {
    let mut files: HashMap<PathBuf, Option<&[ModDecl]>> = HashMap::new();
    let mut path_of: HashMap<usize, PathBuf> = HashMap::new();
    for (i, report) in reports.iter().enumerate() {
        let Some(summary) = report.summary else { continue };
        let Some(path) = summary.disk_path.as_deref().and_then(normalized) else { continue };
        files.insert(path.clone(), (!summary.mods_unknown).then_some(summary.mods.as_slice()));
        path_of.insert(i, path);
    }
    let walks: Vec<Option<HashSet<PathBuf>>> = groups
        .iter()
        .map(|(root, _)| root.as_deref().and_then(|r| super::targets::compiled(r, &files)))
        .collect();
    let reached: HashSet<&PathBuf> = walks.iter().flatten().flatten().collect();
    groups
        .iter()
        .zip(&walks)
        .filter(|(_, walk)| walk.is_some())
        .flat_map(|((_, members), _)| members.iter().copied())
        .filter(|i| path_of.get(i).is_some_and(|p| !reached.contains(p)))
        .collect()
}

/// What a package's `Cargo.toml` and layout say.
#[derive(Clone, Debug, Default)]
struct PackageInfo {
    root: PathBuf,
    /// Tensor libraries among its dependencies.
    apis: ApiSet,
    /// Only binaries: a `src/main.rs` or `src/bin/`, no library target.
    binary_only: bool,
    /// The library's name as code outside `src/` imports it (`my-crate` → `my_crate`).
    crate_name: Option<String>,
}

/// Package roots by directory, looked up once per directory.
#[derive(Default)]
struct Packages {
    roots: HashMap<PathBuf, Option<PathBuf>>,
}

impl Packages {
    /// The nearest directory above `file` with a `Cargo.toml`.
    fn root_of(&mut self, file: &Path) -> Option<PathBuf> {
        // `src/lib.rs` named from the package's own directory has a parent chain that ends
        // before it: walk from the absolute path.
        let file = normalized(file)?;
        let dir = file.parent()?.to_path_buf();
        let mut walked = Vec::new();
        let mut at = Some(dir.as_path());
        let mut found = None;
        while let Some(d) = at {
            if let Some(known) = self.roots.get(d) {
                found = known.clone();
                break;
            }
            walked.push(d.to_path_buf());
            if d.join("Cargo.toml").is_file() {
                found = Some(d.to_path_buf());
                break;
            }
            at = d.parent().filter(|p| !p.as_os_str().is_empty());
        }
        for d in walked {
            self.roots.insert(d, found.clone());
        }
        found
    }

    fn info(&self, root: &Path) -> Option<PackageInfo> {
        let text = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
        let manifest: toml::Table = text.parse().ok()?;
        let mut apis = ApiSet::EMPTY;
        let mut note = |table: Option<&toml::Value>| {
            for name in table.and_then(toml::Value::as_table).into_iter().flat_map(|t| t.keys()) {
                if let Some(api) = Api::of_crate(&name.replace('-', "_")) {
                    apis.insert(api);
                }
            }
        };
        for key in ["dependencies", "dev-dependencies"] {
            note(manifest.get(key));
        }
        if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
            for target in targets.values() {
                note(target.get("dependencies"));
            }
        }
        let has_lib = manifest.contains_key("lib") || root.join("src/lib.rs").is_file();
        let has_bin = manifest.contains_key("bin")
            || root.join("src/main.rs").is_file()
            || root.join("src/bin").is_dir();
        let crate_name = manifest
            .get("lib")
            .and_then(|l| l.get("name"))
            .or_else(|| manifest.get("package").and_then(|p| p.get("name")))
            .and_then(toml::Value::as_str)
            .map(|n| n.replace('-', "_"));
        Some(PackageInfo { root: root.to_path_buf(), apis, binary_only: has_bin && !has_lib, crate_name })
    }
}

/// A function of the group: (file, function).
type Node = (usize, FnId);

/// The call graph of one group of files and what follows from it.
struct Graph<'a> {
    files: &'a [&'a FileSummary],
    package: Option<&'a PackageInfo>,
    /// The callee of each call, by (file, call index); empty when not resolved.
    targets: Vec<Vec<Vec<Node>>>,
    /// Per file: the call whose name starts at a byte, by that byte.
    call_at: Vec<HashMap<usize, usize>>,
    per_layer: HashSet<Node>,
    per_step: HashSet<Node>,
    /// Functions that take a training step: themselves, or through a call outside their loops.
    step_fns: HashSet<Node>,
    /// Functions that read device data back to the host, themselves or through a call.
    readers: HashSet<Node>,
    /// Loops that take a training step through a call (`for batch in data { self.train_step(batch) }`),
    /// by (file, loop number).
    step_loops: HashSet<(usize, u32)>,
    entries: HashSet<Node>,
    uses_devices: bool,
    in_place: &'a HashSet<String>,
}

impl<'a> Graph<'a> {
    fn build(
        files: &'a [&'a FileSummary],
        package: Option<&'a PackageInfo>,
        in_place: &'a HashSet<String>,
    ) -> Graph<'a> {
        let index = Index::new(files, package);
        let targets: Vec<Vec<Vec<Node>>> = files
            .iter()
            .enumerate()
            .map(|(f, s)| s.calls.iter().map(|c| index.resolve(f, c)).collect())
            .collect();
        let mut per_layer = HashSet::new();
        let mut entries = HashSet::new();
        let mut queue = VecDeque::new();
        for (f, s) in files.iter().enumerate() {
            for (c, call) in s.calls.iter().enumerate() {
                let caller_main = s.fns.get(call.caller as usize).is_some_and(|i| i.main);
                for &t in &targets[f][c] {
                    if call.per_layer && per_layer.insert(t) {
                        queue.push_back(t);
                    }
                    if caller_main && files[t.0].fns.get(t.1 as usize).is_some_and(|i| !i.method) {
                        entries.insert(t);
                    }
                }
            }
        }
        // Everything a per-layer function calls runs per layer too, and everything a function
        // run at every training step calls runs at every step.
        let mut calls_of: HashMap<Node, Vec<usize>> = HashMap::new();
        for (f, s) in files.iter().enumerate() {
            for (c, call) in s.calls.iter().enumerate() {
                calls_of.entry((f, call.caller)).or_default().push(c);
            }
        }
        let spread = |seeds: &mut HashSet<Node>, mut queue: VecDeque<Node>, skip_gated: bool| {
            while let Some(node) = queue.pop_front() {
                for &c in calls_of.get(&node).map(Vec::as_slice).unwrap_or(&[]) {
                    if skip_gated && files[node.0].calls[c].gated {
                        continue;
                    }
                    for &t in &targets[node.0][c] {
                        if seeds.insert(t) {
                            queue.push_back(t);
                        }
                    }
                }
            }
        };
        spread(&mut per_layer, queue, false);
        // Who calls each function, by (file, call): the passes below walk calls backwards.
        let mut callers_of: HashMap<Node, Vec<(usize, usize)>> = HashMap::new();
        for (f, s) in files.iter().enumerate() {
            for (c, _) in s.calls.iter().enumerate() {
                for &t in &targets[f][c] {
                    callers_of.entry(t).or_default().push((f, c));
                }
            }
        }
        // A function that calls one that takes a step, once per call (outside its loops and
        // gates), takes a step too (an agent's `train_step` that calls `train_critic`).
        let (mut step_fns, mut step_queue) = functions_where(files, |info| info.takes_step);
        while let Some(node) = step_queue.pop_front() {
            for &(f, c) in callers_of.get(&node).map(Vec::as_slice).unwrap_or(&[]) {
                let call = &files[f].calls[c];
                let caller = (f, call.caller);
                let once = !call.in_loop && !call.gated;
                let app = files[f].fns.get(call.caller as usize).is_some_and(|i| i.main || i.test);
                // A `fit` that warms up with one step and then loops over steps drives training.
                let drives = || {
                    calls_of.get(&caller).is_some_and(|cs| {
                        cs.iter().any(|&k| {
                            files[f].calls[k].in_loop && targets[f][k].iter().any(|t| step_fns.contains(t))
                        })
                    })
                };
                if once && !app && !step_fns.contains(&caller) && !drives() {
                    step_fns.insert(caller);
                    step_queue.push_back(caller);
                }
            }
        }
        // A caller of a function that reads device data back waits for the device too.
        let (mut readers, mut reader_queue) = functions_where(files, |info| info.reads_host);
        while let Some(node) = reader_queue.pop_front() {
            for &(f, c) in callers_of.get(&node).map(Vec::as_slice).unwrap_or(&[]) {
                let caller = (f, files[f].calls[c].caller);
                if readers.insert(caller) {
                    reader_queue.push_back(caller);
                }
            }
        }
        // A function runs repeatedly when a loop calls it, directly or through other calls; a
        // method nothing in the crate calls is its users' to call (an optimizer's
        // `backward_step`, a framework's `TrainStep::step`). Only such step functions run at
        // every step: one called once (a sampler's set-up that takes a gradient) does not.
        let mut looped = HashSet::new();
        let mut loop_queue = VecDeque::new();
        let mut called = HashSet::new();
        // A call to `run` or `step` on a value of unknown type resolves to nothing, but it may well
        // be a call of the crate's method of that name: such a method is not uncalled.
        // One in a loop (`for step in 0..n { agent.act_and_train(..) }` through a trait object)
        // runs again and again.
        let mut names_called: HashSet<&str> = HashSet::new();
        let mut names_looped: HashSet<&str> = HashSet::new();
        for (f, s) in files.iter().enumerate() {
            for (c, call) in s.calls.iter().enumerate() {
                if let Callee::Method(name) = &call.callee {
                    names_called.insert(name.as_str());
                    if call.in_loop {
                        names_looped.insert(name.as_str());
                    }
                }
                for &t in &targets[f][c] {
                    called.insert(t);
                    if call.in_loop && looped.insert(t) {
                        loop_queue.push_back(t);
                    }
                }
            }
        }
        // What a method nothing in the crate calls does is its users' to call again and again
        // (an agent's `act_and_train`), and so is what it calls, every N calls or not.
        for (f, s) in files.iter().enumerate() {
            for (i, info) in s.fns.iter().enumerate() {
                let node = (f, i as FnId);
                let uncalled = !called.contains(&node) && !names_called.contains(info.name.as_str());
                let looped_by_name = names_looped.contains(info.name.as_str());
                if info.method && !info.test && (uncalled || looped_by_name) && looped.insert(node) {
                    loop_queue.push_back(node);
                }
            }
        }
        spread(&mut looped, loop_queue, false);
        step_fns.retain(|node| looped.contains(node));
        // A loop that calls a step function outside a gate takes a step at every iteration.
        let mut step_loops = HashSet::new();
        for (f, s) in files.iter().enumerate() {
            for (c, call) in s.calls.iter().enumerate() {
                if let Some(&inner) = call.loops.last()
                    && !call.gated
                    && targets[f][c].iter().any(|t| step_fns.contains(t))
                {
                    step_loops.insert((f, inner));
                }
            }
        }
        let mut per_step = HashSet::new();
        let mut step_queue = VecDeque::new();
        for (f, s) in files.iter().enumerate() {
            for (c, call) in s.calls.iter().enumerate() {
                let in_step_loop = call.loops.iter().any(|l| step_loops.contains(&(f, *l)));
                let from_step_fn = (step_fns.contains(&(f, call.caller)) || in_step_loop) && !call.gated;
                for &t in &targets[f][c] {
                    if (call.per_step || from_step_fn) && per_step.insert(t) {
                        step_queue.push_back(t);
                    }
                }
            }
        }
        spread(&mut per_step, step_queue, true);
        let call_at =
            files.iter().map(|s| s.calls.iter().enumerate().map(|(i, c)| (c.at, i)).collect()).collect();
        Graph {
            files,
            package,
            targets,
            call_at,
            per_layer,
            per_step,
            step_fns,
            readers,
            step_loops,
            entries,
            uses_devices: files.iter().any(|s| s.uses_devices),
            in_place,
        }
    }

    fn holds(&self, file: usize, condition: &Condition) -> bool {
        match condition {
            Condition::PerLayer(f) => self.per_layer.contains(&(file, *f)),
            Condition::PerStep(f) => self.per_step.contains(&(file, *f)),
            Condition::TakesStep(f) => self.step_fns.contains(&(file, *f)),
            Condition::InStepLoop(loops) => loops.iter().any(|l| self.step_loops.contains(&(file, *l))),
            Condition::NoCallWaits(calls) => calls.iter().all(|at| {
                let call = self.call_at.get(file).and_then(|m| m.get(at));
                call.and_then(|&c| self.targets[file].get(c))
                    .is_none_or(|targets| targets.iter().all(|t| !self.readers.contains(t)))
            }),
            Condition::NotEntry(f) => !self.entries.contains(&(file, *f)),
            Condition::UsesDevices => self.uses_devices,
            Condition::NoInPlaceMethod(name) => !self.in_place.contains(name),
            Condition::NotBinaryOnly => !self.package.is_some_and(|p| p.binary_only && self.in_src(file)),
            Condition::FrameworkKnown => {
                !self.files[file].apis.is_empty() || self.package.is_some_and(|p| !p.apis.is_empty())
            }
            Condition::CalleeReadsArg { at, arg } => {
                let call = self.call_at.get(file).and_then(|m| m.get(at));
                call.and_then(|&c| self.targets[file].get(c)).is_some_and(|targets| {
                    targets.iter().any(|&(f, id)| {
                        self.files[f].fns.get(id as usize).is_some_and(|i| i.reads_params.contains(arg))
                    })
                })
            }
        }
    }

    /// Is the file under the package's `src/` (its targets, not its examples, tests or benches)?
    fn in_src(&self, file: usize) -> bool {
        match (self.package, &self.files[file].disk_path) {
            (Some(p), Some(path)) => {
                normalized(path).is_some_and(|path| path.starts_with(p.root.join("src")))
            }
            _ => false,
        }
    }
}

/// Functions of a group by the names calls use.
struct Index<'a> {
    files: &'a [&'a FileSummary],
    /// Each file's module path in its crate (`src/loss/ctc.rs` → `[loss, ctc]`), when it is
    /// under the package's `src/` (not a binary of `src/bin/`).
    modules: Vec<Option<Vec<String>>>,
    /// Per file: the modules each imported name (or `*`, for globs) comes from, from the crate's
    /// root, worked out once.
    imports: Vec<HashMap<String, Vec<Vec<String>>>>,
    /// Per file: names imported under another (`use crate::nets::Net as Model;`: `Model` → `Net`).
    renamed: Vec<HashMap<String, String>>,
    /// What a module re-exports from another, by (module, name or `*`), as others may import it
    /// from there (`pub use blocks::Block;` in `lib.rs` lets `use crate::Block;` name it).
    reexports: HashMap<(Vec<String>, String), Vec<Vec<String>>>,
    /// (module, name) for each type and free function a module defines itself.
    defines: HashSet<(Vec<String>, String)>,
    /// (impl type, name) → functions.
    methods: HashMap<(&'a str, &'a str), Vec<Node>>,
    /// name → free functions.
    free: HashMap<&'a str, Vec<Node>>,
    /// name → every function with a body and `self` of that name.
    by_name: HashMap<&'a str, Vec<Node>>,
    /// struct name → (file, field → type names).
    structs: HashMap<&'a str, Vec<(usize, &'a StructInfo)>>,
}

impl<'a> Index<'a> {
    fn new(files: &'a [&'a FileSummary], package: Option<&'a PackageInfo>) -> Index<'a> {
        let modules: Vec<Option<Vec<String>>> = files
            .iter()
            .map(|s| package.zip(s.disk_path.as_deref()).and_then(|(p, path)| module_path(&p.root, path)))
            .collect();
        let crate_name = package.and_then(|p| p.crate_name.as_deref());
        let imports: Vec<HashMap<String, Vec<Vec<String>>>> = files
            .iter()
            .zip(&modules)
            .map(|(s, here)| {
                let mut by_name: HashMap<String, Vec<Vec<String>>> = HashMap::new();
                for (alias, path) in &s.uses {
                    let module = if alias == "*" { &path[..] } else { &path[..path.len().saturating_sub(1)] };
                    if let Some(m) = absolute_module(module, here.as_deref(), crate_name) {
                        by_name.entry(alias.clone()).or_default().push(m);
                    }
                }
                by_name
            })
            .collect();
        // Only the crate's own paths: `use candle_nn::loss::cross_entropy as ce;` names another
        // crate's function, not the crate's one of the same name.
        let own = |path: &[String]| {
            path.first().is_some_and(|f| {
                matches!(f.as_str(), "crate" | "self" | "super") || Some(f.as_str()) == crate_name
            })
        };
        let renamed = files
            .iter()
            .map(|s| {
                s.uses
                    .iter()
                    .filter(|(_, path)| own(path))
                    .filter_map(|(alias, path)| {
                        let last = path.last()?;
                        (alias != "*" && alias != last).then(|| (alias.clone(), last.clone()))
                    })
                    .collect()
            })
            .collect();
        let mut reexports: HashMap<(Vec<String>, String), Vec<Vec<String>>> = HashMap::new();
        for (s, here) in files.iter().zip(&modules) {
            let Some(here) = here else { continue };
            for &i in &s.reexported {
                let Some((alias, path)) = s.uses.get(i) else { continue };
                let module = if alias == "*" { &path[..] } else { &path[..path.len().saturating_sub(1)] };
                if let Some(m) = absolute_module(module, Some(here), crate_name) {
                    reexports.entry((here.clone(), alias.clone())).or_default().push(m);
                }
            }
        }
        // What each module defines itself: a name it defines is not looked for further.
        let mut defines: HashSet<(Vec<String>, String)> = HashSet::new();
        for (s, here) in files.iter().zip(&modules) {
            let Some(here) = here else { continue };
            let names = s
                .structs
                .iter()
                .map(|st| &st.name)
                .chain(s.fns.iter().filter(|f| !f.test).map(|f| f.self_ty.as_ref().unwrap_or(&f.name)));
            for name in names {
                defines.insert((here.clone(), name.clone()));
            }
        }
        let mut index = Index {
            files,
            modules,
            imports,
            renamed,
            reexports,
            defines,
            methods: HashMap::new(),
            free: HashMap::new(),
            by_name: HashMap::new(),
            structs: HashMap::new(),
        };
        for (f, s) in files.iter().enumerate() {
            for (i, info) in s.fns.iter().enumerate() {
                if info.test {
                    continue;
                }
                let node = (f, i as FnId);
                match &info.self_ty {
                    Some(ty) => index.methods.entry((ty, &info.name)).or_default().push(node),
                    None => index.free.entry(&info.name).or_default().push(node),
                }
                if info.method {
                    index.by_name.entry(&info.name).or_default().push(node);
                }
            }
            for st in &s.structs {
                index.structs.entry(&st.name).or_default().push((f, st));
            }
        }
        index
    }

    /// The functions a call may reach; empty when that is not clear.
    fn resolve(&self, file: usize, call: &Call) -> Vec<Node> {
        let caller = self.files[file].fns.get(call.caller as usize);
        let self_ty = caller.and_then(|c| c.self_ty.as_deref());
        match &call.callee {
            Callee::SelfMethod(name) => self_ty.map(|ty| self.method(file, ty, name)).unwrap_or_default(),
            Callee::FieldMethod { field, name } => {
                let Some(ty) = self_ty else { return Vec::new() };
                let Some((sf, st)) = prefer(file, self.structs.get(ty).map(Vec::as_slice).unwrap_or(&[]))
                else {
                    return Vec::new();
                };
                let Some((_, types)) = st.fields.iter().find(|(n, _)| n == field) else { return Vec::new() };
                types.iter().flat_map(|t| self.method(sf, t, name)).collect()
            }
            Callee::TypeFn { ty, name } => self.method(file, ty, name),
            Callee::VariantMethod { ty, variant, name } => {
                let real = self.original(file, ty);
                let Some((sf, en)) = prefer(file, self.structs.get(real).map(Vec::as_slice).unwrap_or(&[]))
                else {
                    return Vec::new();
                };
                let Some((_, types)) = en.fields.iter().find(|(n, _)| n == variant) else {
                    return Vec::new();
                };
                types.iter().flat_map(|t| self.method(sf, t, name)).collect()
            }
            Callee::Free { name, qualified } => {
                // A qualified call (`metrics::accuracy(..)`) names its module, not the name the
                // file imports: the imports do not decide between several.
                if *qualified {
                    return pick(file, self.free.get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]));
                }
                let real = self.original(file, name);
                let nodes = self.free.get(real).map(Vec::as_slice).unwrap_or(&[]);
                self.pick(file, name, nodes)
            }
            Callee::Method(name) => {
                if COMMON_METHODS.contains(&name.as_str()) {
                    return Vec::new();
                }
                match self.by_name.get(name.as_str()).map(Vec::as_slice) {
                    Some([only]) if self.files[only.0].fns[only.1 as usize].arity == call.args => vec![*only],
                    _ => Vec::new(),
                }
            }
        }
    }

    /// `ty::name` (or `ty`'s method `name`), preferring the caller's file; `ty` as the file
    /// names it (an import may have renamed it).
    fn method(&self, file: usize, ty: &str, name: &str) -> Vec<Node> {
        // An `impl` may be written under the imported name too (`impl Model { .. }`).
        let real = self.original(file, ty);
        [real, ty]
            .into_iter()
            .filter_map(|t| self.methods.get(&(t, name)))
            .map(|v| self.pick(file, ty, v))
            .find(|found| !found.is_empty())
            .unwrap_or_default()
    }

    /// The name an import of the file renamed (`Model` for `use crate::nets::Net as Model;`
    /// is `Net`), or the name itself.
    fn original<'n>(&'n self, file: usize, name: &'n str) -> &'n str {
        self.renamed.get(file).and_then(|r| r.get(name)).map_or(name, String::as_str)
    }

    /// The modules `name` may come from when imported from `modules`: those, and what they
    /// bring in themselves (`pub use`), a few levels deep.
    fn through_reexports<'m>(&'m self, name: &str, modules: &[&'m [String]]) -> HashSet<&'m [String]> {
        let mut seen: HashSet<&[String]> = modules.iter().copied().collect();
        let mut frontier: Vec<&[String]> = modules.to_vec();
        for _ in 0..4 {
            let mut next = Vec::new();
            for m in frontier {
                // An item shadows a glob: a module that defines the name is where it comes from.
                if self.defines.contains(&(m.to_vec(), name.to_string())) {
                    continue;
                }
                for key in [name, "*"] {
                    let from = self.reexports.get(&(m.to_vec(), key.to_string()));
                    for source in from.into_iter().flatten() {
                        if seen.insert(source.as_slice()) {
                            next.push(source.as_slice());
                        }
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        seen
    }

    /// The candidates in `file` if there are any, else the only one elsewhere; several elsewhere
    /// (two modules with a `Block` each) resolve through the file's imports of `name`
    /// (`use crate::blocks::Block;`), and to none when the imports do not tell.
    fn pick(&self, file: usize, name: &str, nodes: &[Node]) -> Vec<Node> {
        let picked = pick(file, nodes);
        if !picked.is_empty() || nodes.len() < 2 {
            return picked;
        }
        let Some(imports) = self.imports.get(file) else { return picked };
        let named = imports.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let globs = imports.get("*").map(Vec::as_slice).unwrap_or(&[]);
        if named.is_empty() && globs.is_empty() {
            return picked;
        }
        // Several globs can bring the name; only the imports of this very name or the globs count.
        let direct: Vec<&[String]> = named.iter().chain(globs).map(Vec::as_slice).collect();
        let from = self.through_reexports(self.original(file, name), &direct);
        let chosen: Vec<Node> = nodes
            .iter()
            .copied()
            .filter(|n| self.modules.get(n.0).and_then(Option::as_deref).is_some_and(|m| from.contains(m)))
            .collect();
        if chosen.len() == 1 { chosen } else { Vec::new() }
    }
}

/// The candidates in `file` if there are any, else the only one elsewhere; several elsewhere
/// are ambiguous without the imports ([`Index::pick`]).
fn pick(file: usize, nodes: &[Node]) -> Vec<Node> {
    let here: Vec<Node> = nodes.iter().copied().filter(|n| n.0 == file).collect();
    if !here.is_empty() {
        return here;
    }
    match nodes {
        [only] => vec![*only],
        _ => Vec::new(),
    }
}

fn prefer<'s>(file: usize, structs: &[(usize, &'s StructInfo)]) -> Option<(usize, &'s StructInfo)> {
    structs
        .iter()
        .find(|(f, _)| *f == file)
        .or(match structs {
            [only] => Some(only),
            _ => None,
        })
        .copied()
}

/// The functions of the group that `holds` says are so, as a set and as a queue to walk from.
fn functions_where(
    files: &[&FileSummary],
    holds: impl Fn(&FnInfo) -> bool,
) -> (HashSet<Node>, VecDeque<Node>) {
    let nodes: Vec<Node> = files
        .iter()
        .enumerate()
        .flat_map(|(f, s)| {
            s.fns.iter().enumerate().filter(|(_, i)| holds(i)).map(move |(i, _)| (f, i as FnId))
        })
        .collect();
    (nodes.iter().copied().collect(), nodes.into_iter().collect())
}

/// The absolute path, with `.` and `..` worked out by the text alone (`lint . ../examples` names
/// files of one package two ways).
pub(crate) fn normalized(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in std::path::absolute(path).ok()?.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// The module a file of the package is (`src/lib.rs` → `[]`, `src/loss/ctc.rs` and
/// `src/loss/ctc/mod.rs` → `[loss, ctc]`); `None` outside `src/` and for `src/bin/` (crates of
/// their own).
fn module_path(root: &Path, file: &Path) -> Option<Vec<String>> {
    let file = normalized(file)?;
    let rel = file.strip_prefix(root.join("src")).ok()?;
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// The module an import's path names, from the crate's root: `crate::a::b`, `self::b` and
/// `super::b` relative to the importing module `here`, `my_crate::a` from outside `src/`, and a
/// bare `a::b` as a child of `here` (Rust 2018 paths). `None` for other crates.
fn absolute_module(
    path: &[String],
    here: Option<&[String]>,
    crate_name: Option<&str>,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        // An example's or a binary's `crate::` is that crate, not the library.
        "crate" => here.map(|_| rest.to_vec()),
        "self" => Some(here?.iter().chain(rest).cloned().collect()),
        "super" => {
            let mut base = here?.to_vec();
            base.pop()?;
            let mut rest = rest;
            while let Some((s, more)) = rest.split_first().filter(|(s, _)| *s == "super") {
                let _ = s;
                base.pop()?;
                rest = more;
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        name if Some(name) == crate_name => Some(rest.to_vec()),
        _ => Some(here?.iter().chain(path).cloned().collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn accelerators_are_named_in_identifiers_manifests_and_comments() {
        for named in [
            "let d = Device::new_cuda(0)?;",
            "let d = CudaDevice::new(0);",
            "type B = Autodiff<Wgpu>;",
            "let d = LibTorchDevice::Mps;",
            "let d = Device::new_metal(0)?;",
            "[features]\ncuda = [\"candle-core/cuda\"]",
            "// runs on the GPU when there is one",
            "if is_hip_available() {}",
            "const CUDAGRAPH: bool = true;",
        ] {
            assert!(names_accelerator(named), "{named}");
        }
        for host in [
            "let d = Device::Cpu;",
            "type B = NdArray<f32>;",
            "let stamps = timestamps(dumps);",
            "let metallic = ship(relationship);",
            "let t = Tensor::from_vec(v, (2, 2), &Device::Cpu)?;",
        ] {
            assert!(!names_accelerator(host), "{host}");
        }
    }

    #[test]
    fn a_file_is_the_module_its_path_says() {
        let root = Path::new("/w/pkg");
        assert_eq!(module_path(root, Path::new("/w/pkg/src/lib.rs")), Some(v(&[])));
        assert_eq!(module_path(root, Path::new("/w/pkg/src/main.rs")), Some(v(&[])));
        assert_eq!(module_path(root, Path::new("/w/pkg/src/loss/ctc.rs")), Some(v(&["loss", "ctc"])));
        assert_eq!(module_path(root, Path::new("/w/pkg/src/loss/mod.rs")), Some(v(&["loss"])));
        assert_eq!(module_path(root, Path::new("/w/pkg/src/bin/serve.rs")), None);
        assert_eq!(module_path(root, Path::new("/w/pkg/examples/fit.rs")), None);
    }

    #[test]
    fn an_import_names_a_module_from_the_crate_root() {
        let here = v(&["train", "step"]);
        let here = Some(here.as_slice());
        assert_eq!(absolute_module(&v(&["crate", "loss", "ctc"]), here, None), Some(v(&["loss", "ctc"])));
        assert_eq!(absolute_module(&v(&["self", "ctc"]), here, None), Some(v(&["train", "step", "ctc"])));
        assert_eq!(absolute_module(&v(&["super", "ctc"]), here, None), Some(v(&["train", "ctc"])));
        assert_eq!(absolute_module(&v(&["super", "super", "ctc"]), here, None), Some(v(&["ctc"])));
        assert_eq!(absolute_module(&v(&["super", "super", "super"]), here, None), None);
        assert_eq!(absolute_module(&v(&["ocr", "loss"]), None, Some("ocr")), Some(v(&["loss"])));
        assert_eq!(absolute_module(&v(&["burn", "nn"]), None, Some("ocr")), None);
        assert_eq!(absolute_module(&v(&["ctc"]), here, None), Some(v(&["train", "step", "ctc"])));
    }
}
