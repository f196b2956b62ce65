//! Hostile Python files: nestings thousands deep of every kind ruff's parser recurses on, huge
//! lines, bytes that are not UTF-8, syntax errors, random token soups. The linter never crashes
//! (a stack overflow would end this test binary): a file it cannot analyse is a `D000` at the
//! place, every other file of the run is still linted, every output format renders, and fixing
//! in memory finishes with an outcome per file.
//!
//! Cases per property: 32, or `PROPTEST_CASES` (`PROPTEST_CASES=5000 cargo test -p
//! devcheck-lint --test lint_hostile_python` for a long run).

use std::path::{Path, PathBuf};

use devcheck_lint::output::{Format, RenderOptions, render};
use devcheck_lint::{
    FileReport, FixMode, LintTable, Overrides, Settings, apply_fixes, lint_paths, lint_source,
};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(32);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Every rule, preview included: the Python rules are preview.
fn preview() -> Settings {
    let overrides = Overrides { preview: true, ..Overrides::default() };
    Settings::from_table(LintTable::default(), PathBuf::from("."), None, &overrides).expect("settings")
}

/// A PyTorch module whose forward holds `body`, so every rule looks at it.
fn in_forward(body: &str) -> String {
    format!(
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        \
         y = {body}\n        return torch.zeros(3) + x\n"
    )
}

/// A module that every rule flags (the project also offers MPS, so `.cuda()` is a D002): it must
/// still be reported beside a hostile file.
const FLAGGED: &str = "import torch\n\n\ndef shift(x: torch.Tensor):\n    x.cuda()\n    return x\n\n\nDEVICES = (\"cuda\", \"mps\")\n";

/// Lints `files` (name, bytes) as one run, with every rule.
fn run_of(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Vec<FileReport>) {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).expect("write");
    }
    let run = lint_paths(&[dir.path().to_path_buf()], &preview()).expect("the run finishes");
    assert_eq!(run.files.len(), files.len());
    (dir, run.files)
}

fn report<'r>(reports: &'r [FileReport], name: &str) -> &'r FileReport {
    reports.iter().find(|r| r.disk_path.ends_with(name)).unwrap_or_else(|| panic!("no report for {name}"))
}

fn only_d000(report: &FileReport, containing: &str) {
    assert_eq!(report.diagnostics.len(), 1, "{:?}", report.diagnostics);
    let d = &report.diagnostics[0];
    assert_eq!(d.code, "D000");
    assert!(d.message.contains(containing), "{}", d.message);
}

fn still_linted(reports: &[FileReport]) {
    let ok = report(reports, "ok.py");
    assert!(ok.diagnostics.iter().any(|d| d.code == "D003"), "{:?}", ok.diagnostics);
}

#[test]
fn nestings_far_past_the_limit_are_refused_at_their_place() {
    let n = 200_000;
    let deep: Vec<(&str, String)> = vec![
        ("paren.py", in_forward(&format!("{}x{}", "(".repeat(n), ")".repeat(n)))),
        ("add.py", in_forward(&vec!["x"; n].join(" + "))),
        ("power.py", in_forward(&vec!["x"; n].join("**"))),
        ("not.py", in_forward(&format!("{}x", "not ".repeat(n)))),
        ("neg.py", in_forward(&format!("{}x", "-".repeat(n)))),
        ("method.py", in_forward(&format!("x{}", ".to(x)".repeat(n)))),
        ("call.py", in_forward(&format!("x{}", "()".repeat(n)))),
        ("ternary.py", in_forward(&format!("{}x", "x if x else ".repeat(n)))),
        ("lambda.py", in_forward(&format!("{}x", "lambda a, b: ".repeat(n)))),
        ("fstring.py", in_forward(&format!("{}x{}", "f\"{".repeat(n), "}\"".repeat(n)))),
        (
            "blocks.py",
            (0..1_500).map(|l| format!("{}if x:\n", " ".repeat(l))).collect::<String>()
                + &" ".repeat(1_500)
                + "x\n",
        ),
    ];
    let mut files: Vec<(&str, Vec<u8>)> = deep.iter().map(|(n, t)| (*n, t.clone().into_bytes())).collect();
    files.push(("ok.py", FLAGGED.into()));
    let (_dir, reports) = run_of(&files);
    for (name, text) in &deep {
        let r = report(&reports, name);
        only_d000(r, "too deeply nested");
        // Located at the token that went past the limit, not at the top of the file.
        let at = r.diagnostics[0].range.start;
        assert!(at > 0 && at < text.len(), "{name}: {at}");
    }
    still_linted(&reports);
}

