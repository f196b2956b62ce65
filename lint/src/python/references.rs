//! Top-level functions and classes no run of the repository reaches by name: nothing mentions
//! them but their own definition, an import, or code that is itself not reached. A hazard in such
//! code is latent, so the rules that speak of what a run does leave it alone
//! ([`super::checker`]).
//!
//! A name is reached where it appears as a whole word in what runs: the module-level code of any
//! Python file of the project (linted or only indexed: its statements and its `__main__` block),
//! the definitions of names that are reached (or not judged), and the project's run
//! scripts, configuration files and documents (`.sh`, `.yaml`, `.toml`, `.cfg`, `.ini`, `.md`,
//! `.rst`; not JSON or plain text, which are mostly data), so a class a Hydra configuration names
//! by string, an entry point `pyproject.toml` declares, or a helper the README tells users to call
//! is reached. A module-level import only makes a name available, and `__all__` only lists what a
//! star import takes: the importing file must still mention it (a package's `__init__.py`
//! re-exporting a sampler nothing uses does not reach it).
//! Decorated definitions (registries, `@app.command`, `@torch.jit.script`) are always reached, and
//! so is everything in a project of a single Python file, where nothing else could name it. Only
//! the definitions of a file that other files import from by name are judged, and those of an
//! application's file beside one that cannot run by itself: another file nothing imports from
//! may be a script, or a library module its users import ([`super::project`],
//! `Project::judge_unimported`).

use rustc_hash::{FxHashMap, FxHashSet};

/// Names shorter than this are too common to tell anything (`f`, `fn`, `run`).
const MIN_NAME: usize = 4;

/// A Python text of the project, and what reading its imports needs to know.
pub(crate) struct Code<'t> {
    pub text: &'t str,
    /// The file is a package's `__init__.py` of a project that is a library (it has a
    /// `setup.py`, `setup.cfg` or `pyproject.toml`): what it imports is what the package offers
    /// its users, and is reached.
    pub offers: bool,
}

/// The names among `defined` that no run reaches by name: every mention of one (as a whole
/// identifier, outside import statements) is in its own definition or in the definition of a
/// name no run reaches either. What the module-level code of a Python file mentions (its
/// statements, its `__main__` block, class bodies and decorators, and the first line of each
/// definition, whose defaults run at import) is reached, and so is everything the other texts
/// (`others`: run scripts, configuration files, documents, files that are not UTF-8) mention,
/// and what the definitions of names not judged mention (not in `defined`: decorated, too
/// short, or defined where they may be an entry). An import only makes a name available (the
/// file that imports it must still mention it), except one that renames (`import a as b`) and
/// the imports of a library's package ([`Code::offers`]); `__all__` only lists what a star
/// import takes, unless some file reads a module's `__all__`.
pub(crate) fn unreferenced<'n>(
    defined: &FxHashSet<&'n str>,
    code: &[Code<'_>],
    others: &[&str],
) -> FxHashSet<&'n str> {
    let judged: FxHashSet<&'n str> = defined.iter().copied().filter(|n| n.len() >= MIN_NAME).collect();
    if judged.is_empty() {
        return FxHashSet::default();
    }
    // Most identifiers (`self`, `torch`, `x`) are none of the names: a bit per (length, first and
    // last byte) says so without hashing the word.
    let mut filter = NameFilter::default();
    for name in &judged {
        filter.insert(name);
    }
    let lookup = |word: &str| -> Option<&'n str> {
        if word.len() >= MIN_NAME && filter.may_hold(word) { judged.get(word).copied() } else { None }
    };
    let mut reached: FxHashSet<&'n str> = FxHashSet::default();
    // What each judged definition mentions (its own name aside).
    let mut edges: FxHashMap<&'n str, Vec<&'n str>> = FxHashMap::default();
    for text in others {
        reached.extend(identifiers(text).filter_map(lookup));
    }
    let all_read = code.iter().any(|c| memchr::memmem::find(c.text.as_bytes(), b".__all__").is_some());
    for c in code {
        let imports = Imports { reach: c.offers, all_reaches: all_read || c.offers };
        for part in top_level_parts(c.text, imports) {
            let owner = part.owner.and_then(lookup);
            let names = identifiers(part.text).filter_map(lookup).filter(|&w| Some(w) != owner);
            match owner {
                Some(owner) if !part.runs => edges.entry(owner).or_default().extend(names),
                _ => reached.extend(names),
            }
        }
    }
    let mut todo: Vec<&'n str> = reached.iter().copied().collect();
    while let Some(name) = todo.pop() {
        for &next in edges.get(name).map(Vec::as_slice).unwrap_or(&[]) {
            if reached.insert(next) {
                todo.push(next);
            }
        }
    }
    defined.iter().copied().filter(|n| judged.contains(n) && !reached.contains(n)).collect()
}

