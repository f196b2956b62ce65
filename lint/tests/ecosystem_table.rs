//! README's ecosystem table is what `scripts/ecosystem.py --table` prints from the stored labels
//! (`fixtures/ecosystem/*.tsv`), and no rule is stable with a precision below 0.9 there. Only
//! committed files are read: no repository needs to be checked out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use devcheck_lint::registry;

const START: &str = "<!-- ecosystem-table: scripts/ecosystem.py --table -->";
const END: &str = "<!-- /ecosystem-table -->";
/// The precision a rule needs on the ecosystem check to be on by default.
const STABLE_PRECISION: f64 = 0.9;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Rows of a tab-separated file with these columns, without comments and the header. A finding
/// row written before the `group` column existed reads as a plain run's (`-` for a MISS row).
fn rows(rel: &str, columns: &[&str]) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    for (n, line) in read(rel).lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields: Vec<String> = line.split('\t').map(str::to_string).collect();
        assert!(
            fields.iter().all(|f| !f.starts_with('"')),
            "{rel}:{}: a field starts with a quote, which the script's csv reader would unquote",
            n + 1
        );
        if fields.iter().zip(columns).all(|(f, c)| f == c) {
            continue;
        }
        if columns.last() == Some(&"group") && fields.len() + 1 == columns.len() {
            let group = if fields[5] == "MISS" { "-" } else { "stable" };
            fields.push(group.to_string());
        }
        assert_eq!(fields.len(), columns.len(), "{rel}:{}: expected the columns {columns:?}", n + 1);
        out.push(columns.iter().map(|c| c.to_string()).zip(fields).collect());
    }
    out
}

type Counts = BTreeMap<(String, String), usize>;

fn count(s: &Counts, group: &str, label: &str) -> usize {
    s.get(&(group.to_string(), label.to_string())).copied().unwrap_or(0)
}

fn row_line(code: &str, group: &str, s: &Counts, found: usize, hazards: usize) -> String {
    let (t, f, u) = (count(s, group, "TRUE"), count(s, group, "FALSE"), count(s, group, "?"));
    let precision = if t + f > 0 { format!("{:.2}", t as f64 / (t + f) as f64) } else { "-".to_string() };
    let recall = if hazards > 0 { format!("{:.2}", found as f64 / hazards as f64) } else { "-".to_string() };
    format!(
        "| {code} | {group} | {} | {t} | {f} | {u} | {precision} | {hazards} | {found} | {recall} |",
        t + f + u
    )
}

fn rule_lines(code: &str, s: &Counts) -> Vec<String> {
    let hazards = count(s, "stable", "TRUE") + count(s, "preview", "TRUE") + count(s, "stable", "MISS");
    let reported = |g| ["TRUE", "FALSE", "?"].iter().any(|l| count(s, g, l) > 0);
    if !reported("stable") && !reported("preview") {
        // Nothing reported in either run: the row claims no group (`devcheck explain` says it).
        return vec![row_line(code, "-", s, 0, hazards)];
    }
    let mut out = vec![row_line(code, "stable", s, count(s, "stable", "TRUE"), hazards)];
    if reported("preview") {
        let found = count(s, "stable", "TRUE") + count(s, "preview", "TRUE");
        out.push(row_line(code, "preview", s, found, hazards));
        if !reported("stable") {
            out.remove(0);
        }
    }
    out
}

/// A finding counts for the language of its file, whatever the repository's language.
fn file_lang(path: &str) -> &'static str {
    if path.ends_with(".py") { "python" } else { "rust" }
}

/// Per rule and group, for the findings in one language's files.
fn stats(findings: &[BTreeMap<String, String>]) -> BTreeMap<String, Counts> {
    let mut stats: BTreeMap<String, Counts> = BTreeMap::new();
    for r in findings {
        let group = if r["label"] == "MISS" { "stable" } else { r["group"].as_str() };
        *stats
            .entry(r["code"].clone())
            .or_default()
            .entry((group.to_string(), r["label"].clone()))
            .or_default() += 1;
    }
    stats
}

