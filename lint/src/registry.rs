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

/// Everything fixed about a rule.
#[derive(Debug)]
pub struct RuleMeta {
    pub code: &'static str,
    pub name: &'static str,
    pub group: Group,
    /// The status in its first language: Rust, or Python for a Python-only rule. A rule that
    /// checks both has its Python status on its [`PythonSide`]; see [`RuleMeta::status_in`].
    pub status: Status,
    /// Only Python code has this hazard (D008..D010).
    python_only: bool,
    /// One line for tables, `--list-rules` and SARIF's short description.
    pub summary: &'static str,
    pub fix: FixKind,
    /// Patterns of a stable rule that run only with preview, and why (their measured precision,
    /// or that the ecosystem check has not seen them yet).
    pub preview_patterns: Option<&'static str>,
    /// The rule's doc comment, one source line per line, each with the leading space rustdoc keeps.
    docs_raw: &'static str,
}

impl RuleMeta {
    pub(crate) const fn new(
        code: &'static str,
        name: &'static str,
        group: Group,
        summary: &'static str,
        fix: FixKind,
        docs_raw: &'static str,
    ) -> Self {
        RuleMeta {
            code,
            name,
            group,
            status: Status::Stable,
            python_only: false,
            summary,
            fix,
            preview_patterns: None,
            docs_raw,
        }
    }

    /// Marks a rule about a PyTorch-only hazard: it checks Python files and no others.
    pub const fn python_only(mut self) -> Self {
        self.python_only = true;
        self
    }

    /// The rule's status for files of `lang`; `None` when the rule does not check that language.
    pub fn status_in(&self, lang: Language) -> Option<Status> {
        match (lang, self.python_only) {
            (Language::Rust, true) => None,
            (Language::Rust, false) | (Language::Python, true) => Some(self.status),
            // Parse errors and internal errors are about files of either language.
            (Language::Python, false) if self.group == Group::Meta => Some(self.status),
            (Language::Python, false) => python_side(self.code).map(|p| p.status),
        }
    }

    /// The languages the rule checks, with its status in each.
    pub fn languages(&self) -> impl Iterator<Item = (Language, Status)> + '_ {
        Language::ALL.into_iter().filter_map(|l| self.status_in(l).map(|s| (l, s)))
    }

    /// Marks the rule `Preview`, with the reason `devcheck explain` prints.
    pub const fn preview(mut self, why: &'static str) -> Self {
        self.status = Status::Preview(why);
        self
    }

    /// Names the rule's preview patterns, with the reason `devcheck explain` prints.
    pub const fn preview_patterns(mut self, what: &'static str) -> Self {
        self.preview_patterns = Some(what);
        self
    }

    pub fn default_severity(&self) -> Severity {
        self.group.default_severity()
    }

    /// The rule's documentation as Markdown: What it does / Why is this bad? / Example /
    /// Use instead / Fix safety. The same text rustdoc shows for the rule's type.
    pub fn docs(&self) -> String {
        doc_text(self.docs_raw)
    }

    /// The PyTorch part of a rule that checks both languages (its own docs, for a Python-only
    /// rule, are already about PyTorch).
    pub fn python(&self) -> Option<&'static PythonSide> {
        if self.python_only { None } else { python_side(self.code) }
    }
}

/// A doc comment as Markdown: one source line per line, without the space rustdoc keeps.
fn doc_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for line in raw.lines() {
        let line = line.strip_prefix(' ').unwrap_or(line);
        // Examples are `ignore` for rustdoc (they need a framework); to a reader they are Rust.
        out.push_str(if line == "```ignore" { "```rust" } else { line });
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// What a rule shared with Rust does on PyTorch code: its status there (a Python pattern can be
/// less precise than the Rust one) and its docs (What it does / Why is this bad? / Example /
/// Use instead / Fix safety, about PyTorch). Declared beside the Python rule
/// (`python/rules/`).
#[derive(Debug)]
pub struct PythonSide {
    pub code: &'static str,
    pub status: Status,
    docs_raw: &'static str,
}

impl PythonSide {
    pub(crate) const fn new(code: &'static str, docs_raw: &'static str) -> Self {
        PythonSide { code, status: Status::Stable, docs_raw }
    }

    pub const fn preview(mut self, why: &'static str) -> Self {
        self.status = Status::Preview(why);
        self
    }

    pub fn docs(&self) -> String {
        doc_text(self.docs_raw)
    }
}

/// The Python side of a rule shared with Rust.
pub fn python_side(code: &str) -> Option<&'static PythonSide> {
    super::python::rules::SIDES.iter().copied().find(|s| s.code == code)
}

