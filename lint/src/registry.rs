//! Stable rule codes, names, groups and default levels, and the docs `devcheck explain` prints.
//!
//! Codes and names never change once released; groups only set the default level.

use serde::{Deserialize, Serialize};

pub use super::source::Language;

/// How loud a finding is. `--fail-on` picks the level that makes the run exit with 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// What kind of mistake a rule finds; sets its default level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The code is wrong on some device: an error by default.
    Correctness,
    /// Probably wrong or not portable: a warning by default.
    Suspicious,
    /// Correct but slow on an accelerator: a warning by default.
    Perf,
    /// Reports about the run itself (a file that does not parse, an internal error).
    Meta,
}

impl Group {
    pub fn as_str(self) -> &'static str {
        match self {
            Group::Correctness => "correctness",
            Group::Suspicious => "suspicious",
            Group::Perf => "perf",
            Group::Meta => "meta",
        }
    }

    pub fn default_severity(self) -> Severity {
        match self {
            Group::Correctness | Group::Meta => Severity::Error,
            Group::Suspicious | Group::Perf => Severity::Warning,
        }
    }
}

/// Whether a rule can rewrite the code, and how safely (see each rule's "Fix safety").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixKind {
    /// No automatic fix.
    None,
    /// Some findings carry a fix that `--fix` applies.
    Safe,
    /// Findings carry a fix that only `--unsafe-fixes` applies.
    Unsafe,
    /// Safe in the cases the rule's docs name, unsafe otherwise.
    Mixed,
}

impl FixKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FixKind::None => "none",
            FixKind::Safe => "safe",
            FixKind::Unsafe => "unsafe",
            FixKind::Mixed => "safe or unsafe",
        }
    }
}

/// Whether a rule runs by default. A rule (or a pattern inside one) whose precision on the
/// ecosystem check (`scripts/ecosystem.sh`: real repositories, every finding labelled) is below
/// 0.9 is `Preview`: off unless `--preview` or `preview = true` in devcheck.toml.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Precise on real code: safe to leave on in CI.
    Stable,
    /// Off by default; the text says why (its measured precision, what it still gets wrong).
    Preview(&'static str),
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Stable => "stable",
            Status::Preview(_) => "preview",
        }
    }

    pub fn is_preview(self) -> bool {
        matches!(self, Status::Preview(_))
    }
}

/// Everything fixed about a rule: what the table below declares.
#[derive(Debug)]
pub struct RuleMeta {
    pub code: &'static str,
    pub name: &'static str,
    pub group: Group,
    /// The status in its first language: Rust, or Python for a Python-only rule. See
    /// [`RuleMeta::status_in`] for each language.
    pub status: Status,
    /// One line for tables, `--list-rules` and SARIF's short description.
    pub summary: &'static str,
    pub fix: FixKind,
    /// Patterns of a stable rule that run only with preview, and why (their measured precision,
    /// or that the ecosystem check has not seen them yet), in its first language.
    pub preview_patterns: Option<&'static str>,
    /// How the rule checks each language it checks: `None` where it does not.
    rust: Option<Side>,
    python: Option<Side>,
    /// The docs of a meta code (`D000`, `D999`), which belongs to no language's rules.
    meta_docs: &'static str,
}

/// A rule in one language: its status there and its docs (What it does / Why is this bad? /
/// Example / Use instead / Fix safety), the Markdown file beside the rule's code
/// (`rust/rules/d001_tensor_on_fixed_device.md`, `python/rules/..`).
#[derive(Clone, Copy, Debug)]
pub struct Side {
    pub status: Status,
    pub preview_patterns: Option<&'static str>,
    docs: &'static str,
}

impl Side {
    pub fn docs(&self) -> String {
        self.docs.to_string()
    }
}

impl RuleMeta {
    /// A meta code: about files of either language, not a rule of either.
    const fn meta(code: &'static str, name: &'static str, summary: &'static str, docs: &'static str) -> Self {
        RuleMeta {
            code,
            name,
            group: Group::Meta,
            status: Status::Stable,
            summary,
            fix: FixKind::None,
            preview_patterns: None,
            rust: None,
            python: None,
            meta_docs: docs,
        }
    }