/// What `scripts/ecosystem.py --table` prints.
fn table() -> String {
    let repos = rows("fixtures/ecosystem/repos.tsv", &["repo", "commit", "lang", "api", "what"]);
    let findings = rows(
        "fixtures/ecosystem/findings.tsv",
        &["repo", "commit", "path", "line", "code", "label", "reason", "group"],
    );
    let mut out = String::new();
    for lang in ["rust", "python"] {
        let names: BTreeSet<&str> =
            repos.iter().filter(|r| r["lang"] == lang).map(|r| r["repo"].as_str()).collect();
        let of_lang: Vec<_> = findings.iter().filter(|r| file_lang(&r["path"]) == lang).cloned().collect();
        if of_lang.is_empty() {
            continue;
        }
        let others: BTreeSet<&str> =
            of_lang.iter().map(|r| r["repo"].as_str()).filter(|r| !names.contains(r)).collect();
        let stats = stats(&of_lang);
        let mut lines = vec![
            "| rule | group | findings | true | false | unlabelled | precision | known hazards | found | recall |"
                .to_string(),
            "|---|---|---|---|---|---|---|---|---|---|".to_string(),
        ];
        let mut total = Counts::new();
        for (code, s) in &stats {
            for (k, n) in s {
                *total.entry(k.clone()).or_default() += n;
            }
            lines.extend(rule_lines(code, s));
        }
        lines.extend(rule_lines("all", &total));
        let ext = if lang == "python" { ".py" } else { ".rs" };
        let extra = match others.len() {
            0 => String::new(),
            1 => format!(" (and the {ext} files of 1 other)"),
            n => format!(" (and the {ext} files of {n} others)"),
        };
        out.push_str(&format!("{lang}: {} repositories{extra}\n\n{}\n\n", names.len(), lines.join("\n")));
    }
    out
}

fn readme_block() -> String {
    let readme = read("README.md");
    let start = readme.find(START).unwrap_or_else(|| panic!("README.md has no `{START}` line"));
    let rest = &readme[start + START.len()..];
    let end = rest.find(END).unwrap_or_else(|| panic!("README.md has no `{END}` line after the table"));
    rest[..end].trim().to_string()
}

#[test]
fn readme_shows_the_ecosystem_table_of_the_stored_labels() {
    let want = table();
    assert_eq!(
        readme_block(),
        want.trim(),
        "README's ecosystem table is out of date: replace the block with `python3 scripts/ecosystem.py --table`"
    );
    // The script itself, where Python is at hand, prints the same.
    if let Ok(out) =
        std::process::Command::new("python3").arg(root().join("scripts/ecosystem.py")).arg("--table").output()
        && out.status.success()
    {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want.trim(), "the script's table differs");
    }
}

#[test]
fn a_rule_below_the_stable_precision_on_rust_code_is_preview() {
    let findings = rows(
        "fixtures/ecosystem/findings.tsv",
        &["repo", "commit", "path", "line", "code", "label", "reason", "group"],
    );
    let of_rust: Vec<_> = findings.into_iter().filter(|r| file_lang(&r["path"]) == "rust").collect();
    for (code, s) in stats(&of_rust) {
        let (t, f) = (count(&s, "stable", "TRUE"), count(&s, "stable", "FALSE"));
        assert_eq!(count(&s, "stable", "?") + count(&s, "preview", "?"), 0, "{code}: unlabelled findings");
        if t + f == 0 {
            continue;
        }
        let precision = t as f64 / (t + f) as f64;
        let rule = registry::lookup(&code).unwrap_or_else(|| panic!("{code} is not a rule"));
        assert!(
            precision >= STABLE_PRECISION || rule.status.is_preview(),
            "{code} is stable with a precision of {precision:.2} on the ecosystem check (below {STABLE_PRECISION})"
        );
    }
}