#[test]
fn a_huge_line_is_linted() {
    // 2 MB on one line: a list of a quarter of a million numbers, and a hazard at its end.
    let numbers = vec!["1.0"; 250_000].join(", ");
    let text =
        format!("import torch\n\n\ndef f(x: torch.Tensor):\n    w = [{numbers}]; x.cuda()\n    return w\n");
    let (_dir, reports) = run_of(&[("huge.py", text.clone().into_bytes()), ("ok.py", FLAGGED.into())]);
    let r = report(&reports, "huge.py");
    let d003: Vec<_> = r.diagnostics.iter().filter(|d| d.code == "D003").collect();
    assert_eq!(d003.len(), 1, "{:?}", r.diagnostics);
    assert_eq!(d003[0].start.line, 5);
    assert_eq!(&text[d003[0].range.clone()], "x.cuda()");
    // Shown in a window around the finding, never the whole line.
    let human =
        render(&devcheck_lint::LintRun::from(vec![r.clone()]), Format::Human, RenderOptions::default());
    assert!(human.len() < 10_000, "{} bytes", human.len());
}

#[test]
fn a_file_over_the_size_limit_is_refused() {
    let big = format!("import torch\n# {}\n", "x".repeat(devcheck_lint::MAX_FILE_BYTES));
    let (_dir, reports) = run_of(&[("big.py", big.into_bytes()), ("ok.py", FLAGGED.into())]);
    only_d000(report(&reports, "big.py"), "more than the limit");
    still_linted(&reports);
}

#[test]
fn bytes_that_are_not_utf8_are_a_d000_and_the_run_goes_on() {
    let mut latin1 = b"import torch\n# caf".to_vec();
    latin1.extend_from_slice(&[0xE9, b'\n']);
    latin1.extend_from_slice(b"x = torch.zeros(3).cuda()\n");
    let (_dir, reports) = run_of(&[("latin1.py", latin1), ("ok.py", FLAGGED.into())]);
    let r = report(&reports, "latin1.py");
    assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
    assert_eq!(r.diagnostics[0].code, "D000");
    assert!(r.diagnostics[0].message.contains("UTF-8"), "{}", r.diagnostics[0].message);
    still_linted(&reports);
}

#[test]
fn syntax_errors_are_located_and_the_run_goes_on() {
    let cases: &[(&str, &str, &str)] = &[
        ("unclosed.py", "import torch\nx = torch.zeros((3, 4)\ny = 1\n", "y"),
        ("indent.py", "import torch\ndef f():\nreturn torch.zeros(3)\n", "return"),
        ("string.py", "import torch\nx = 'abc\n", "'abc"),
        ("fstring.py", "import torch\nx = f\"{1 +}\"\n", "}"),
        ("python2.py", "import torch\nprint 'hello'\n", "'hello'"),
        ("nul.py", "import torch\nx = 1\0\n", "\0"),
    ];
    let mut files: Vec<(&str, Vec<u8>)> = cases.iter().map(|(n, t, _)| (*n, t.as_bytes().to_vec())).collect();
    files.push(("ok.py", FLAGGED.into()));
    let (_dir, reports) = run_of(&files);
    for (name, text, at) in cases {
        let r = report(&reports, name);
        assert_eq!(r.diagnostics.len(), 1, "{name}: {:?}", r.diagnostics);
        let d = &r.diagnostics[0];
        assert_eq!(d.code, "D000", "{name}");
        assert!(d.help.as_deref().is_some_and(|h| h.contains("py_compile")), "{name}: {:?}", d.help);
        let found = &text[d.range.start..];
        assert!(found.starts_with(at), "{name}: the error is at {found:?}, expected {at:?}");
    }
    still_linted(&reports);
}

#[test]
fn odd_but_valid_files_parse() {
    let bom = format!("\u{feff}{FLAGGED}");
    let crlf = FLAGGED.replace('\n', "\r\n");
    let tabs = FLAGGED.replace("    ", "\t");
    let continued = "import torch\n\n\ndef f(x: torch.Tensor):\n    y = x \\\n        + 1\n    x.cuda()\n    return y\n\n\nDEVICES = (\"cuda\", \"mps\")\n";
    for (name, text) in
        [("bom.py", bom.as_str()), ("crlf.py", &crlf), ("tabs.py", &tabs), ("cont.py", continued)]
    {
        let r = lint_source(name, text, &preview());
        let codes: Vec<&str> = r.diagnostics.iter().map(|d| d.code).collect();
        // `x.cuda()` in library code: a discarded move (D003) of the current CUDA device (D002).
        assert_eq!(codes, ["D002", "D003"], "{name}: {:?}", r.diagnostics);
    }
}

