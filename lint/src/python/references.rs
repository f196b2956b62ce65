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
//! the definitions of a file that other files import from by name are judged: a file nothing
//! imports from may be a script, or a library module its users import ([`super::project`]).

use rustc_hash::{FxHashMap, FxHashSet};

/// Names shorter than this are too common to tell anything (`f`, `fn`, `run`).
const MIN_NAME: usize = 4;

/// The names among `defined` that no run reaches by name: every mention of one (as a whole
/// identifier, outside import statements) is in its own definition or in the definition of a
/// name no run reaches either. What the module-level code of a Python file (its `if __name__ ==
/// "__main__":` block, its assignments, its calls) mentions is reached, and so is everything the
/// other texts (`others`: run scripts, configuration files, documents) mention, and what the
/// definitions of names not judged mention (not in `defined`: decorated, too short, or defined
/// where they may be an entry). An import only makes a name available; the file that imports it
/// must still mention it.
pub(crate) fn unreferenced<'n>(
    defined: &FxHashSet<&'n str>,
    code: &[&str],
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
    for text in code {
        for (owner, part) in top_level_parts(text) {
            let names = identifiers(part).filter_map(lookup);
            match owner.and_then(lookup) {
                Some(owner) => {
                    let to = edges.entry(owner).or_default();
                    to.extend(names.filter(|&w| w != owner));
                }
                None => reached.extend(names),
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

/// A Python text cut into its top-level parts, module-level import statements left out: each
/// part with the name its `def` or `class` line gives it, or `None` for module-level code. Read
/// from the lines' indentation: a part runs until the next line that starts in the first column
/// with code (a blank or comment line does not end it; a decorator line stays with the part
/// before it). A line in the first column that is not a statement's start (inside brackets, or
/// text a string spreads over lines) ends a definition early, which only makes what follows count
/// as module-level code: reached. (An import inside a function only adds what that function
/// mentions.)
fn top_level_parts(text: &str) -> Vec<(Option<&str>, &str)> {
    let bytes = text.as_bytes();
    let mut parts: Vec<(Option<&str>, &str)> = Vec::new();
    let mut owner: Option<&str> = None;
    let mut start = 0;
    // The starts of the lines that begin in the first column with code.
    let mut line_start = 0;
    while line_start < bytes.len() {
        let line_end =
            memchr::memchr(b'\n', &bytes[line_start..]).map_or(bytes.len(), |i| line_start + i + 1);
        let line = &text[line_start..line_end];
        let first = bytes[line_start];
        if matches!(first, b' ' | b'\t' | b'\n' | b'\r' | b'#' | b'@') {
            line_start = line_end;
            continue;
        }
        // `__all__` only says what a star import takes: a list of what the module makes available.
        if line.starts_with("import ") || line.starts_with("from ") || line.starts_with("__all__") {
            if start < line_start {
                parts.push((owner, &text[start..line_start]));
            }
            // Over several lines: to the closing bracket, or while lines end in `\`.
            let mut end = line_end;
            let open = [('(', b')'), ('[', b']')]
                .into_iter()
                .find(|&(o, c)| line.contains(o) && !line.contains(char::from(c)));
            if let Some((_, close)) = open {
                end = memchr::memchr(close, &bytes[line_end..]).map_or(bytes.len(), |i| line_end + i);
                end = memchr::memchr(b'\n', &bytes[end..]).map_or(bytes.len(), |i| end + i + 1);
            } else {
                let mut last = line;
                while last.trim_end().ends_with('\\') && end < bytes.len() {
                    let next = memchr::memchr(b'\n', &bytes[end..]).map_or(bytes.len(), |i| end + i + 1);
                    last = &text[end..next];
                    end = next;
                }
            }
            start = end;
            line_start = end;
            continue;
        }
        let name = line
            .strip_prefix("async def ")
            .or_else(|| line.strip_prefix("def "))
            .or_else(|| line.strip_prefix("class "))
            .map(|rest| rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or(""));
        if start < line_start {
            parts.push((owner, &text[start..line_start]));
        }
        owner = name.filter(|n| !n.is_empty());
        start = line_start;
        line_start = line_end;
    }
    if start < text.len() {
        parts.push((owner, &text[start..]));
    }
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

/// The identifiers of a text (`[A-Za-z_][A-Za-z0-9_]*`, not inside another word), in order.
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

/// Each byte's part in an identifier: a letter or `_` starts one, a digit continues one.
const CLASS: [u8; 256] = {
    let mut class = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        class[b] = if c.is_ascii_alphabetic() || c == b'_' {
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

    #[test]
    fn names_that_appear_only_where_they_are_defined() {
        let defined: FxHashSet<&str> =
            ["train_epoch", "train", "Net", "OldNet", "evaluate", "helper_v2", "cfg"].into_iter().collect();
        let utils = "def train_epoch(model):\n    pass\n\n\ndef evaluate(model):\n    pass\n\n\ndef helper_v2():\n    pass\n";
        let main = "from utils import train_epoch\nfrom model import Net\n\n\ndef train():\n    train_epoch(Net())\n\n\ntrain()\n";
        let model = "class Net:\n    pass\n\n\nclass OldNet:\n    pass\n\n\nclass NetV2(Net):\n    pass\n";
        let readme = "Call `evaluate(model)` after training.\n";
        let found = unreferenced(&defined, &[utils, main, model], &[readme]);
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
        let found = unreferenced(&defined, &[solver, sampler, init, train, model], &[]);
        let mut found: Vec<&str> = found.into_iter().collect();
        found.sort();
        assert_eq!(found, ["Sampler", "Solver", "exported", "schedule"]);
        // A script that names the sampler reaches it, and through it the solver; `__all__` only
        // lists what a star import takes.
        let found =
            unreferenced(&defined, &[solver, sampler, init, train, model], &["python -c 'Sampler()'"]);
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["exported"]);
    }

    /// The identifiers, as the plain definition says: maximal runs of `[A-Za-z0-9_]` that do not
    /// start with a digit.
    fn reference(text: &str) -> Vec<&str> {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
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
