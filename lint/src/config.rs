//! `devcheck.toml` (or `[tool.devcheck]` in `pyproject.toml`, with the same keys): which rules
//! run where, at which level, and on which API.
//!
//! ```toml
//! [lint]
//! select = ["ALL"]                  # codes or names; default: all rules
//! ignore = ["D007"]
//! api = "candle"                    # devcheck | candle | tch | burn; default: from `use` lines
//! fail-on = "error"                 # the level that makes `devcheck lint` exit with 1 (default)
//! preview = false                   # also run the preview rules and patterns
//! target = "cuda"                   # the code only ever runs on CUDA GPUs (D002 is quieter; Rust
//!                                   # code that names no accelerator is still checked for one);
//!                                   # "any": it must also run without a GPU (D010 checks loads)
//! exclude = ["generated/**"]
//!
//! [lint.severity]
//! D002 = "error"
//!
//! [lint.per-file-ignores]
//! "examples/**" = ["D002", "D007"]
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use miette::{NamedSource, SourceSpan};
use serde::Deserialize;

use super::error::{ConfigError, LintError};
use super::registry::{self, RuleMeta, Severity};
use super::source::Language;
use crate::source::Api;

/// A Python project's own configuration file, which can hold devcheck's under `[tool.devcheck]`.
pub const PYPROJECT: &str = "pyproject.toml";

/// `pyproject.toml`: only `[tool.devcheck]` is devcheck's; every other table is someone else's.
#[derive(Debug, Default, Deserialize)]
struct PyProject {
    #[serde(default)]
    tool: PyProjectTools,
}

#[derive(Debug, Default, Deserialize)]
struct PyProjectTools {
    devcheck: Option<ConfigFile>,
}

fn is_pyproject(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == PYPROJECT)
}

/// Does this `pyproject.toml` configure devcheck? (One that does not, or cannot be read, is
/// passed over on the way up, as if it were not there.)
fn has_devcheck_table(path: &Path) -> bool {
    #[derive(Deserialize)]
    struct Tools {
        #[serde(default)]
        tool: toml::Table,
    }
    devcheck_files::read_limited(path, MAX_CONFIG_BYTES)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|text| text.contains("devcheck"))
        .and_then(|text| toml::from_str::<Tools>(&text).ok())
        .is_some_and(|t| t.tool.contains_key("devcheck"))
}

/// The most a configuration file is read: far above any real one.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The name of the configuration file, looked up from the current directory upwards.
pub const CONFIG_FILE: &str = "devcheck.toml";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    lint: LintTable,
}

/// The `[lint]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LintTable {
    pub select: Option<Vec<String>>,
    pub ignore: Option<Vec<String>>,
    pub api: Option<Api>,
    pub fail_on: Option<Severity>,
    pub preview: Option<bool>,
    pub target: Option<Target>,
    pub exclude: Option<Vec<String>>,
    pub severity: Option<BTreeMap<String, Severity>>,
    pub per_file_ignores: Option<BTreeMap<String, Vec<String>>>,
}

/// Where a codebase is meant to run (`target` in the configuration, `--target` on the command
/// line). Undeclared, the code is taken to run on the machines it names: a GPU where it asks for
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Only ever on CUDA GPUs (one process per GPU, `torch.cuda.set_device` called): `.cuda()`
    /// and `"cuda"` land on the GPU the process was given, so D002 does not flag them; an
    /// explicit index (`"cuda:0"`) in a codebase run with one process per GPU still is.
    Cuda,
    /// On any machine, with or without a GPU (a laptop, a CPU-only CI runner or server): a
    /// checkpoint saved from a GPU must load there too, so D010 checks `torch.load`.
    Any,
}

/// Settings for a run: the configuration file merged with the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The rules that run on Rust files and on Python files (a rule can be stable in one
    /// language and preview in the other).
    enabled: HashSet<&'static str>,
    enabled_python: HashSet<&'static str>,
    severity: BTreeMap<&'static str, Severity>,
    per_file_ignores: Vec<(GlobSet, HashSet<&'static str>)>,
    exclude: GlobSet,
    /// Paths in globs are relative to this directory (the configuration file's).
    pub root: PathBuf,
    pub api: Option<Api>,
    pub fail_on: Severity,
    /// Preview rules, and preview patterns of stable rules, run too.
    pub preview: bool,
    /// Where the code is meant to run, as the configuration declares it.
    pub target: Option<Target>,
    /// Where the settings came from, for messages.
    pub config_path: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: default_rules(false, Language::Rust).collect(),
            enabled_python: default_rules(false, Language::Python).collect(),
            severity: BTreeMap::new(),
            per_file_ignores: Vec::new(),
            exclude: GlobSet::empty(),
            root: PathBuf::from("."),
            api: None,
            fail_on: Severity::Error,
            preview: false,
            target: None,
            config_path: None,
        }
    }
}