/// Pieces of Python and of what is not Python, for soups.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    ";",
    ".",
    "=",
    "==",
    ":=",
    "+",
    "-",
    "*",
    "**",
    "/",
    "//",
    "@",
    "->",
    "~",
    "<",
    ">",
    "!",
    "\\\n",
    "\n",
    "\n    ",
    "\n\t",
    "#",
    "'",
    "\"",
    "'''",
    "\"\"\"",
    "f\"{",
    "}\"",
    "rb'\\'",
    "{{",
    "lambda",
    "not",
    "if",
    "else",
    "for",
    "in",
    "def",
    "class",
    "return",
    "yield",
    "await",
    "async",
    "with",
    "try:",
    "except",
    "import",
    "from",
    "torch",
    "nn.Module",
    "torch.zeros",
    ".cuda()",
    ".to(x)",
    ".item()",
    "self",
    "forward",
    "x",
    "1",
    "1.5e3",
    "0x_f",
    "...",
    "\u{1b}[31m",
    "\u{7}",
    "\u{0}",
    "\u{202e}",
    "é",
    "\u{feff}",
];

/// Pieces that nest, repeated thousands of times.
const OPENERS: &[&str] = &[
    "(",
    "[",
    "{",
    "{1: ",
    "-",
    "~",
    "not ",
    "await ",
    "lambda: ",
    "lambda a, b=(1, 2): ",
    "x if x else ",
    "f\"{",
    "f'{x:{",
    "[x for x in ",
    "(a := ",
    "*",
    "torch.zeros(",
    "x.to(",
    "\\\n(",
];
const POSTFIXES: &[&str] =
    &[".a", "()", "[0]", ".to(x)", " + 1", " ** x", " if x else x", " and x", ".cuda()"];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(TOKENS), prop::bool::ANY), 0..400).prop_map(|parts| {
        parts.into_iter().map(|(t, space)| if space { format!("{t} ") } else { t.to_string() }).collect()
    })
}

fn nesting() -> impl Strategy<Value = String> {
    (prop::sample::select(OPENERS), prop::sample::select(POSTFIXES), 0usize..6_000, 0usize..6_000, soup())
        .prop_map(|(open, post, n, m, noise)| {
            format!("{}\n        {noise}\n", in_forward(&format!("{}x{}", open.repeat(n), post.repeat(m))))
        })
}

fn indentation() -> impl Strategy<Value = String> {
    (0usize..3_000, prop::sample::select(&["if x:", "for x in y:", "def f(x):", "class A:", "with x:"][..]))
        .prop_map(|(n, head)| {
            (0..n).map(|l| format!("{}{head}\n", " ".repeat(l))).collect::<String>()
                + &" ".repeat(n)
                + "x.cuda()\n"
        })
}

/// No byte a terminal acts on besides line breaks and tabs.
fn printable(text: &str) -> bool {
    !text
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c))
}

fn lint_as_a_run(texts: &[String]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, text) in texts.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i}.py")), text).expect("write");
    }
    let settings = preview();
    let mut run = lint_paths(&[dir.path().to_path_buf()], &settings).expect("the run finishes");
    prop_assert_eq!(run.files.len(), texts.len());
    for (i, report) in run.files.iter().enumerate() {
        let name = format!("f{i}.py");
        prop_assert!(report.disk_path.ends_with(Path::new(&name)), "{} is not {}", report.path, name);
        prop_assert!(!report.diagnostics.iter().any(|d| d.code == "D999"), "{:?}", report.diagnostics);
        if report.diagnostics.iter().any(|d| d.code == "D000") {
            prop_assert!(report.diagnostics.iter().all(|d| d.code == "D000"));
        }
    }
    for format in [Format::Human, Format::Concise, Format::Json, Format::Sarif, Format::Github] {
        let out = render(&run, format, RenderOptions::default());
        prop_assert!(printable(&out), "{:?} printed a control character", format);
    }
    let summary = apply_fixes(&mut run, FixMode::Unsafe, &settings, false).expect("fixing finishes");
    prop_assert_eq!(summary.files.len(), texts.len());
    prop_assert!(summary.rejected().next().is_none(), "a fix broke a file");
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn token_soups_never_crash_a_run(texts in prop::collection::vec(soup(), 1..5)) {
        lint_as_a_run(&texts)?;
    }

    #[test]
    fn deep_nestings_are_analysed_or_refused_never_crash(texts in prop::collection::vec(prop_oneof![nesting(), indentation()], 1..4)) {
        lint_as_a_run(&texts)?;
    }
}

