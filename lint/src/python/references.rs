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
    for text in texts {
        for word in identifiers(text) {
            if let Some(count) = seen.get_mut(word) {
                *count = count.saturating_add(1);
            }
        }
    }
    defined.iter().copied().filter(|n| seen.get(n).is_some_and(|&c| c <= 1)).collect()
}

/// The identifiers of a text (`[A-Za-z_][A-Za-z0-9_]*`, not inside another word), in order.
pub(crate) fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let b = bytes[at];
            if b.is_ascii_alphabetic() || b == b'_' {
                let start = at;
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                    at += 1;
                }
                return Some(&text[start..at]);
            }
            // A digit starts a number, whose letters (`1e5`, `0x1f`) are no identifier.
            if b.is_ascii_digit() {
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
                    at += 1;
                }
            } else {
                at += 1;
            }
        }
        None
    })
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