/// What the command line adds to (or overrides in) the configuration.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// Replaces the file's `select`.
    pub select: Option<Vec<String>>,
    /// Added to the file's `ignore`.
    pub ignore: Vec<String>,
    pub api: Option<Api>,
    pub fail_on: Option<Severity>,
    /// `--preview`: turns preview on whatever the file says.
    pub preview: bool,
    /// `--target`: replaces the file's `target`.
    pub target: Option<Target>,
}

impl Settings {
    /// The defaults with the preview rules and patterns on: what `--preview` gives with no
    /// configuration file.
    pub fn with_preview() -> Settings {
        Settings {
            enabled: default_rules(true, Language::Rust).collect(),
            enabled_python: default_rules(true, Language::Python).collect(),
            preview: true,
            ..Settings::default()
        }
    }

    /// Finds the configuration for `start`: in `start` or the closest of its ancestors that has
    /// one, `devcheck.toml`, or else a `pyproject.toml` with a `[tool.devcheck]` table (the
    /// closest configuration file wins; in one folder, `devcheck.toml` wins).
    pub fn discover(start: &Path) -> Option<PathBuf> {
        let start = start.canonicalize().ok()?;
        start.ancestors().find_map(|dir| {
            let own = dir.join(CONFIG_FILE);
            if own.is_file() {
                return Some(own);
            }
            let pyproject = dir.join(PYPROJECT);
            (pyproject.is_file() && has_devcheck_table(&pyproject)).then_some(pyproject)
        })
    }