    /// The rule's status for files of `lang`; `None` when the rule does not check that language.
    pub fn status_in(&self, lang: Language) -> Option<Status> {
        // Parse errors and internal errors are about files of either language.
        if self.group == Group::Meta {
            return Some(self.status);
        }
        self.side(lang).map(|s| s.status)
    }

    fn side(&self, lang: Language) -> Option<&Side> {
        match lang {
            Language::Rust => self.rust.as_ref(),
            Language::Python => self.python.as_ref(),
        }
    }

    /// The languages the rule checks, with its status in each.
    pub fn languages(&self) -> impl Iterator<Item = (Language, Status)> + '_ {
        Language::ALL.into_iter().filter_map(|l| self.status_in(l).map(|s| (l, s)))
    }

    pub fn default_severity(&self) -> Severity {
        self.group.default_severity()
    }

    /// The rule's documentation in its first language, as Markdown: What it does / Why is this
    /// bad? / Example / Use instead / Fix safety.
    pub fn docs(&self) -> String {
        self.rust.as_ref().or(self.python.as_ref()).map_or_else(|| self.meta_docs.to_string(), Side::docs)
    }

    /// The PyTorch side of a rule that checks both languages (a Python-only rule's own docs are
    /// already about PyTorch).
    pub fn python(&self) -> Option<&Side> {
        self.rust.as_ref().and(self.python.as_ref())
    }
}

