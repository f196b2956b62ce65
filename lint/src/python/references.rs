//! Top-level functions and classes that nothing in the repository names: no file calls, imports
//! or subclasses them, no configuration or document mentions them. A hazard in such code is
//! latent — no run the repository makes reaches it — so the rules that speak of what a run does
//! leave it alone ([`super::checker`]).
//!
//! A name counts as used wherever it appears as a whole word outside its own `def` or `class`
//! line: in any Python file of the project (linted or only indexed), and in its run scripts,
//! configuration files and documents (`.sh`, `.yaml`, `.toml`, `.cfg`, `.ini`, `.md`, `.rst`; not
//! JSON or plain text, which are mostly data), so a class a Hydra configuration names by string,
//! an entry point `pyproject.toml` declares, or a helper the README tells users to call is used.
//! Decorated definitions (registries, `@app.command`, `@torch.jit.script`) are always used, and so
//! is everything in a project of a single Python file, where nothing else could name it. Only the
//! definitions of a file that other files import from by name are judged: a file nothing imports
//! from may be a script, or a library module its users import ([`super::project`]).

use rustc_hash::{FxHashMap, FxHashSet};

/// Names shorter than this are too common to tell anything (`f`, `fn`, `run`).
const MIN_NAME: usize = 4;

/// The names among `defined` that appear at most once (their own definition) in all of `texts`,
/// as whole identifiers: one pass over each text's identifiers, each looked up once.
pub(crate) fn unreferenced<'n>(defined: &FxHashSet<&'n str>, texts: &[&str]) -> FxHashSet<&'n str> {
    let mut seen: FxHashMap<&str, u32> =
        defined.iter().copied().filter(|n| n.len() >= MIN_NAME).map(|n| (n, 0)).collect();
    if seen.is_empty() {
        return FxHashSet::default();
    }
    // Most identifiers (`self`, `torch`, `x`) are none of the names: a bit per (length, first and
    // last byte) says so without hashing the word.
    let mut filter = NameFilter::default();
    for name in seen.keys() {
        filter.insert(name);
    }
    for text in texts {
        for word in identifiers(text) {
            if word.len() >= MIN_NAME
                && filter.may_hold(word)
                && let Some(count) = seen.get_mut(word)
            {
                *count = count.saturating_add(1);
            }
        }
    }
    defined.iter().copied().filter(|n| seen.get(n).is_some_and(|&c| c <= 1)).collect()
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
        let found = unreferenced(&defined, &[utils, main, model, readme]);
        let mut found: Vec<&str> = found.into_iter().collect();
        found.sort();
        // `cfg` is too short to say; `helper_v2` is not `helper`; `Net` in `NetV2` is not `Net`.
        assert_eq!(found, ["OldNet", "helper_v2"]);
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