    /// Reads a configuration file and applies the command line on top.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Settings, LintError> {
        let (table, root, config_path) = match path {
            Some(p) => {
                // A FIFO or `/dev/zero` named with `--config` must not hang the run.
                let text = devcheck_files::read_limited(p, MAX_CONFIG_BYTES)
                    .map_err(std::io::Error::other)
                    .and_then(|bytes| String::from_utf8(bytes).map_err(std::io::Error::other))
                    .map_err(|source| LintError::Io { path: p.to_path_buf(), source })?;
                let invalid = |e: toml::de::Error, table: &str| {
                    LintError::Config(Box::new(ConfigError {
                        path: p.to_path_buf(),
                        message: e.message().to_string(),
                        help: format!(
                            "the `{table}` table takes select, ignore, api, fail-on, preview, target, \
                             exclude, severity and per-file-ignores"
                        ),
                        span: e.span().map(|s| SourceSpan::from(s.start..s.end)),
                        src: NamedSource::new(p.display().to_string(), text.clone()),
                    }))
                };
                // `pyproject.toml` holds the same tables under `[tool.devcheck]`.
                let file: ConfigFile = if is_pyproject(p) {
                    toml::from_str::<PyProject>(&text)
                        .map_err(|e| invalid(e, "[tool.devcheck.lint]"))?
                        .tool
                        .devcheck
                        .unwrap_or_default()
                } else {
                    toml::from_str(&text).map_err(|e| invalid(e, "[lint]"))?
                };
                let root = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from("."));
                (file.lint, root, Some(p.to_path_buf()))
            }
            None => (LintTable::default(), PathBuf::from("."), None),
        };
        Self::from_table(table, root, config_path, overrides)
    }

    pub fn from_table(
        table: LintTable,
        root: PathBuf,
        config_path: Option<PathBuf>,
        overrides: &Overrides,
    ) -> Result<Settings, LintError> {
        let context = config_path.as_ref().map(|p| p.display().to_string());
        let preview = overrides.preview || table.preview.unwrap_or(false);
        // An unknown code is blamed on where it was written: the command line or the file.
        let (select, select_context) = match &overrides.select {
            Some(list) => (Some(list.clone()), Some("`--select`".to_string())),
            None => (table.select, context.clone()),
        };
        let selected = |lang: Language| -> Result<HashSet<&'static str>, LintError> {
            let Some(list) = &select else { return Ok(default_rules(preview, lang).collect()) };
            let mut set: HashSet<&'static str> =
                [registry::PARSE_ERROR.code, registry::INTERNAL_ERROR.code].into_iter().collect();
            for code in list {
                if code.eq_ignore_ascii_case("ALL") {
                    set.extend(default_rules(preview, lang));
                } else {
                    // A rule named on its own runs, preview or not: the user asked for it.
                    let rules = resolve(code, select_context.as_deref())?;
                    set.extend(rules.iter().filter(|r| r.status_in(lang).is_some()).map(|r| r.code));
                }
            }
            Ok(set)
        };
        let mut enabled = selected(Language::Rust)?;
        let mut enabled_python = selected(Language::Python)?;
        let file_ignores = table.ignore.iter().flatten().map(|c| (c, context.as_deref()));
        let cli_ignores = overrides.ignore.iter().map(|c| (c, Some("`--ignore`")));
        for (code, written_in) in file_ignores.chain(cli_ignores) {
            for rule in resolve(code, written_in)? {
                // An internal error is never silenced: it means the results are incomplete.
                if rule.code != registry::INTERNAL_ERROR.code {
                    enabled.remove(rule.code);
                    enabled_python.remove(rule.code);
                }
            }
        }
        let mut severity = BTreeMap::new();
        for (code, level) in table.severity.unwrap_or_default() {
            for rule in resolve(&code, context.as_deref())? {
                severity.insert(rule.code, level);
            }
        }
        let mut per_file_ignores = Vec::new();
        for (pattern, codes) in table.per_file_ignores.unwrap_or_default() {
            let mut set = HashSet::new();
            for code in &codes {
                set.extend(resolve(code, context.as_deref())?.iter().map(|r| r.code));
            }
            per_file_ignores.push((glob_set(std::slice::from_ref(&pattern))?, set));
        }
        let exclude = glob_set(table.exclude.as_deref().unwrap_or(&[]))?;
        Ok(Settings {
            enabled,
            enabled_python,
            severity,
            per_file_ignores,
            exclude,
            root,
            api: overrides.api.or(table.api),
            fail_on: overrides.fail_on.or(table.fail_on).unwrap_or(Severity::Error),
            preview,
            target: overrides.target.or(table.target),
            config_path,
        })
    }

    /// Whether a rule runs on some file (before per-file ignores).
    pub fn is_enabled(&self, code: &str) -> bool {
        self.enabled.contains(code) || self.enabled_python.contains(code)
    }

    /// Whether a rule runs on files of `lang` (before per-file ignores).
    pub fn is_enabled_in(&self, code: &str, lang: Language) -> bool {
        self.language_set(lang).contains(code)
    }

    /// Whether any rule (not only the file-level `D000`/`D999`) runs on files of `lang`.
    pub fn checks_language(&self, lang: Language) -> bool {
        self.language_set(lang)
            .iter()
            .any(|c| *c != crate::registry::PARSE_ERROR.code && *c != crate::registry::INTERNAL_ERROR.code)
    }

    fn language_set(&self, lang: Language) -> &HashSet<&'static str> {
        match lang {
            Language::Rust => &self.enabled,
            Language::Python => &self.enabled_python,
        }
    }

    /// The rules enabled for this file (after `select`, `ignore` and per-file ignores).
    /// (Borrowed unless a per-file ignore applies: most files share their language's set.)
    pub fn enabled_for(&self, path: &Path) -> Cow<'_, HashSet<&'static str>> {
        let mut enabled = Cow::Borrowed(self.language_set(Language::of_named_file(path)));
        if !self.per_file_ignores.is_empty() {
            let rel = self.relative(path);
            for (glob, codes) in &self.per_file_ignores {
                if matches(glob, &rel) {
                    enabled.to_mut().retain(|c| !codes.contains(c));
                }
            }
        }
        enabled
    }

    pub fn is_excluded(&self, path: &Path) -> bool {
        !self.exclude.is_empty() && matches(&self.exclude, &self.relative(path))
    }

    pub fn severity(&self, rule: &RuleMeta) -> Severity {
        self.severity.get(rule.code).copied().unwrap_or_else(|| rule.default_severity())
    }

    fn relative(&self, path: &Path) -> PathBuf {
        let abs = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let root = abs(&self.root);
        let file = abs(path);
        file.strip_prefix(&root).map(Path::to_path_buf).unwrap_or_else(|_| path.to_path_buf())
    }
}