/// Which import statements reach what they name ([`unreferenced`]).
#[derive(Clone, Copy)]
struct Imports {
    /// Every import (a library's package).
    reach: bool,
    /// `__all__` too.
    all_reaches: bool,
}

/// A stretch of a Python text: the top-level definition it belongs to, and whether it runs when
/// the module is imported (module-level code, a class body's statements, decorators, a
/// definition's first line) rather than when the definition is called.
struct Part<'t> {
    owner: Option<&'t str>,
    text: &'t str,
    runs: bool,
}

/// A Python text cut into parts, the module-level imports that reach nothing left out. Read from
/// the lines' indentation: a top-level part runs until the next line that starts in the first
/// column with code (a blank or comment line does not end it). A line in the first column that
/// is not a statement's start (inside brackets, or text a string spreads over lines) ends a
/// definition early, which only makes what follows count as module-level code: reached. Inside a
/// class, a statement at the body's indentation other than a method runs at import. A text with
/// no line feed but carriage returns is read as module-level code as a whole.
fn top_level_parts<'t>(text: &'t str, imports: Imports) -> Vec<Part<'t>> {
    let bytes = text.as_bytes();
    let mut parts: Vec<Part<'t>> = Vec::new();
    if memchr::memchr(b'\n', bytes).is_none() && memchr::memchr(b'\r', bytes).is_some() {
        parts.push(Part { owner: None, text, runs: true });
        return parts;
    }
    // The open stretch: where it starts, whose it is, whether it runs at import.
    let (mut start, mut owner, mut runs) = (0, None::<&'t str>, true);
    // In a class: the indentation of its body (once seen), and whether the statement there is a
    // method.
    let mut class_body: Option<Option<usize>> = None;
    let push = |parts: &mut Vec<Part<'t>>, from: usize, to: usize, owner: Option<&'t str>, runs: bool| {
        if from < to {
            parts.push(Part { owner, text: &text[from..to], runs });
        }
    };
    let mut line_start = 0;
    while line_start < bytes.len() {
        let line_end =
            memchr::memchr(b'\n', &bytes[line_start..]).map_or(bytes.len(), |i| line_start + i + 1);
        let line = &text[line_start..line_end];
        let first = bytes[line_start];
        if matches!(first, b' ' | b'\t') {
            // Inside a class: a statement at the body's indentation starts a stretch of its own.
            if let Some(body) = class_body.as_mut() {
                let trimmed = line.trim_start_matches([' ', '\t']);
                let indent = line.len() - trimmed.len();
                if !trimmed.trim().is_empty() && !trimmed.starts_with('#') {
                    let level = *body.get_or_insert(indent);
                    if indent <= level {
                        let method = trimmed.starts_with("def ") || trimmed.starts_with("async def ");
                        if method == runs {
                            push(&mut parts, start, line_start, owner, runs);
                            start = line_start;
                            runs = !method;
                        }
                    }
                }
            }
            line_start = line_end;
            continue;
        }
        if matches!(first, b'\n' | b'\r' | b'#') {
            line_start = line_end;
            continue;
        }
        let code = line.split('#').next().unwrap_or(line);
        let import = line.starts_with("import ") || line.starts_with("from ");
        let all = line.starts_with("__all__");
        if (import && !imports.reach && !code.contains(';')) || (all && !imports.all_reaches) {
            // Over several lines: to the closing bracket, or while lines end in `\`.
            let mut end = line_end;
            let mut renames = code.contains(" as ");
            let open =
                [('(', ')'), ('[', ']')].into_iter().find(|&(o, c)| code.contains(o) && !code.contains(c));
            let mut last = code;
            while end < bytes.len()
                && match open {
                    Some((_, close)) => !last.contains(close),
                    None => last.trim_end().ends_with('\\'),
                }
            {
                let next = memchr::memchr(b'\n', &bytes[end..]).map_or(bytes.len(), |i| end + i + 1);
                last = text[end..next].split('#').next().unwrap_or("");
                renames |= last.contains(" as ");
                end = next;
            }
            push(&mut parts, start, line_start, owner, runs);
            // `from utils import restore as load_weights`: what `load_weights` does is `restore`.
            if renames {
                push(&mut parts, line_start, end, None, true);
            }
            (start, owner, runs) = (end, None, true);
            class_body = None;
            line_start = end;
            continue;
        }
        push(&mut parts, start, line_start, owner, runs);
        start = line_start;
        fn name(rest: &str) -> &str {
            rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("")
        }
        let def = line.strip_prefix("async def ").or_else(|| line.strip_prefix("def ")).map(name);
        let class = line.strip_prefix("class ").map(name);
        owner = def.or(class).filter(|n| !n.is_empty());
        class_body = class.map(|_| None);
        // A definition's first line (its defaults, its bases) runs at import; its body does not.
        runs = true;
        if owner.is_some() {
            push(&mut parts, line_start, line_end, owner, true);
            start = line_end;
            runs = class.is_some();
        }
        line_start = line_end;
    }
    push(&mut parts, start, text.len(), owner, runs);
    parts
}

