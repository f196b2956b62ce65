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

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::{FxHashMap, FxHashSet};

/// Names shorter than this are too common to tell anything (`f`, `fn`, `run`).
const MIN_NAME: usize = 4;

/// The names among `defined` that appear at most once (their own definition) in all of `texts`.
pub(crate) fn unreferenced<'n>(defined: &FxHashSet<&'n str>, texts: &[&str]) -> FxHashSet<&'n str> {
    let names: Vec<&str> = defined.iter().copied().filter(|n| n.len() >= MIN_NAME).collect();
    if names.is_empty() {
        return FxHashSet::default();
    }
    let Ok(matcher) = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&names) else {
        return FxHashSet::default();
    };
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut seen: FxHashMap<usize, u32> = FxHashMap::default();
    for text in texts {
        let bytes = text.as_bytes();
        for m in matcher.find_iter(bytes) {
            let before = m.start().checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(m.end()).copied();
            if before.is_some_and(word) || after.is_some_and(word) {
                continue;
            }
            let count = seen.entry(m.pattern().as_usize()).or_default();
            *count = count.saturating_add(1);
        }
    }
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| seen.get(i).copied().unwrap_or(0) <= 1)
        .map(|(_, n)| *n)
        .collect()
}

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
}