/// A module with thousands of attributes (generated code, a wide lookup table): every field is
/// inspected and every plain tensor read in `forward` reported once, at its own line. Fields are
/// looked up by name, not by a scan of the class per field, so this stays linear.
#[test]
fn a_class_with_thousands_of_attributes_is_inspected_and_linted() {
    let n = 5_000;
    let mut text = String::from("import torch\nimport torch.nn as nn\n\n\nclass Wide(nn.Module):\n");
    text.push_str("    def __init__(self):\n        super().__init__()\n");
    for i in 0..n {
        text.push_str(&format!("        self.t{i} = torch.zeros(1)\n        self.layers{i} = []\n"));
        text.push_str(&format!("        self.layers{i}.append(nn.Linear(1, 1))\n"));
    }
    text.push_str("\n    def forward(self, x):\n");
    for i in (0..n).step_by(100) {
        text.push_str(&format!("        x = x + self.t{i} + self.layers{i}[0](x)\n"));
    }
    text.push_str("        return x\n");
    let settings = preview();
    let inspected = devcheck_lint::inspect_source("wide.py", &text, &settings);
    assert_eq!(inspected.structs.len(), 1);
    let fields = &inspected.structs[0].fields;
    assert_eq!(fields.len(), 2 * n);
    assert!(fields.iter().filter(|f| f.name.starts_with("layers")).all(|f| f.fate == "left behind"));
    let report = lint_source("wide.py", &text, &settings);
    let d004: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D004").collect();
    // Each read tensor and each read list of modules, once.
    assert_eq!(d004.len(), 2 * n / 100, "{:?}", &d004[..3.min(d004.len())]);
    assert_eq!(d004[0].start.line, 8, "{:?}", d004[0]);
}

/// A forward pass calling a chain of 10,000 helpers defined last-first, and one function with
/// 10,000 `.cuda()` calls: what the forward pass reaches is found through the whole chain, and
/// each move is judged without scanning the file's calls again (both were quadratic).
#[test]
fn long_call_chains_and_thousands_of_moves_are_linted() {
    let n = 10_000;
    let mut chain = String::from("import torch\nimport torch.nn as nn\n\nproj = nn.Linear(4, 4)\n\n\n");
    chain.push_str(&format!("def f{n}(x):\n    return proj(x) + torch.zeros(4)\n\n\n"));
    for i in (0..n).rev() {
        chain.push_str(&format!("def f{i}(x):\n    return f{}(x)\n\n\n", i + 1));
    }
    chain.push_str("class M(nn.Module):\n    def forward(self, x):\n        return f0(x)\n");
    let settings = preview();
    let report = lint_source("chain.py", &chain, &settings);
    // The tensor made on the default device in the last helper, which only the forward pass
    // (10,000 calls away) makes a place where tensors must follow the input.
    let d001: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D001").collect();
    assert_eq!(d001.len(), 1, "{:?}", report.diagnostics);
    assert_eq!(d001[0].start.line, 8);

    let mut moves = String::from("import torch\n\n\ndef f(x: torch.Tensor):\n");
    for i in 0..n {
        moves.push_str(&format!("    y{i} = x.cuda()\n"));
    }
    moves.push_str("    return x\n\n\nDEVICES = (\"cuda\", \"mps\")\n");
    let report = lint_source("moves.py", &moves, &settings);
    // One cause in one function: reported once, with every place.
    let d002: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D002").collect();
    assert_eq!(d002.len(), 1);
    assert_eq!(d002[0].count(), n);
}

/// Long chains of helpers in the orders that defeat a pass-per-link fixed point: device work at
/// the far end of a chain defined first-to-last (it must reach the training loop at the front),
/// and a hot loop at the front of a chain defined last-first (it must reach every helper), each
/// helper with a hard-coded `.cuda()` (judged from the calls inside its own body, which were
/// found by scanning every call of the file per helper). All three were quadratic.
#[test]
fn device_work_and_hot_loops_spread_through_long_chains_of_helpers() {
    let n = 10_000;
    let settings = preview();

    let mut work = String::from("import torch\n\ndevice = torch.device(\"cuda\")\n\n\n");
    for i in 0..n {
        work.push_str(&format!("def f{i}(x, loss):\n    return f{}(x, loss)\n\n\n", i + 1));
    }
    work.push_str(&format!("def f{n}(x, loss):\n    loss.backward()\n    return x\n\n\n"));
    work.push_str(
        "def fit(loader, loss):\n    for x in loader:\n        x = x.to(device)\n        f0(x, loss)\n        print(x.sum().item())\n",
    );
    let report = lint_source("steps.py", &work, &settings);
    // The loop queues device work only through the 10,000 calls, so its `.item()` is per step.
    let d005: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D005").collect();
    assert_eq!(d005.len(), 1, "{:?}", report.diagnostics);
    assert_eq!(d005[0].start.line, 4 * n + 15);

    let mut hot = String::from("import torch\nimport torch.nn as nn\n\nnet = nn.Linear(4, 4)\n\n\n");
    hot.push_str(&format!("def f{n}(x):\n    return x\n\n\n"));
    for i in (0..n).rev() {
        hot.push_str(&format!(
            "def f{i}(x):\n    y = x.cuda()\n    print(y.sum().item())\n    return f{}(y)\n\n\n",
            i + 1
        ));
    }
    hot.push_str("def fit(loader):\n    for x in loader:\n        net(x)\n        f0(x)\n\n\nDEVICES = (\"cuda\", \"mps\")\n");
    let report = lint_source("helpers.py", &hot, &settings);
    // Every helper runs at every step, however far down the chain: each `.item()` is reported,
    // and each `.cuda()` is judged in library code.
    let count = |code: &str| report.diagnostics.iter().filter(|d| d.code == code).count();
    assert_eq!(count("D005"), n, "{:?}", &report.diagnostics[..3.min(report.diagnostics.len())]);
    assert_eq!(count("D002"), n);
}

