//! README's ecosystem table is what `scripts/ecosystem.py --table` prints from the stored labels
//! (`fixtures/ecosystem/*.tsv`: tuning and held-out repositories side by side, ARGUABLE counted as
//! false), and no rule is stable in a language where its strict precision on held-out code is
//! below 0.9. Only committed files are read: no repository needs to be checked out.

use std::collections::BTreeMap;
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

/// repo -> `tuning` or `heldout` (fixtures/ecosystem/split.tsv).
fn split() -> BTreeMap<String, String> {
    read("fixtures/ecosystem/split.tsv")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("repo\t"))
        .filter_map(|l| l.split_once('\t'))
        .map(|(repo, split)| (repo.to_string(), split.to_string()))
        .collect()
}

/// A finding counts for the language of its file, whatever the repository's language.
fn file_lang(path: &str) -> &'static str {
    // A notebook's findings are stored as `path.ipynb (cell N)`.
    if path.ends_with(".py") || path.contains(".ipynb") { "python" } else { "rust" }
}

type Row = BTreeMap<String, String>;

/// `default` when a plain run reports the rule in these rows (it is stable there), else `--preview`.
fn run_of(rows: &[&Row]) -> &'static str {
    if rows.iter().any(|r| r["group"] == "stable" && r["label"] != "MISS") { "default" } else { "--preview" }
}

/// (true, arguable, false, found, known) for the run, as the script counts them.
fn measure(rows: &[&Row], run: &str) -> (usize, usize, usize, usize, usize) {
    let counted: Vec<&&Row> = rows
        .iter()
        .filter(|r| r["label"] != "MISS" && (run == "--preview" || r["group"] == "stable"))
        .collect();
    let n = |label: &str| counted.iter().filter(|r| r["label"] == label).count();
    let known = rows.iter().filter(|r| r["label"] == "TRUE" || r["label"] == "MISS").count();
    (n("TRUE"), n("ARGUABLE"), n("FALSE"), n("TRUE"), known)
}

fn precision(t: usize, a: usize, f: usize) -> String {
    let n = t + a + f;
    if n == 0 { "-".to_string() } else { format!("{:.2} ({n})", t as f64 / n as f64) }
}

fn recall(found: usize, known: usize) -> String {
    if known == 0 { "-".to_string() } else { format!("{:.2} ({found}/{known})", found as f64 / known as f64) }
}

fn findings() -> Vec<Row> {
    rows(
        "fixtures/ecosystem/findings.tsv",
        &["repo", "commit", "path", "line", "code", "label", "reason", "group"],
    )
}

/// What `scripts/ecosystem.py --table` prints.
fn table() -> String {
    let repos = rows("fixtures/ecosystem/repos.tsv", &["repo", "commit", "lang", "api", "what"]);
    let findings = findings();
    let split = split();
    let part = |repo: &str| split.get(repo).map_or("tuning", String::as_str).to_string();
    let mut parts = Vec::new();
    for (lang, title) in [("rust", "Rust"), ("python", "PyTorch")] {
        let of: Vec<&Row> = repos.iter().filter(|r| r["lang"] == lang).collect();
        let held = of.iter().filter(|r| part(&r["repo"]) == "heldout").count();
        parts.push(format!(
            "{} {title} repositories ({} tuning, {held} held out)",
            of.len(),
            of.len() - held
        ));
    }
    let labelled = findings.iter().filter(|r| r["label"] != "?").count();
    let mut out = format!("{} and {}; {labelled} places labelled by reading.\n\n", parts[0], parts[1]);
    out.push_str("| rule | language | run | precision, tuning | precision, held-out | recall, held-out |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    let mut by: BTreeMap<(String, &str), Vec<&Row>> = BTreeMap::new();
    for r in &findings {
        by.entry((r["code"].clone(), file_lang(&r["path"]))).or_default().push(r);
    }
    for ((code, lang), rows) in &by {
        let run = run_of(rows);
        let of = |p: &str| -> Vec<&Row> { rows.iter().copied().filter(|r| part(&r["repo"]) == p).collect() };
        let (t, a, f, _, _) = measure(&of("tuning"), run);
        let (ht, ha, hf, found, known) = measure(&of("heldout"), run);
        out.push_str(&format!(
            "| {code} | {lang} | {run} | {} | {} | {} |\n",
            precision(t, a, f),
            precision(ht, ha, hf),
            recall(found, known)
        ));
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

/// Status follows the held-out figures: a rule a plain run reports in a language has a strict
/// precision of at least 0.9 on the held-out repositories' findings there, or it is preview in
/// that language. And every finding is labelled.
#[test]
fn a_rule_below_the_stable_precision_on_held_out_code_is_preview() {
    let findings = findings();
    assert!(findings.iter().all(|r| r["label"] != "?"), "unlabelled findings: label them by reading");
    let split = split();
    let mut by: BTreeMap<(String, &str), Vec<&Row>> = BTreeMap::new();
    for r in &findings {
        if split.get(&r["repo"]).is_some_and(|s| s == "heldout") {
            by.entry((r["code"].clone(), file_lang(&r["path"]))).or_default().push(r);
        }
    }
    for ((code, lang), rows) in by {
        if run_of(&rows) != "default" {
            continue;
        }
        let (t, a, f, _, _) = measure(&rows, "default");
        if t + a + f == 0 {
            continue;
        }
        let precision = t as f64 / (t + a + f) as f64;
        let rule = registry::lookup(&code).unwrap_or_else(|| panic!("{code} is not a rule"));
        let language =
            if lang == "python" { devcheck_lint::Language::Python } else { devcheck_lint::Language::Rust };
        assert!(
            precision >= STABLE_PRECISION || rule.status_in(language).is_some_and(|s| s.is_preview()),
            "{code} is stable in {lang} with a strict precision of {precision:.2} on held-out code (below {STABLE_PRECISION})"
        );
    }
}

/// A preview rule says why in `explain`: where it has at least three findings on the held-out
/// repositories of a language, its text there gives their strict precision and count
/// (`0.83 .. (15 of 18)`), as the stored labels have them.
#[test]
fn a_preview_rule_states_its_held_out_figures() {
    let findings = findings();
    let split = split();
    let mut by: BTreeMap<(String, &str), Vec<&Row>> = BTreeMap::new();
    for r in &findings {
        if split.get(&r["repo"]).is_some_and(|s| s == "heldout") {
            by.entry((r["code"].clone(), file_lang(&r["path"]))).or_default().push(r);
        }
    }
    for ((code, lang), rows) in by {
        let (t, a, f, _, _) = measure(&rows, "--preview");
        let n = t + a + f;
        let rule = registry::lookup(&code).unwrap_or_else(|| panic!("{code} is not a rule"));
        let language =
            if lang == "python" { devcheck_lint::Language::Python } else { devcheck_lint::Language::Rust };
        let Some(registry::Status::Preview(why)) = rule.status_in(language) else { continue };
        if n < 3 {
            continue;
        }
        let p = format!("{:.2}", t as f64 / n as f64);
        let count = format!("{t} of {n}");
        assert!(
            why.contains(&p) && why.contains(&count) && why.contains("held-out"),
            "{code} in {lang}: the preview text should give the held-out precision {p} ({count}): {why}"
        );
    }
}