/// Declares a rule type whose doc comment is also its `devcheck explain` text, so the two can
/// never drift apart.
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])+
        pub struct $ty:ident {
            code: $code:literal,
            name: $name:literal,
            group: $group:ident,
            summary: $summary:literal,
            fix: $fix:ident
            $(, preview: $why:expr)?
            $(, preview_patterns: $what:literal)?
            $(, only: $only:ident)? $(,)?
        }
    ) => {
        $(#[doc = $doc])+
        pub struct $ty;

        impl $ty {
            pub const META: $crate::registry::RuleMeta = $crate::registry::RuleMeta::new(
                $code,
                $name,
                $crate::registry::Group::$group,
                $summary,
                $crate::registry::FixKind::$fix,
                concat!($($doc, "\n"),+),
            )$(.preview($why))?$(.preview_patterns($what))?$(.$only())?;
        }
    };
}
pub(crate) use declare_rule;

/// Files that do not parse are reported under this code, and the run goes on.
pub static PARSE_ERROR: RuleMeta = RuleMeta::new(
    "D000",
    "parse-error",
    Group::Meta,
    "a file that could not be read or parsed as Rust or Python (the run goes on with the other files)",
    FixKind::None,
    " ### What it does\n Reports a file the linter could not read as Rust or Python source: a syntax \
     error, a file that is not UTF-8, or one that is too large or too deeply nested to lint safely.\n\n \
     ### Why is this bad?\n Nothing in that file was checked.\n\n ### Example\n ```ignore\n fn forward(&self) -> Tensor {\n ```\n\n \
     ### Use instead\n Fix the syntax error (`cargo check` or `python -m py_compile` shows it too), or \
     exclude generated files with `exclude` in devcheck.toml.\n\n ### Fix safety\n There is no automatic fix.\n",
);

/// A rule that panicked on a file. Never expected: it is a bug in devcheck, reported instead of
/// stopping the run, and it makes the run exit with 2.
pub static INTERNAL_ERROR: RuleMeta = RuleMeta::new(
    "D999",
    "internal-error",
    Group::Meta,
    "the linter failed on this file (a bug in devcheck; the other files were still checked)",
    FixKind::None,
    " ### What it does\n Reports that a rule failed on a file. The other rules' findings for the file \
     are lost, the other files are still checked, and the run exits with 2.\n\n ### Why is this bad?\n \
     It is a bug in devcheck, not in your code.\n\n ### Example\n A file that makes a rule panic.\n\n \
     ### Use instead\n Please report it with the file (or a reduced copy) attached; meanwhile exclude \
     the file.\n\n ### Fix safety\n There is no automatic fix.\n",
);

/// All rules in code order, then the meta codes.
pub fn all() -> &'static [&'static RuleMeta] {
    static ALL: [&RuleMeta; 12] = [
        &PARSE_ERROR,
        &super::rules::D001TensorOnFixedDevice::META,
        &super::rules::D002HardcodedAccelerator::META,
        &super::rules::D003DiscardedTransfer::META,
        &super::rules::D004UnmovedTensorField::META,
        &super::rules::D005HostRoundTripInLoop::META,
        &super::rules::D006EmptyCacheInLoop::META,
        &super::rules::D007UnsynchronizedTiming::META,
        &super::python::rules::D008HostConversionOfDeviceTensor::META,
        &super::python::rules::D009IneffectiveNonBlocking::META,
        &super::python::rules::D010LoadWithoutMapLocation::META,
        &INTERNAL_ERROR,
    ];
    &ALL
}

/// The rules proper (D001..), without the meta codes.
pub fn rules() -> impl Iterator<Item = &'static RuleMeta> {
    all().iter().copied().filter(|r| r.group != Group::Meta)
}

/// Finds a rule by code (`D001`, any case) or name (`tensor-on-fixed-device`).
pub fn lookup(code_or_name: &str) -> Option<&'static RuleMeta> {
    let wanted = code_or_name.trim();
    all().iter().copied().find(|r| r.code.eq_ignore_ascii_case(wanted) || r.name == wanted)
}