/// One training loop with 20,000 losses put into a dict and 20,000 reads of them: each read is
/// judged without scanning the loop's statements again (both the container's puts and the
/// explicit wait before a read were looked for by a scan per read: quadratic).
#[test]
fn thousands_of_reads_and_container_puts_in_one_loop_are_linted() {
    let n = 20_000;
    let mut text = String::from(
        "import torch\n\n\ndef train(model, opt, loader, device):\n    d = {}\n    for x in loader:\n        \
         out = model(x.to(device))\n        out.sum().backward()\n        opt.step()\n",
    );
    for i in 0..n {
        text.push_str(&format!("        d['k{i}'] = out\n"));
    }
    for i in 0..n {
        text.push_str(&format!("        print(d['k{i}'].item())\n"));
    }
    let report = lint_source("reads.py", &text, &preview());
    let d005: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D005").collect();
    // One cause in one function: reported once, with every place.
    assert_eq!(d005.len(), 1, "{:?}", &report.diagnostics[..3.min(report.diagnostics.len())]);
    assert_eq!(d005[0].count(), n);
    assert_eq!(d005[0].start.line, 10 + n);
}

/// Values that fan out: two lists appended to each other over and over, lists of lists of the
/// previous list, and tuples of tuples of a name. Each question about where a value is (on the
/// device, or only on the host) stops after a bounded number of steps; before the bound, each
/// of these took from seconds to minutes (exponential in the nesting).
#[test]
fn containers_of_containers_are_judged_in_bounded_time() {
    let settings = preview();
    let mut mutual = String::from(
        "import torch\n\n\ndef train(model, loader, opt):\n    for x in loader:\n        x = x.cuda()\n        a = []\n        b = []\n",
    );
    for _ in 0..16 {
        mutual.push_str("        a.append(b)\n        b.append(a)\n");
    }
    mutual.push_str("        opt.step()\n        print(torch.stack(a).sum().item())\n");
    let report = lint_source("mutual.py", &mutual, &settings);
    assert!(report.diagnostics.iter().all(|d| d.code != "D000"), "{:?}", report.diagnostics);

    let mut nested = String::from(
        "import torch\n\n\ndef train(loader, opt):\n    for x in loader:\n        a0 = [x.cuda()]\n",
    );
    for i in 1..20 {
        let items = vec![format!("a{}", i - 1); 8].join(", ");
        nested.push_str(&format!("        a{i} = [{items}]\n"));
    }
    nested.push_str("        opt.step()\n        print(torch.stack(a19).sum().item())\n");
    let report = lint_source("nested.py", &nested, &settings);
    assert!(report.diagnostics.iter().all(|d| d.code != "D000"), "{:?}", report.diagnostics);

    // Whether a helper returns host values is asked of every function of the project when the
    // index is built: tuples of tuples there too.
    let mut tuples = String::from("import torch\n\n\ndef f():\n    a0 = 1\n");
    for i in 1..24 {
        let items = vec![format!("a{}", i - 1); 4].join(", ");
        tuples.push_str(&format!("    a{i} = ({items})\n"));
    }
    tuples.push_str("    return a23\n");
    let (_dir, reports) = run_of(&[("tuples.py", tuples.into_bytes()), ("ok.py", FLAGGED.into())]);
    still_linted(&reports);
}

/// One log line formatting a device tensor tens of thousands of times: each place is judged
/// without walking the whole statement again (it took seconds, quadratic in the places).
#[test]
fn a_statement_with_thousands_of_formatted_tensors_is_linted() {
    let n = 40_000;
    let mut text = String::from(
        "import torch\n\n\ndef train(model, opt, loader, device):\n    for x in loader:\n        \
         loss = model(x.to(device)).sum()\n        loss.backward()\n        opt.step()\n        print(f\"",
    );
    for _ in 0..n {
        text.push_str("{loss}");
    }
    text.push_str("\")\n");
    let report = lint_source("fmt.py", &text, &preview());
    let d005: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D005").collect();
    assert_eq!(d005.len(), 1, "{:?}", &report.diagnostics[..3.min(report.diagnostics.len())]);
    assert_eq!(d005[0].count(), n);
}