/// A set of names that answers "certainly not" for most words: one bit per (length, first byte,
/// last byte), 8 KiB.
struct NameFilter {
    bits: Box<[u64; 1024]>,
}

impl Default for NameFilter {
    fn default() -> NameFilter {
        NameFilter { bits: Box::new([0; 1024]) }
    }
}

impl NameFilter {
    fn slot(word: &str) -> usize {
        let b = word.as_bytes();
        let (first, last) = (b.first().copied().unwrap_or(0), b.last().copied().unwrap_or(0));
        (b.len().wrapping_mul(0x9E37) ^ usize::from(first).wrapping_mul(0x2F1) ^ usize::from(last)) & 0xFFFF
    }

    fn insert(&mut self, word: &str) {
        let at = NameFilter::slot(word);
        self.bits[at >> 6] |= 1 << (at & 63);
    }

    fn may_hold(&self, word: &str) -> bool {
        let at = NameFilter::slot(word);
        self.bits[at >> 6] & (1 << (at & 63)) != 0
    }
}

/// The identifiers of a text (`[A-Za-z_][A-Za-z0-9_]*`, non-ASCII characters counting as
/// letters; not inside another word), in order.
pub(crate) fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            match CLASS[usize::from(bytes[at])] {
                START => {
                    let start = at;
                    at += 1;
                    while at < bytes.len() && CLASS[usize::from(bytes[at])] != OTHER {
                        at += 1;
                    }
                    return Some(&text[start..at]);
                }
                // A digit starts a number, whose letters (`1e5`, `0x1f`) are no identifier.
                DIGIT => {
                    while at < bytes.len() && CLASS[usize::from(bytes[at])] != OTHER {
                        at += 1;
                    }
                }
                _ => at += 1,
            }
        }
        None
    })
}

const OTHER: u8 = 0;
const START: u8 = 1;
const DIGIT: u8 = 2;

/// Each byte's part in an identifier: a letter, `_` or a byte of a non-ASCII character starts one,
/// a digit continues one.
const CLASS: [u8; 256] = {
    let mut class = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        // Bytes of non-ASCII characters: Python names may have them (`charger_modèle`).
        class[b] = if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            START
        } else if c.is_ascii_digit() {
            DIGIT
        } else {
            OTHER
        };
        b += 1;
    }
    class
};

#[cfg(test)]
mod tests {
    use super::*;