/// The one rule table. Each rule is declared here once: its code and name (stable forever), its
/// group (which sets its default level), its fix kind, its summary, and for each language it
/// checks, the file of its implementation (`rust/rules/<file>.rs`, `python/rules/<file>.rs`, with
/// its docs in `<file>.md` beside it) and its status there. The rule statics below, `all()`,
/// `--list-rules`, `explain` and each front end's dispatch ([`crate::rust`]'s `rules/mod.rs`,
/// [`crate::python`]'s) are generated from it: a new rule for one language is a row here and its
/// file (and docs) there.
///
/// `$then` receives every row; each front end takes the rows of its own language.
#[rustfmt::skip]
macro_rules! with_rules {
    ($then:ident) => {
        $then! {
            D001 TensorOnFixedDevice {
                name: "tensor-on-fixed-device",
                group: Correctness,
                fix: Mixed,
                summary: "a tensor made in a forward pass on a device that does not come from an \
                    input",
                rust: d001_tensor_on_fixed_device (Preview("Strict precision 0.00 on the Rust \
                    repositories of the ecosystem check: 0 of 3 findings on the held-out ones (its \
                    2 tuning findings were in files no target compiles, and 3 held-out ones in a \
                    repository that names no accelerator, which are now left out). Each was a CPU \
                    tensor made on a path the repository's own callers never take (an \
                    `inputs_embeds` argument they always pass as None, an error path): latent, not a \
                    failure of a GPU run. On six Rust repositories no rule was tuned on, 0 of 14 \
                    at first look (an augmentation's matrices composed on the host on purpose), 0 \
                    of 11 after. \
                    Telling those apart needs the callers across the repository."),
                    patterns: "free functions of examples and binaries that take and return \
                    tensors count as forward passes"),
                python: d001_tensor_on_fixed_device (Preview("One finding (true) on the held-out \
                    PyTorch repositories of the ecosystem check, and 1 of their 7 known hazards \
                    found (recall 0.14); one on the tuning ones (true; an arguable one, on a branch \
                    only a non-default option takes, is no longer reported). On 13 \
                    repositories with 16 fixed-device bugs found through users' reports it finds \
                    6 (one arguable finding besides), and of 7 batches or labels left on the host \
                    in 8 more repositories hunted for that bug, 6 (3 through D003's thrown-away \
                    move; none false); on two \
                    samples of 16 repositories no rule was tuned on, whose readers found no \
                    true hazard, its one finding at first look was false (a CPU fallback \
                    branch, no longer reported). Too few findings to measure its \
                    precision; most known hazards cross files and functions it does not follow \
                    yet.")),
            }
            D002 HardcodedAccelerator {
                name: "hardcoded-accelerator",
                group: Suspicious,
                fix: None,
                summary: "`Cuda(0)`-style device literals in library/model code (not in main, \
                    tests, examples, benches)",
                rust: d002_hardcoded_accelerator (Stable),
                python: d002_hardcoded_accelerator (Preview("Strict precision 0.75 on the held-out \
                    PyTorch repositories of the ecosystem check (18 of 24) and 0.67 on the tuning \
                    ones (2 of 3), recall 0.86 (18 of 21 known hazards). It reports only where the \
                    project says the line goes wrong on a GPU run (it also offers MPS or XLA, or \
                    runs one process per GPU with an index written or no `set_device`). Not yet \
                    followed: whether anything calls the code, and a device a callee replaces \
                    (the tuning false alarm).")),
            }
            D003 DiscardedTransfer {
                name: "discarded-transfer",
                group: Correctness,
                fix: Unsafe,
                summary: "the result of `.to(..)` / `.to_non_blocking(..)` / `.to_device(..)` / \
                    `.cuda()` / `.cpu()` thrown away",
                rust: d003_discarded_transfer (Stable),
                python: d003_discarded_transfer (Preview("It reported nothing in the Python files \
                    of the ecosystem check (36 public PyTorch repositories, and the .py files of \
                    the Rust ones), so its precision on real code is not measured yet.")),
            }
            D004 UnmovedTensorField {
                name: "unmoved-tensor-field",
                group: Correctness,
                fix: Safe,
                summary: "a tensor kept in a struct where the framework's device move does not \
                    reach it",
                rust: d004_unmoved_tensor_field (Preview("Strict precision 0.00 on the Rust \
                    repositories of the ecosystem check (0 of 1 held-out finding, 0 of 2 tuning): \
                    each field it found holds a tensor made on the CPU in a repository that only \
                    ever runs on the CPU, so nothing breaks as the code is run."),
                    patterns: "statics holding a tensor made on a fixed device (`lazy_static!`, `LazyLock`, \
                    `OnceLock::get_or_init`) used by a forward pass, and fields used by an \
                    optimizer's `step`"),
                python: d004_unmoved_tensor_field (Preview("One finding on the PyTorch \
                    repositories of the ecosystem check, on a tuning one (true: a noise \
                    schedule's host-made table indexed with timesteps on the device), none on the \
                    held-out ones, where no hazard of its kind is known; 0 of the 1 such bug among \
                    13 repositories found through users' reports (a table unpickled onto a \
                    trainer). Too few findings to measure its precision on real code.")),
            }
            D005 HostRoundTripInLoop {
                name: "host-round-trip-in-loop",
                group: Perf,
                fix: None,
                summary: "device→host reads (`to_vec*`, `to_scalar`, `item`, move to CPU) inside a \
                    per-step/per-layer loop",
                rust: d005_host_round_trip_in_loop (Preview("Strict precision 0.43 on the held-out \
                    Rust repositories of the ecosystem check (37 of 87) and 0.30 on the tuning ones \
                    (13 of 44), recall 0.88 (37 of 42 known hazards): reads at every training step \
                    are found, but many reports are in code that only runs on the CPU (a device or \
                    backend fixed to the CPU where the repository also names an accelerator, \
                    tensors built on the host), behind an option that is \
                    off by default, or that nothing calls, and telling those apart needs the \
                    callers and settings across the repository. Files no target compiles are \
                    left out.")),
                python: d005_host_round_trip_in_loop (Preview("Strict precision 0.78 on the held-out \
                    PyTorch repositories of the ecosystem check (69 of 89) and 0.88 on the tuning \
                    ones (220 of 249), recall 0.78 (69 of 88 known hazards): most findings that \
                    are not true are on paths that run only with a setting that is off by default \
                    (command-line options declared with argparse, and what the project's scripts \
                    and configuration files pass, are followed; settings only a configuration \
                    object holds are not), only when sampling for logging, or in code no run \
                    reaches (code only imports and unreached code name is left alone; model \
                    classes a library ships for its users are not); the rest are reads in a branch taken \
                    once and in helpers of an evaluation every N steps. Most misses \
                    are syncs in helpers reached through objects whose class is not known \
                    (factories, registries, configuration).")),
            }
            D006 EmptyCacheInLoop {
                name: "empty-cache-in-loop",
                group: Perf,
                fix: Unsafe,
                summary: "`empty_cache()` inside a loop",
                rust: d006_empty_cache_in_loop (Stable),
                python: d006_empty_cache_in_loop (Preview("It reported nothing in the Python files \
                    of the ecosystem check (36 public PyTorch repositories, and the .py files of \
                    the Rust ones), so its precision on real code is not measured yet.")),
            }
            D007 UnsynchronizedTiming {
                name: "unsynchronized-timing",
                group: Suspicious,
                fix: None,
                summary: "wall-clock timing around device work without a synchronize",
                rust: d007_unsynchronized_timing (Preview("Strict precision 0.67 on the held-out \
                    Rust repositories of the ecosystem check (2 of 3) and 0.84 on the tuning ones \
                    (16 of 19), recall 0.29: the false alarms time code whose printed result \
                    already waits for the device, or code nothing calls.")),
                python: d007_unsynchronized_timing (Preview("Four findings in the PyTorch \
                    repositories of the ecosystem check (two true, on the tuning ones; one arguable \
                    and one false, held out: a test that times a model on the CPU) and none of \
                    the 3 known held-out hazards found: too few findings to measure its \
                    precision on real code.")),
            }
            D008 HostConversionOfDeviceTensor {
                name: "host-conversion-of-device-tensor",
                group: Correctness,
                fix: Safe,
                summary: "`.numpy()` on a tensor that may be on an accelerator (no `.cpu()`) or \
                    require grad (no `.detach()`)",
                python: d008_host_conversion_of_device_tensor (Preview("Two findings (both true) \
                    on the tuning PyTorch repositories of the ecosystem check; on the held-out ones \
                    strict precision 0.00 (0 of 4: debugging scripts whose helpers make their tensors on a \
                    CPU default device, or from numpy, which it takes for a device not known), and 0 of 1 known \
                    hazard found; off the lists, 0 of 16 at first look on one sample (test methods and \
                    tests, now left alone): too few findings to measure its precision on real code.")),
            }
            D009 IneffectiveNonBlocking {
                name: "ineffective-non-blocking",
                group: Perf,
                fix: Safe,
                summary: "`non_blocking=True` copies from an unpinned DataLoader, or pinned batches \
                    moved blocking",
                python: d009_ineffective_non_blocking (Preview("No finding left on the ecosystem \
                    check's PyTorch repositories, and none of its 20 findings on two off-list \
                    samples labelled blind was true (evaluation loops, which it now leaves alone, \
                    and loaders given their options as `**kwargs`, now not judged): its \
                    precision on real code is not measured yet.")),
            }
            D010 LoadWithoutMapLocation {
                name: "load-without-map-location",
                group: Suspicious,
                fix: Unsafe,
                summary: "`torch.load` with no `map_location` in code declared to run also \
                    without a GPU",
                python: d010_load_without_map_location (Preview("Runs only where the code is \
                    declared to run also without a GPU (`target = \"any\"` in devcheck.toml, or \
                    `--target any`): what it finds fails only on a machine without the GPU the \
                    checkpoint was saved from. Run on every repository, as it once was, its strict \
                    precision was 0.00 on the ecosystem check's tuning PyTorch repositories (0 of \
                    15), on the held-out ones (0 of 9) and on the first looks at two off-list \
                    samples (0 of 24): a GPU run of the code as its repository runs it loads \
                    fine, which the strict labels count as latent.")),
            }
        }
    };
}
pub(crate) use with_rules;