/// Calls at every step to a method of another file's class with thousands of distinct keyword
/// arguments: what the callee is told stays bounded, and a device tensor among them still reaches
/// its `**kwargs`.
#[test]
fn thousands_of_keyword_arguments_to_a_method_of_another_file_are_linted() {
    let n = 20_000;
    let call = |value: &str| {
        let mut s = String::from("        meter.update(");
        for i in 0..n {
            s.push_str(&format!("k{i}=1, "));
        }
        s.push_str(&format!("last={value})\n"));
        s
    };
    let train = format!(
        "import torch\nfrom meters import Meter\n\n\ndef train(model, opt, loader):\n    meter = Meter()\n    \
         for x in loader:\n        loss = model(x.cuda()).sum()\n        loss.backward()\n        opt.step()\n{}{}",
        call("1"),
        call("loss.detach()"),
    );
    let meters = "import torch\n\n\nclass Meter:\n    def update(self, **values):\n        for k, v in values.items():\n            \
                  if isinstance(v, torch.Tensor):\n                v = v.item()\n";
    let (_dir, reports) =
        run_of(&[("train.py", train.into_bytes()), ("meters.py", meters.as_bytes().to_vec())]);
    let found = &report(&reports, "meters.py").diagnostics;
    assert!(found.iter().any(|d| d.code == "D005" && d.start.line == 8), "{found:?}");
}

/// Thousands of calls in one training loop on an instance only a parameter's annotation names,
/// and thousands of assignments of the attribute that holds it: each call is one more call of
/// the other file's method (its line found through the file's line index, not by counting from
/// the start), and the assignments are read once per call.
#[test]
fn thousands_of_calls_on_an_annotated_instance_are_linted() {
    let n = 8_000;
    let mut trainer = String::from(
        "import torch\nfrom agent import Agent\n\n\nclass Learner:\n    def __init__(self, agent: Agent):\n",
    );
    for _ in 0..200 {
        trainer.push_str("        self.agent = agent\n");
    }
    trainer.push_str("\n    def learn(self, opt, xs):\n        for x in xs:\n            x = x.cuda()\n");
    for _ in 0..n {
        trainer.push_str("            self.agent.act(x)\n");
    }
    trainer.push_str(
        "            x.sum().backward()\n            opt.step()\n\n\nLearner(None).learn(None, [])\n",
    );
    let agent = "import torch\n\n\nclass Agent:\n    def act(self, x):\n        if x.sum() > 0:\n            self.seen = x\n        return x\n";
    let (_dir, reports) =
        run_of(&[("trainer.py", trainer.into_bytes()), ("agent.py", agent.as_bytes().to_vec())]);
    let found = &report(&reports, "agent.py").diagnostics;
    assert!(found.iter().any(|d| d.code == "D005" && d.start.line == 6), "{found:?}");
}

/// Module classes that each keep plain lists of the previous ones, many levels over: whether a
/// list's modules hold tensors is worked out once a class, not once per path through them (40
/// items a level, 50 levels: 40^50 paths).
#[test]
fn plain_lists_of_classes_built_from_each_other_are_linted() {
    let (classes, width) = (50, 40);
    let mut text = String::from(
        "import torch\nimport torch.nn as nn\n\n\nclass C0(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.ReLU()\n\n    def forward(self, x):\n        return self.act(x)\n",
    );
    for i in 1..classes {
        let items: Vec<String> = (0..width).map(|_| format!("C{}()", i - 1)).collect();
        text.push_str(&format!(
            "\n\nclass C{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.parts = [{}]\n\n    def forward(self, x):\n        for p in self.parts:\n            x = p(x)\n        return x\n",
            items.join(", ")
        ));
    }
    // The last one holds weights, so its list is reported.
    text.push_str(&format!(
        "\n\nclass Top(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.parts = [C{}(), nn.Linear(2, 2)]\n\n    def forward(self, x):\n        return sum(p(x) for p in self.parts)\n",
        classes - 1
    ));
    let report = lint_source("lists.py", &text, &preview());
    let d004: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D004").collect();
    assert_eq!(d004.len(), 1, "{:?}", &report.diagnostics[..3.min(report.diagnostics.len())]);
    assert_eq!(d004[0].start.line, text.lines().count() - 3);
}