/// The rules that run on `lang` when none are selected: the stable ones, and the preview ones
/// with preview.
fn default_rules(preview: bool, lang: Language) -> impl Iterator<Item = &'static str> {
    registry::all()
        .iter()
        .filter(move |r| r.status_in(lang).is_some_and(|s| preview || !s.is_preview()))
        .map(|r| r.code)
}

/// Matches a path, or for patterns without a `/`, its file name.
fn matches(set: &GlobSet, rel: &Path) -> bool {
    let rel_str = rel.to_string_lossy().replace('\\', "/");
    let rel_str = rel_str.strip_prefix("./").unwrap_or(&rel_str);
    set.is_match(rel_str) || rel.file_name().is_some_and(|n| set.is_match(n))
}

fn glob_set(patterns: &[String]) -> Result<GlobSet, LintError> {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        let glob = Glob::new(p)
            .map_err(|e| LintError::Glob { pattern: p.clone(), message: e.kind().to_string() })?;
        builder.add(glob);
        // `dir/**` should also match `dir` itself and `dir/` written without the stars.
        if !p.contains('*') && !p.ends_with(".rs") {
            let dir = format!("{}/**", p.trim_end_matches('/'));
            if let Ok(g) = Glob::new(&dir) {
                builder.add(g);
            }
        }
    }
    builder
        .build()
        .map_err(|e| LintError::Glob { pattern: patterns.join(", "), message: e.kind().to_string() })
}

/// A code, a name or `ALL` → rules.
fn resolve(code: &str, context: Option<&str>) -> Result<Vec<&'static RuleMeta>, LintError> {
    if code.eq_ignore_ascii_case("ALL") {
        return Ok(registry::all().to_vec());
    }
    registry::lookup(code).map(|r| vec![r]).ok_or_else(|| LintError::UnknownRule {
        code: code.to_string(),
        context: context.map(str::to_string),
        valid: registry::rules().map(|r| r.code).collect::<Vec<_>>().join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(table: LintTable, overrides: Overrides) -> Settings {
        Settings::from_table(table, PathBuf::from("."), None, &overrides).expect("valid settings")
    }

    #[test]
    fn preview_is_off_unless_asked_for_in_the_file_or_on_the_command_line() {
        assert!(!Settings::default().preview);
        assert!(!settings(LintTable::default(), Overrides::default()).preview);
        let on_file = LintTable { preview: Some(true), ..LintTable::default() };
        assert!(settings(on_file, Overrides::default()).preview);
        let on_cli = Overrides { preview: true, ..Overrides::default() };
        assert!(settings(LintTable { preview: Some(false), ..LintTable::default() }, on_cli).preview);
    }

    #[test]
    fn default_and_all_run_only_stable_rules_without_preview_and_every_rule_with_it() {
        let without = settings(LintTable::default(), Overrides::default());
        let all = settings(
            LintTable::default(),
            Overrides { select: Some(vec!["ALL".into()]), ..Overrides::default() },
        );
        let with = settings(LintTable::default(), Overrides { preview: true, ..Overrides::default() });
        for lang in Language::ALL {
            for r in registry::all() {
                let status = r.status_in(lang);
                let stable = status.is_some_and(|s| !s.is_preview());
                assert_eq!(without.is_enabled_in(r.code, lang), stable, "{} {lang:?}", r.code);
                assert_eq!(all.is_enabled_in(r.code, lang), stable, "{} {lang:?}", r.code);
                assert_eq!(with.is_enabled_in(r.code, lang), status.is_some(), "{} {lang:?}", r.code);
            }
        }
    }

    #[test]
    fn a_python_file_gets_the_python_rules_and_a_rust_file_the_rust_ones() {
        let with = settings(LintTable::default(), Overrides { preview: true, ..Overrides::default() });
        let py = with.enabled_for(Path::new("model.py"));
        let rs = with.enabled_for(Path::new("model.rs"));
        assert!(py.contains("D008") && py.contains("D001") && py.contains("D000"));
        assert!(!rs.contains("D008") && rs.contains("D001"));
        // A file named on the command line with another extension is linted as Rust.
        assert_eq!(with.enabled_for(Path::new("model.txt")), rs);
    }

    #[test]
    fn a_rule_selected_by_its_code_runs_even_in_preview() {
        for r in registry::rules() {
            let one = settings(
                LintTable::default(),
                Overrides { select: Some(vec![r.code.to_string()]), ..Overrides::default() },
            );
            assert!(one.is_enabled(r.code));
        }
    }
}