/// The rule statics (`registry::D001`, ..) and [`all`], from the table.
macro_rules! declare_rules {
    ($(
        $code:ident $ty:ident {
            name: $name:literal,
            group: $group:ident,
            fix: $fix:ident,
            summary: $summary:literal,
            $(rust: $rust:ident ($rust_status:expr $(, patterns: $rust_patterns:literal)?),)?
            $(python: $python:ident ($python_status:expr $(, patterns: $python_patterns:literal)?),)?
        }
    )*) => {
        $(
            #[doc = concat!("`", stringify!($code), "` (`", $name, "`): ", $summary)]
            pub static $code: RuleMeta = {
                #[allow(unused_imports)]
                use Status::{Preview, Stable};
                let rust = at_most_one(&[$(Side {
                    status: $rust_status,
                    preview_patterns: at_most_one(&[$($rust_patterns)?]),
                    docs: include_str!(concat!("rust/rules/", stringify!($rust), ".md")),
                })?]);
                let python = at_most_one(&[$(Side {
                    status: $python_status,
                    preview_patterns: at_most_one(&[$($python_patterns)?]),
                    docs: include_str!(concat!("python/rules/", stringify!($python), ".md")),
                })?]);
                let first = match (&rust, &python) {
                    (Some(side), _) | (None, Some(side)) => side,
                    (None, None) => panic!(concat!("rule ", stringify!($code), " checks no language")),
                };
                RuleMeta {
                    code: stringify!($code),
                    name: $name,
                    group: Group::$group,
                    status: first.status,
                    summary: $summary,
                    fix: FixKind::$fix,
                    preview_patterns: first.preview_patterns,
                    rust,
                    python,
                    meta_docs: "",
                }
            };
        )*

        /// All rules in code order, then the meta codes.
        pub fn all() -> &'static [&'static RuleMeta] {
            static ALL: &[&RuleMeta] = &[&PARSE_ERROR, $(&$code,)* &INTERNAL_ERROR];
            ALL
        }
    };
}