/// A helper of `forward` called from it tens of thousands of times, reading its parameter as
/// often: where its parameters come from is asked of a bounded number of calls.
#[test]
fn a_forward_helper_called_thousands_of_times_is_linted() {
    let n = 20_000;
    let mut text = String::from(
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def helper(self, t):\n        return t.nonzero()\n\n    def forward(self, x):\n        y = 0\n",
    );
    for _ in 0..n {
        text.push_str("        y = y + self.helper(x).sum()\n");
    }
    text.push_str("        return y\n\n\nmodel = M().cuda()\n");
    let report = lint_source("helper.py", &text, &preview());
    let d005: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D005").collect();
    assert_eq!(d005.len(), 1, "{:?}", &report.diagnostics[..3.min(report.diagnostics.len())]);
    assert_eq!(d005[0].start.line, 7);
}

/// A logging gate holding tens of thousands of calls to a helper: whether a call is gated is
/// worked out once per `if`, not once per call (each call looked through the whole gate).
#[test]
fn a_gate_with_thousands_of_calls_is_linted() {
    let n = 40_000;
    let mut text = String::from(
        "import torch\n\n\ndef helper(t):\n    return t.sum().item()\n\n\ndef train(model, opt, loader, device):\n    for step, x in enumerate(loader):\n        loss = model(x.to(device)).sum()\n        loss.backward()\n        opt.step()\n        if step % 100 == 0:\n",
    );
    for _ in 0..n {
        text.push_str("            helper(loss)\n");
    }
    let report = lint_source("gate.py", &text, &preview());
    // Called only every 100 steps: the helper's read is not at every step.
    assert!(
        report.diagnostics.iter().all(|d| d.code != "D005"),
        "{:?}",
        &report.diagnostics[..3.min(report.diagnostics.len())]
    );
}

/// Chains of helpers that each call the next a dozen times, and a helper that calls itself
/// four times, all indexing a CPU table with their parameter: whether the index is on the
/// device follows every caller, within a bounded number of steps (it was exponential: minutes
/// for a 2 KB file). The one real case, a device index passed at the top, is still found.
#[test]
fn chains_of_helpers_called_many_times_are_linted() {
    let (levels, calls) = (12, 12);
    let mut text =
        String::from("import torch\n\n\ndef f0(idx):\n    table = torch.zeros(100)\n    return table[idx]\n");
    for level in 1..levels {
        text.push_str(&format!("\n\ndef f{level}(idx):\n"));
        for k in 0..calls {
            text.push_str(&format!("    f{}(idx + {k})\n", level - 1));
        }
    }
    text.push_str(
        "\n\ndef visit(node, idx):\n    table = torch.zeros(100)\n    out = table[idx]\n    if node.left:\n        visit(node.left, idx)\n    if node.right:\n        visit(node.right, idx)\n    if node.mid:\n        visit(node.mid, idx)\n    if node.a:\n        visit(node.a, idx)\n    return out\n",
    );
    let report = lint_source("chains.py", &text, &preview());
    assert!(report.diagnostics.iter().all(|d| d.code != "D001"), "{:?}", &report.diagnostics);
    // A device index from the top of a short chain is found.
    let found = "import torch\n\n\ndef f0(idx):\n    table = torch.zeros(100)\n    return table[idx]\n\n\ndef f1(idx):\n    return f0(idx + 1)\n\n\ndef main(scores, device):\n    return f1(scores.to(device).argmax(1))\n";
    let report = lint_source("chain.py", found, &preview());
    let d001: Vec<_> = report.diagnostics.iter().filter(|d| d.code == "D001").collect();
    assert_eq!(d001.len(), 1, "{:?}", &report.diagnostics);
    assert_eq!(d001[0].start.line, 5);
}

/// Thousands of functions a training loop calls at every step, each returning a value read on the
/// host to a loop of thousands of statements: what their calls do with it is worked out once per
/// function, not once per read over the whole loop.
#[test]
fn thousands_of_step_functions_returning_reads_to_one_loop_are_linted() {
    let n = 3_000;
    let mut text = String::from("import torch\n\n\n");
    for i in 0..n {
        text.push_str(&format!(
            "def f{i}(model, x):\n    loss = model(x).sum()\n    loss.backward()\n    a = loss.item()\n    return a, loss.item()\n\n\n"
        ));
    }
    text.push_str("def main(model, loader, device):\n    model.to(device)\n    for x in loader:\n        x = x.to(device)\n");
    for i in 0..n {
        text.push_str(&format!("        v{i}, w{i} = f{i}(model, x)\n        print(v{i}, w{i})\n"));
    }
    let (_dir, reports) = run_of(&[("train.py", text.into_bytes())]);
    let found = &report(&reports, "train.py").diagnostics;
    // Each function's reads are returned to a call that only prints them.
    assert!(found.iter().filter(|d| d.code == "D005").count() >= 1_000, "{}", found.len());
}