    fn code<'t>(texts: &[&'t str]) -> Vec<Code<'t>> {
        texts.iter().map(|text| Code { text, offers: false }).collect()
    }

    #[test]
    fn names_that_appear_only_where_they_are_defined() {
        let defined: FxHashSet<&str> =
            ["train_epoch", "train", "Net", "OldNet", "evaluate", "helper_v2", "cfg"].into_iter().collect();
        let utils = "def train_epoch(model):\n    pass\n\n\ndef evaluate(model):\n    pass\n\n\ndef helper_v2():\n    pass\n";
        let main = "from utils import train_epoch\nfrom model import Net\n\n\ndef train():\n    train_epoch(Net())\n\n\ntrain()\n";
        let model = "class Net:\n    pass\n\n\nclass OldNet:\n    pass\n\n\nclass NetV2(Net):\n    pass\n";
        let readme = "Call `evaluate(model)` after training.\n";
        let found = unreferenced(&defined, &code(&[utils, main, model]), &[readme]);
        let mut found: Vec<&str> = found.into_iter().collect();
        found.sort();
        // `cfg` is too short to say; `helper_v2` is not `helper`; `Net` in `NetV2` is not `Net`.
        assert_eq!(found, ["OldNet", "helper_v2"]);
    }

    /// A name mentioned only by an import, or only inside definitions no run reaches, is not
    /// reached; module-level code, a `__main__` block and the other texts reach what they name.
    #[test]
    fn names_only_unreached_code_mentions_are_not_reached() {
        let defined: FxHashSet<&str> =
            ["Sampler", "Solver", "schedule", "main_loop", "Trainer", "build_model", "exported"]
                .into_iter()
                .collect();
        let solver = "import torch\n\n\ndef schedule(t):\n    return t\n\n\nclass Solver:\n    def step(self, x):\n        return schedule(x)\n";
        let sampler = "from .solver import (\n    Solver,\n    schedule,\n)\n\n\nclass Sampler:\n    def __init__(self):\n        self.solver = Solver()\n";
        let init = "from .sampler import Sampler\n__all__ = [\n    \"exported\",\n]\n";
        let train = "from model import build_model\n\n\nclass Trainer:\n    pass\n\n\ndef main_loop():\n    m = build_model(\n        Trainer(),\n    )\n\n\nif __name__ == \"__main__\":\n    main_loop()\n";
        let model = "from .solver import schedule, \\\n    Solver\ndef build_model(t):\n    return t\n\n\ndef exported():\n    pass\n";
        let found = unreferenced(&defined, &code(&[solver, sampler, init, train, model]), &[]);
        let mut found: Vec<&str> = found.into_iter().collect();
        found.sort();
        assert_eq!(found, ["Sampler", "Solver", "exported", "schedule"]);
        // A script that names the sampler reaches it, and through it the solver; `__all__` only
        // lists what a star import takes.
        let found =
            unreferenced(&defined, &code(&[solver, sampler, init, train, model]), &["python -c 'Sampler()'"]);
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["exported"]);
    }

    /// What runs at import, or names a definition another way, reaches it (each case from a
    /// review's repro): a renaming import, a decorator line, an import whose comment or `;`
    /// holds more, a file with carriage returns only, a default argument, a class body's
    /// statement, a non-ASCII name, a library package's re-export, a module's `__all__` read.
    #[test]
    fn what_runs_at_import_or_renames_reaches() {
        let defined: FxHashSet<&str> =
            ["restore", "resumable", "initial_state", "class_table", "charger_modèle", "Trainer", "legacy"]
                .into_iter()
                .collect();
        let utils = "def restore(p):\n    pass\n\n\ndef resumable(f):\n    return f\n\n\ndef initial_state(p):\n    pass\n\n\n\
                     def class_table():\n    pass\n\n\ndef charger_modèle():\n    pass\n\n\ndef legacy():\n    pass\n";
        let reached = |texts: &[&str], offers: bool| -> Vec<&str> {
            let mut code: Vec<Code<'_>> = vec![Code { text: utils, offers: false }];
            code.extend(texts.iter().map(|text| Code { text, offers }));
            let found = unreferenced(&defined, &code, &[]);
            let mut reached: Vec<&str> = defined.iter().copied().filter(|n| !found.contains(n)).collect();
            reached.sort();
            reached
        };
        assert!(reached(&["from utils import restore"], false).is_empty());
        assert_eq!(
            reached(&["from utils import restore as load_weights\nload_weights(1)\n"], false),
            ["restore"]
        );
        assert_eq!(
            reached(&["def legacy_step():\n    pass\n@resumable\ndef train():\n    pass\n"], false),
            ["resumable"]
        );
        assert_eq!(reached(&["from utils import restore  # (see docs\nrestore(1)\n"], false), ["restore"]);
        assert_eq!(reached(&["from utils import restore; restore(1)\n"], false), ["restore"]);
        assert_eq!(reached(&["from utils import restore\rrestore(1)\r"], false), ["restore"]);
        assert_eq!(
            reached(&["def finetune(m, state=initial_state(1)):\n    pass\n"], false),
            ["initial_state"]
        );
        assert_eq!(
            reached(
                &["class Trainer:\n    table = class_table()\n\n    def step(self):\n        legacy()\n"],
                false
            ),
            ["class_table"]
        );
        assert_eq!(reached(&["charger_modèle()\n"], false), ["charger_modèle"]);
        assert_eq!(reached(&["from .utils import restore\n"], true), ["restore"]);
        assert_eq!(
            reached(
                &["__all__ = [\"legacy\"]\n", "for n in utils.__all__:\n    getattr(utils, n)()\n"],
                false
            ),
            ["legacy"]
        );
        assert!(reached(&["__all__ = [\"legacy\"]\n"], false).is_empty());
    }

    /// The identifiers, as the plain definition says: maximal runs of `[A-Za-z0-9_]` and non-ASCII
    /// characters that do not start with a digit.
    fn reference(text: &str) -> Vec<&str> {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            if word(bytes[at]) {
                let start = at;
                while at < bytes.len() && word(bytes[at]) {
                    at += 1;
                }
                if !bytes[start].is_ascii_digit() {
                    out.push(&text[start..at]);
                }
            } else {
                at += 1;
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn identifiers_are_the_maximal_words_not_starting_with_a_digit(
            text in "[a-zA-Z0-9_ .()\\n'\"é#=-]{0,80}"
        ) {
            proptest::prop_assert_eq!(identifiers(&text).collect::<Vec<_>>(), reference(&text));
        }

        /// The filter never says "certainly not" of a name it holds.
        #[test]
        fn the_name_filter_holds_what_it_was_given(names in proptest::collection::vec("[A-Za-z_][A-Za-z0-9_]{3,30}", 1..50)) {
            let mut filter = NameFilter::default();
            for n in &names {
                filter.insert(n);
            }
            for n in &names {
                proptest::prop_assert!(filter.may_hold(n));
            }
        }
    }
}