with_rules!(declare_rules);

/// The element of a list of none or one: what an optional part of a table row declared.
const fn at_most_one<T: Copy>(list: &[T]) -> Option<T> {
    match list {
        [] => None,
        [one, ..] => Some(*one),
    }
}

/// Files that do not parse are reported under this code, and the run goes on.
pub static PARSE_ERROR: RuleMeta = RuleMeta::meta(
    "D000",
    "parse-error",
    "a file that could not be read or parsed as Rust or Python (the run goes on with the other files)",
    "### What it does\nReports a file the linter could not read as Rust or Python source: a syntax \
     error, a file that is not UTF-8, or one that is too large or too deeply nested to lint safely.\n\n\
     ### Why is this bad?\nNothing in that file was checked.\n\n### Example\n```rust\nfn forward(&self) -> Tensor {\n```\n\n\
     ### Use instead\nFix the syntax error (`cargo check` or `python -m py_compile` shows it too), or \
     exclude generated files with `exclude` in devcheck.toml.\n\n### Fix safety\nThere is no automatic fix.\n",
);

/// A rule that panicked on a file. Never expected: it is a bug in devcheck, reported instead of
/// stopping the run, and it makes the run exit with 2.
pub static INTERNAL_ERROR: RuleMeta = RuleMeta::meta(
    "D999",
    "internal-error",
    "the linter failed on this file (a bug in devcheck; the other files were still checked)",
    "### What it does\nReports that a rule failed on a file. The other rules' findings for the file \
     are lost, the other files are still checked, and the run exits with 2.\n\n### Why is this bad?\n\
     It is a bug in devcheck, not in your code.\n\n### Example\nA file that makes a rule panic.\n\n\
     ### Use instead\nPlease report it with the file (or a reduced copy) attached; meanwhile exclude \
     the file.\n\n### Fix safety\nThere is no automatic fix.\n",
);

/// The rules proper (D001..), without the meta codes.
pub fn rules() -> impl Iterator<Item = &'static RuleMeta> {
    all().iter().copied().filter(|r| r.group != Group::Meta)
}

/// Finds a rule by code (`D001`, any case) or name (`tensor-on-fixed-device`).
pub fn lookup(code_or_name: &str) -> Option<&'static RuleMeta> {
    let wanted = code_or_name.trim();
    all().iter().copied().find(|r| r.code.eq_ignore_ascii_case(wanted) || r.name == wanted)
}