/// A dict of `self` filled item by item thousands of times and read as many times: each read
/// looks at a bounded number of fills (past them the container is not followed), and a small one
/// beside it is still followed to its class's method.
#[test]
fn a_container_of_self_filled_thousands_of_times_is_linted() {
    let n = 5_000;
    let mut text = String::from(
        "import torch\n\n\nclass Head:\n    def run(self, x):\n        print(x.sum().item())\n        return x.sum()\n\n\nclass Holder:\n    def __init__(self):\n        self.models = dict()\n        self.few = dict()\n        self.few['a'] = Head()\n",
    );
    for i in 0..n {
        text.push_str(&format!("        self.models['k{i}'] = Head()\n"));
    }
    text.push_str("\n    def step(self, x):\n        t = self.few['a'].run(x)\n");
    for i in 0..n {
        text.push_str(&format!("        t = t + self.models['k{i}'].run(x)\n"));
    }
    text.push_str("        return t\n\n\ndef train(loader, opt):\n    h = Holder()\n    for x in loader:\n        loss = h.step(x.cuda())\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n");
    let (_dir, reports) = run_of(&[("holder.py", text.into_bytes())]);
    let found = &report(&reports, "holder.py").diagnostics;
    assert!(found.iter().any(|d| d.code == "D005" && d.start.line == 6), "{found:?}");
}

/// A meter whose `update` chains thousands of its attributes (`self.a1 = self.a0`, ..), read and
/// updated thousands of times in one loop: what the method keeps is worked out once and from a
/// bounded number of assignments, and a small meter beside it is still followed.
#[test]
fn meters_with_thousands_of_chained_attributes_are_linted() {
    let n = 3_000;
    let mut text = String::from(
        "import torch\n\n\nclass Meter:\n    def update(self, val):\n        self.val = val\n\n\nclass Chain:\n    def update(self, val):\n        self.a0 = val\n",
    );
    for i in 1..n {
        text.push_str(&format!("        self.a{i} = self.a{}\n", i - 1));
    }
    text.push_str(
        "\n\ndef train(model, loader, opt):\n    model.cuda()\n    m = Meter()\n    c = Chain()\n    for x in loader:\n        loss = model(x.cuda()).sum()\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        m.update(loss.detach())\n        print(m.val.item())\n",
    );
    for i in 0..n {
        text.push_str(&format!("        c.update(loss.detach())\n        print(c.a{i})\n"));
    }
    let (_dir, reports) = run_of(&[("train.py", text.into_bytes())]);
    let found = &report(&reports, "train.py").diagnostics;
    assert!(found.iter().any(|d| d.code == "D005" && d.message.contains(".item()")), "{found:?}");
}

/// A helper whose result comes through a few names, each bound thousands of times from the one
/// before (`a1 = a0.float()` 2,000 times): whether it makes its result on the host is worked out
/// once per name, not once per path (2,000^5), and its moved result is still reported at the call.
#[test]
fn a_helper_with_names_rebound_thousands_of_times_is_judged_once_per_name() {
    let mut text =
        String::from("import torch\nfrom torch import nn\n\n\ndef grid(h):\n    a0 = torch.arange(h)\n");
    for i in 1..=5 {
        let p = i - 1;
        for _ in 0..2_000 {
            text.push_str(&format!("    a{i} = a{p}.float()\n"));
        }
    }
    text.push_str(
        "    return a5\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x + grid(x.shape[0]).to(x.device)\n",
    );
    let (_dir, reports) = run_of(&[("model.py", text.into_bytes())]);
    let found = &report(&reports, "model.py").diagnostics;
    assert!(found.iter().any(|d| d.code == "D005" && d.message.contains("`grid(..).to(..)`")), "{found:?}");
}

/// A class of another file whose sixty methods all call one another through `self`, each called
/// in a training loop: whether a method takes a training step is worked out once per method and
/// query (the walk through `self.` calls, 60^4 paths a query, once took minutes).
#[test]
fn methods_that_all_call_one_another_through_self_are_judged_once_each() {
    let n = 60;
    let mut lib = String::from("import torch\n\n\nclass Engine:\n");
    for i in 0..n {
        lib.push_str(&format!("    def m{i}(self, x):\n"));
        for j in (0..n).filter(|j| *j != i) {
            lib.push_str(&format!("        self.m{j}(x)\n"));
        }
        lib.push_str("        return x\n\n");
    }
    let mut train = String::from(
        "import torch\nfrom engine import Engine\n\n\ndef main(loader):\n    e = Engine()\n    for x in loader:\n",
    );
    for i in 0..n {
        train.push_str(&format!("        e.m{i}(x.cuda())\n"));
    }
    train.push_str("        print(x.cuda().sum().item())\n");
    let (_dir, reports) = run_of(&[("engine.py", lib.into_bytes()), ("train.py", train.into_bytes())]);
    // (No method steps the training: the loop is not a loop of steps, and nothing is reported
    // from the engine.)
    assert!(report(&reports, "engine.py").diagnostics.is_empty());
}
