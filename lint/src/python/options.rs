//! The command-line options a project declares with `argparse`, and the branches of its code
//! that a run with the default options never takes.
//!
//! `parser.add_argument("--gail", action="store_true")` declares an option that is off unless the
//! user asks for it: code under `if args.gail:` is opt-in, as is code under
//! `elif args.sample_type == "ddpm_noisy":` when the option's default is another value. A hazard
//! there is latent in the run the project ships as its default, so the rules that speak of what
//! happens at every step do not report it ([`super::checker`] keeps such branches, and the
//! functions only they call, out of its hot contexts).
//!
//! A run the project's own scripts make is a default run too: an option or a value that one of
//! its shell scripts passes (`python run.py --down_sampling_method avg`) is not opt-in
//! ([`passed`]). Its documents are not read: a README offers alternatives ("use
//! `--sample_type ddpm_noisy` for more variance") beside the runs it recommends.
//!
//! Options that choose how a GPU run is set up (`--cuda`, `--amp`, `--distributed`) are left out:
//! a run on a GPU is the run devcheck speaks of, and it passes them.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Stmt};
use rustc_hash::FxHashMap;

/// The most options one file declares that are kept (generated parsers declare thousands).
const MAX_OPTIONS: usize = 1024;
/// The most values of one option that the scripts are seen to pass, and the most options passed.
const MAX_VALUES: usize = 64;
const MAX_PASSED: usize = 1 << 16;
/// Flags and values longer than this are not options (`--a=(--a=(..` in generated text).
const MAX_WORD: usize = 128;

/// What an option is in a run that does not pass it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Default {
    /// `action="store_true"` (with no default, or `default=False`): off.
    Off,
    /// `action="store_false"` (with no default, or `default=True`): on.
    On,
    /// `default="generalized"`: that string; `default=None` (or no default): `None`.
    Text(Option<String>),
    /// `default=0`, `default=0.5`: that number.
    Number(f64),
}

/// The options one file declares, by the attribute that holds each (`--sample-type` is
/// `args.sample_type`, or its `dest=`); an option set with `set_defaults(name=..)` anywhere in
/// the file, or declared twice in different ways, is `None`: its default is not known.
pub(crate) fn declared(body: &[Stmt]) -> Vec<Declared> {
    struct Walk {
        found: Vec<Declared>,
    }
    impl<'a> Visitor<'a> for Walk {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e
                && let Expr::Attribute(a) = &*c.func
            {
                match a.attr.as_str() {
                    "add_argument" if self.found.len() < MAX_OPTIONS => {
                        if let Some(found) = option(c) {
                            self.found.push(found);
                        }
                    }
                    // Defaults set apart (past the cap too: they unsettle what is known).
                    "set_defaults" => {
                        for k in &c.arguments.keywords {
                            if let Some(name) = &k.arg {
                                self.found.push(Declared {
                                    name: name.to_string(),
                                    default: None,
                                    flags: Vec::new(),
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut walk = Walk { found: Vec::new() };
    // The stack the walk takes is bounded by the tree's depth, which the index pass checked.
    walk.visit_body(body);
    walk.found
}

/// An option as `add_argument` declares it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Declared {
    /// The attribute it sets (`dest=`, or the long flag with `-` as `_`).
    pub name: String,
    /// Its default, when the option is one this module speaks of.
    pub default: Option<Default>,
    /// Its flags as a command line spells them (`--use-gail`, `-s`).
    pub flags: Vec<String>,
}

/// `add_argument("--name", ..)`: the attribute it sets, its default when the option is one this
/// module speaks of, and its flags.
fn option(c: &ast::ExprCall) -> Option<Declared> {
    let keyword = |name: &str| c.arguments.find_keyword(name).map(|k| &k.value);
    let text = |e: &Expr| match e {
        Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
        _ => None,
    };
    let flags: Vec<String> = c.arguments.args.iter().filter_map(text).collect();
    let long = flags.iter().find(|f| f.starts_with("--")).or_else(|| flags.first())?;
    // A positional argument is always given.
    if !long.starts_with('-') {
        return None;
    }
    let name = match keyword("dest").and_then(text) {
        Some(dest) => dest,
        None => long.trim_start_matches('-').replace('-', "_"),
    };
    if name.is_empty() || sets_up_the_device(&name) {
        return None;
    }
    let flags: Vec<String> = flags.iter().filter(|f| f.starts_with('-')).cloned().collect();
    // A required option is always given; one with `choices` and no default is as good as
    // required (the program does nothing without it).
    let required = keyword("required").is_some_and(|r| !matches!(r, Expr::BooleanLiteral(l) if !l.value));
    let chosen =
        keyword("choices").is_some() && keyword("default").is_none_or(|d| matches!(d, Expr::NoneLiteral(_)));
    if required || chosen {
        return Some(Declared { name, default: None, flags });
    }
    let default = keyword("default");
    let boolean = |b: bool| default.is_none_or(|d| matches!(d, Expr::BooleanLiteral(l) if l.value == b));
    let default = match keyword("action").and_then(text).as_deref() {
        Some("store_true") => boolean(false).then_some(Default::Off),
        Some("store_false") => boolean(true).then_some(Default::On),
        Some(_) => None,
        None => match default {
            None | Some(Expr::NoneLiteral(_)) => Some(Default::Text(None)),
            Some(Expr::NumberLiteral(n)) => number(&n.value).map(Default::Number),
            Some(d) => text(d).map(|t| Default::Text(Some(t))),
        },
    };
    Some(Declared { name, default, flags })
}

/// A number literal's value (an integer too large for a float's exactness is still ordered).
fn number(n: &ast::Number) -> Option<f64> {
    match n {
        ast::Number::Int(i) => i.as_u64().map(|v| v as f64),
        ast::Number::Float(f) => Some(*f),
        ast::Number::Complex { .. } => None,
    }
}

/// Does an option's name speak of how a GPU run is set up (its device, precision, processes)?
/// By its words (`--sample` is not about `amp`), but `cuda` and `gpu` anywhere (`--ngpu`).
fn sets_up_the_device(name: &str) -> bool {
    const WORDS: [&str; 22] = [
        "cpu",
        "mps",
        "xla",
        "tpu",
        "device",
        "devices",
        "accelerator",
        "dist",
        "distributed",
        "ddp",
        "parallel",
        "amp",
        "fp16",
        "bf16",
        "half",
        "precision",
        "rank",
        "world",
        "local",
        "nccl",
        "fsdp",
        "deepspeed",
    ];
    let lower = name.to_ascii_lowercase();
    lower.contains("cuda")
        || lower.contains("gpu")
        || lower.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| WORDS.contains(&w))
}

/// The options of a whole project: an option declared alike wherever it is declared keeps its
/// default; one declared in different ways has none.
#[derive(Debug, Default)]
pub(crate) struct Options {
    defaults: FxHashMap<String, Option<Default>>,
    /// Each declared flag spelling (`--use-gail`, `-s`) → the attribute it sets.
    flags: FxHashMap<String, String>,
    /// What the project's run scripts pass: each option's name → the words given after it
    /// ([`passed`]).
    passed: FxHashMap<String, Vec<String>>,
}

/// The options a run script passes (`--gail`, `--sample_type ddpm_noisy`,
/// `--mode=test`, `--name "a b"`): each as its attribute's name and the word after it (empty
/// when another option or the line's end follows).
pub(crate) fn passed(text: &str, out: &mut Vec<(String, String)>) {
    let bytes = text.as_bytes();
    for at in memchr::memmem::find_iter(bytes, b"--") {
        if out.len() >= MAX_PASSED {
            return;
        }
        // `--` starts a word (not `a--b`, not a Markdown rule `---`).
        if at > 0 && !matches!(bytes[at - 1], b' ' | b'\t' | b'\n' | b'"' | b'\'' | b'[' | b'(' | b',' | b'`')
        {
            continue;
        }
        let rest = &text[at + 2..];
        if !rest.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        let name_len = rest
            .bytes()
            .take(MAX_WORD + 1)
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            .count();
        if name_len > MAX_WORD {
            continue;
        }
        let name = format!("--{}", &rest[..name_len]);
        let after = &rest[name_len..];
        let value = match after.as_bytes().first() {
            Some(b'=') => word(&after[1..]),
            Some(b' ' | b'\t') => {
                let next = after.trim_start_matches([' ', '\t']);
                if next.starts_with('-') { "" } else { word(next) }
            }
            _ => "",
        };
        out.push((name, value.to_string()));
    }
    // Short flags (`-s ddpm`): kept only where a declared option spells them so.
    for at in memchr::memchr_iter(b'-', bytes) {
        if out.len() >= MAX_PASSED {
            return;
        }
        let short = bytes.get(at + 1).is_some_and(u8::is_ascii_alphabetic)
            && !bytes.get(at + 2).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            && (at == 0 || matches!(bytes[at - 1], b' ' | b'\t' | b'\n'));
        if short {
            let after = &text[at + 2..];
            let next = after.trim_start_matches([' ', '\t']);
            let value = if next.starts_with('-') || next.len() == after.len() { "" } else { word(next) };
            out.push((text[at..at + 2].to_string(), value.to_string()));
        }
    }
}

/// The settings a configuration file gives (`use_ema: true`, `beta = 1.0` in YAML, TOML, INI),
/// each as its key and value: a project that merges its configuration into the parsed options
/// (`vars(args).update(cfg)`) runs with them, so an option of that name is set by the project.
pub(crate) fn configured(text: &str, out: &mut Vec<(String, String)>) {
    for line in text.lines() {
        if out.len() >= MAX_PASSED {
            return;
        }
        let line = line.trim_start().trim_start_matches("- ");
        let key_len =
            line.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-').count();
        if key_len == 0 || !line.as_bytes()[0].is_ascii_alphabetic() {
            continue;
        }
        let rest = line[key_len..].trim_start();
        let Some(value) = rest.strip_prefix(':').or_else(|| rest.strip_prefix('=')) else { continue };
        let value = value.trim();
        let value = value.split(" #").next().unwrap_or(value).trim().trim_matches(|c| c == '"' || c == '\'');
        if key_len <= MAX_WORD && value.len() <= MAX_WORD {
            out.push((format!("--{}", &line[..key_len]), value.to_string()));
        }
    }
}

/// The word at the start of `text`: a quoted string's content, or up to a space, quote,
/// backslash or bracket.
/// A value longer than [`MAX_WORD`] bytes is no value (`""`).
fn word(text: &str) -> &str {
    // Within the line, and a value's length at most.
    let mut limit = memchr::memchr(b'\n', text.as_bytes()).unwrap_or(text.len()).min(MAX_WORD + 2);
    while !text.is_char_boundary(limit) {
        limit -= 1;
    }
    let text = &text[..limit];
    let found = if let Some(q) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let inner = &text[1..];
        inner.find(q).map_or("", |end| &inner[..end])
    } else {
        let end = text
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '(' | ')' | '[' | ']' | ',' | ';' | '`')
            })
            .unwrap_or(text.len());
        &text[..end]
    };
    if found.len() > MAX_WORD { "" } else { found }
}

impl Options {
    pub(crate) fn declare(&mut self, declared: Declared) {
        for flag in declared.flags {
            self.flags.entry(flag).or_insert_with(|| declared.name.clone());
        }
        self.add(declared.name, declared.default);
    }

    pub(crate) fn add(&mut self, name: String, default: Option<Default>) {
        match self.defaults.get_mut(&name) {
            Some(known) if *known != default => *known = None,
            Some(_) => {}
            None => {
                self.defaults.insert(name, default);
            }
        }
    }

    /// A run script of the project passes a flag (`--use-gail`, `-s`), with the word after it.
    pub(crate) fn pass(&mut self, flag: String, value: String) {
        let name = match self.flags.get(&flag) {
            Some(name) => name.clone(),
            None => match flag.strip_prefix("--") {
                Some(long) => long.replace('-', "_"),
                None => return,
            },
        };
        let values = self.passed.entry(name).or_default();
        if values.len() < MAX_VALUES && !values.contains(&value) {
            values.push(value);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.defaults.is_empty()
    }

    /// What the project's code does to its parsed options besides reading them: options updated
    /// wholesale (`vars(args).update(cfg)`, `args.__dict__.update(..)`, `set_defaults(**cfg)`,
    /// `setattr(args, k, v)`) may be anything, so no default is known; an option the code sets
    /// (`args.gail = True`, `self.opt.gail = ..`) has no known default.
    pub(crate) fn unsettle(&mut self, texts: &[&str]) {
        if self.defaults.is_empty() {
            return;
        }
        let wholesale = |t: &str| {
            let has = |w: &str| memchr::memmem::find(t.as_bytes(), w.as_bytes()).is_some();
            has("__dict__.update(")
                || has("set_defaults(**")
                || has("setattr(args")
                || has("setattr(opt")
                || memchr::memmem::find_iter(t.as_bytes(), b"vars(").any(|at| {
                    let rest = &t[at..];
                    rest.find(')')
                        .is_some_and(|close| close < 64 && rest[close + 1..].starts_with(".update("))
                })
        };
        if texts.iter().any(|t| wholesale(t)) {
            self.defaults.clear();
            return;
        }
        let mut set: Vec<String> = Vec::new();
        for t in texts {
            let bytes = t.as_bytes();
            for dot in memchr::memchr_iter(b'.', bytes) {
                let rest = &t[dot + 1..];
                let len = rest.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
                if len == 0 || !self.defaults.contains_key(&rest[..len]) {
                    continue;
                }
                // `.gail = ..`, not `.gail == ..`.
                let after = rest[len..].trim_start_matches([' ', '\t']).as_bytes();
                if after.first() == Some(&b'=') && after.get(1) != Some(&b'=') {
                    set.push(rest[..len].to_string());
                }
            }
        }
        for name in set {
            self.defaults.insert(name, None);
        }
    }

    /// The option an attribute (`args.gail`, `self.opt.gail`) or name holds: its default, and
    /// what the project's scripts pass for it.
    fn option_of(&self, e: &Expr) -> Option<(&Default, &[String])> {
        // `args.gail`, `self.opt.gail`: an attribute (a bare `labels` is a local of its own).
        let Expr::Attribute(a) = e else { return None };
        let name = a.attr.as_str();
        let default = self.defaults.get(name)?.as_ref()?;
        Some((default, self.passed.get(name).map_or(&[], Vec::as_slice)))
    }

    /// Which side of an `if` on the options a run with the defaults never takes: `Some(true)`
    /// for its body, `Some(false)` for its other clauses, `None` when the test is not about the
    /// options or both sides run. `switch`: the `if` has `elif`/`else` clauses, its body leaves
    /// the function (`if args.sample: sample(); return`, the rest of the function is its other
    /// side), or the test is an `elif`'s.
    ///
    /// A flag that is off by default makes an add-on opt-in only when nothing else is offered
    /// in its place (`if args.gail:` with no `else`): `if args.sample: .. else: train()` is how a
    /// script chooses what it does, and each of its modes is a run someone makes. A choice of
    /// value (`elif args.sample_type == "ddpm_noisy":` when the default is `"generalized"`) is
    /// opt-in on its own.
    pub(crate) fn opt_in(&self, test: &Expr, switch: bool) -> Option<bool> {
        if self.is_empty() {
            return None;
        }
        match test {
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => {
                self.opt_in(&u.operand, switch).map(|body| !body)
            }
            // `if args.gail and step > 10:` runs only with the option on.
            Expr::BoolOp(b) if b.op == ast::BoolOp::And => {
                b.values.iter().any(|v| self.opt_in(v, switch) == Some(true)).then_some(true)
            }
            // `args.resume is not None`: as the option's truth.
            Expr::Compare(c)
                if c.comparators.len() == 1
                    && matches!(c.comparators[0], Expr::NoneLiteral(_))
                    && matches!(c.ops[0], ast::CmpOp::Is | ast::CmpOp::IsNot) =>
            {
                // Only an option whose default is `None` is `None` by default.
                let (Default::Text(None), passed) = self.option_of(&c.left)? else { return None };
                if switch || !passed.is_empty() {
                    return None;
                }
                Some(c.ops[0] == ast::CmpOp::IsNot)
            }
            // `if args.beta > 0:` with `--beta` 0 by default: false unless a script gives a value
            // that makes it true.
            Expr::Compare(c) if c.comparators.len() == 1 && self.numeric(&c.left).is_some() => {
                let (default, passed) = self.numeric(&c.left)?;
                let Expr::NumberLiteral(n) = &c.comparators[0] else { return None };
                let bound = number(&n.value)?;
                let holds = |v: f64| match c.ops[0] {
                    ast::CmpOp::Gt => Some(v > bound),
                    ast::CmpOp::GtE => Some(v >= bound),
                    ast::CmpOp::Lt => Some(v < bound),
                    ast::CmpOp::LtE => Some(v <= bound),
                    ast::CmpOp::Eq => Some(v == bound),
                    ast::CmpOp::NotEq => Some(v != bound),
                    _ => None,
                };
                // A value a script gives that is no number, or makes the test true, is a run.
                let scripts_take_it =
                    passed.iter().any(|p| p.parse::<f64>().map_or(true, |v| holds(v) != Some(false)));
                (!holds(default)? && !scripts_take_it).then_some(true)
            }
            Expr::Compare(c) if c.comparators.len() == 1 => {
                let (left, right) = (&*c.left, &c.comparators[0]);
                let ((Default::Text(option), passed), value) =
                    (match (self.option_of(left), self.option_of(right)) {
                        (Some(o), _) => (o, right),
                        (_, Some(o)) => (o, left),
                        _ => return None,
                    })
                else {
                    return None;
                };
                let Expr::StringLiteral(s) = value else { return None };
                let value = s.value.to_str();
                let default = option.as_deref() == Some(value);
                match c.ops[0] {
                    // The branch for a value neither the default nor any script gives.
                    // (`"$SAMPLER"`: a script's variable may hold any value.)
                    ast::CmpOp::Eq => {
                        (!default && !passed.iter().any(|p| p == value || p.starts_with('$'))).then_some(true)
                    }
                    // The branch for any value but the default, which no script gives.
                    ast::CmpOp::NotEq => (default
                        && !passed.iter().any(|p| Some(p.as_str()) != option.as_deref()))
                    .then_some(true),
                    _ => None,
                }
            }
            _ if switch => None,
            _ => match self.option_of(test)? {
                (_, passed) if !passed.is_empty() => None,
                (Default::Off | Default::Text(None), _) => Some(true),
                (Default::On, _) => Some(false),
                (Default::Number(v), _) if *v == 0.0 => Some(true),
                // `if args.resume:` with `default=""`: falsy too.
                (Default::Text(Some(t)), _) if t.is_empty() => Some(true),
                (Default::Text(Some(_)) | Default::Number(_), _) => None,
            },
        }
    }

    /// The numeric default of the option an expression holds, and what the scripts pass for it.
    /// Is the option 1 in every run: its default is 1 and no run script gives another value
    /// (`--n_report_steps` then makes `i % args.n_report_steps == 0` hold at every step)?
    pub(crate) fn always_one(&self, e: &Expr) -> bool {
        self.numeric(e).is_some_and(|(default, passed)| {
            default == 1.0 && passed.iter().all(|p| p.parse::<f64>().is_ok_and(|v| v == 1.0))
        })
    }

    fn numeric(&self, e: &Expr) -> Option<(f64, &[String])> {
        match self.option_of(e)? {
            (Default::Number(v), passed) => Some((*v, passed)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(src: &str) -> Options {
        let parsed = ruff_python_parser::parse_module(src).expect("parses");
        let mut options = Options::default();
        for d in declared(&parsed.syntax().body) {
            options.declare(d);
        }
        options
    }

    fn opt_in(options: &Options, test: &str) -> Option<bool> {
        let parsed = ruff_python_parser::parse_expression(test).expect("parses");
        options.opt_in(parsed.expr(), false)
    }

    #[test]
    fn branches_a_run_with_the_default_options_never_takes() {
        let o = options(
            r#"
def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--gail", action="store_true", default=False, help="imitation")
    p.add_argument("--no-norm", action="store_false", dest="norm")
    p.add_argument("--sample_type", type=str, default="generalized")
    p.add_argument("--use-cuda", action="store_true")
    p.add_argument("--amp", action="store_true")
    p.add_argument("--sample", action="store_true")
    p.add_argument("--ngpu", action="store_true")
    p.add_argument("--always", action="store_true", default=True)
    p.add_argument("--later", action="store_true")
    p.set_defaults(later=True)
    p.add_argument("data")
    p.add_argument("--resume", type=str)
    p.add_argument("--out", type=str, required=True)
    p.add_argument("--beta", default=0, type=float)
    p.add_argument("--cutmix_prob", default=0.5, type=float)
    p.add_argument("--pretrained", default="", type=str)
    p.add_argument("--arch", default="resnet50", type=str)
    return p.parse_args()
"#,
        );
        // An empty string is as falsy as `None`; another string is a value.
        assert_eq!(opt_in(&o, "args.pretrained"), Some(true));
        assert_eq!(opt_in(&o, "not args.pretrained"), Some(false));
        assert_eq!(opt_in(&o, "args.arch"), None);
        assert_eq!(opt_in(&o, "args.beta > 0 and r < args.cutmix_prob"), Some(true));
        assert_eq!(opt_in(&o, "args.beta"), Some(true));
        assert_eq!(opt_in(&o, "args.beta >= 0"), None);
        assert_eq!(opt_in(&o, "args.cutmix_prob > 0"), None);
        assert_eq!(opt_in(&o, "args.cutmix_prob"), None);
        assert_eq!(opt_in(&o, "args.resume"), Some(true));
        assert_eq!(opt_in(&o, "args.resume is not None"), Some(true));
        assert_eq!(opt_in(&o, "args.resume is None"), Some(false));
        assert_eq!(opt_in(&o, "args.out"), None);
        assert_eq!(opt_in(&o, "args.gail"), Some(true));
        assert_eq!(opt_in(&o, "not self.args.gail"), Some(false));
        assert_eq!(opt_in(&o, "args.gail and step > 10"), Some(true));
        assert_eq!(opt_in(&o, "args.gail or step > 10"), None);
        assert_eq!(opt_in(&o, "args.norm"), Some(false));
        assert_eq!(opt_in(&o, "not args.norm"), Some(true));
        assert_eq!(opt_in(&o, "self.args.sample_type == 'ddpm_noisy'"), Some(true));
        assert_eq!(opt_in(&o, "args.sample_type == 'generalized'"), None);
        assert_eq!(opt_in(&o, "args.sample_type != 'generalized'"), Some(true));
        // Options that set up a GPU run, options on by default, options whose default another
        // call sets, and positional arguments say nothing.
        assert_eq!(opt_in(&o, "args.use_cuda"), None);
        assert_eq!(opt_in(&o, "args.amp"), None);
        assert_eq!(opt_in(&o, "args.ngpu"), None);
        assert_eq!(opt_in(&o, "args.sample"), Some(true));
        assert_eq!(opt_in(&o, "args.always"), None);
        assert_eq!(opt_in(&o, "args.later"), None);
        assert_eq!(opt_in(&o, "args.data"), None);
        assert_eq!(opt_in(&o, "args.other"), None);
    }

    #[test]
    fn what_the_scripts_pass_is_not_opt_in() {
        let mut o = options(
            r#"
p.add_argument("--gail", action="store_true")
p.add_argument("--aux", action="store_true")
p.add_argument("--sample-type", default="generalized")
p.add_argument("--method", default=None)
p.add_argument("--mixup", default=0.0, type=float)
p.add_argument("--warmup", default=0, type=int)
"#,
        );
        let mut found = Vec::new();
        passed(
            "# Train\n```\npython main.py --gail --sample-type='ddpm_noisy' \\\n  --method avg\n```\n---\nx--aux --mixup 0.2 --warmup 0\n",
            &mut found,
        );
        let found_pairs: Vec<(&str, &str)> = found.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        assert_eq!(
            found_pairs,
            [
                ("--gail", ""),
                ("--sample-type", "ddpm_noisy"),
                ("--method", "avg"),
                ("--mixup", "0.2"),
                ("--warmup", "0")
            ]
        );
        for (name, value) in found {
            o.pass(name, value);
        }
        assert_eq!(opt_in(&o, "args.gail"), None);
        assert_eq!(opt_in(&o, "args.aux"), Some(true));
        assert_eq!(opt_in(&o, "args.sample_type == 'ddpm_noisy'"), None);
        assert_eq!(opt_in(&o, "args.sample_type == 'other'"), Some(true));
        assert_eq!(opt_in(&o, "args.method == 'avg'"), None);
        assert_eq!(opt_in(&o, "args.method == 'conv'"), Some(true));
        assert_eq!(opt_in(&o, "args.mixup > 0"), None);
        assert_eq!(opt_in(&o, "args.warmup > 0"), Some(true));
    }

    #[test]
    fn flags_are_read_as_the_options_they_set() {
        let mut o = options(
            r#"
p.add_argument("--use-gail", dest="gail", action="store_true")
p.add_argument("-s", "--sampler", default="ddim")
p.add_argument("--mode", choices=["train", "test"])
p.add_argument("--kind", default="a")
p.add_argument("--aux", action="store_true")
"#,
        );
        let mut found = Vec::new();
        passed("python main.py --use-gail -s ddpm --kind \"$KIND\" -x 3\n", &mut found);
        for (flag, value) in found {
            o.pass(flag, value);
        }
        assert_eq!(opt_in(&o, "args.gail"), None);
        assert_eq!(opt_in(&o, "args.sampler == 'ddpm'"), None);
        assert_eq!(opt_in(&o, "args.sampler == 'plms'"), Some(true));
        // A choice with no default is as good as required; a script's variable may be anything.
        assert_eq!(opt_in(&o, "args.mode == 'test'"), None);
        assert_eq!(opt_in(&o, "args.kind == 'b'"), None);
        assert_eq!(opt_in(&o, "args.aux"), Some(true));
        // A bare name is a local of its own, whatever option shares its name.
        assert_eq!(opt_in(&o, "aux"), None);
    }

    #[test]
    fn options_the_code_sets_have_no_known_default() {
        let declare = || {
            options(
                "p.add_argument('--gail', action='store_true')\np.add_argument('--aux', action='store_true')",
            )
        };
        let mut o = declare();
        o.unsettle(&["if args.gail == True:\n    pass\nargs.aux = True\n"]);
        assert_eq!(opt_in(&o, "args.gail"), Some(true));
        assert_eq!(opt_in(&o, "args.aux"), None);
        let mut o = declare();
        o.unsettle(&["cfg = load(path)\nvars(args).update(cfg)\n"]);
        assert_eq!(opt_in(&o, "args.gail"), None);
    }

    #[test]
    fn generated_text_is_read_in_linear_time_and_bounded_memory() {
        let text = format!("echo {}\n{}\n", "--a=(".repeat(50_000), "--b ".repeat(50_000));
        let mut found = Vec::new();
        passed(&text, &mut found);
        assert!(found.len() <= MAX_PASSED);
        assert!(found.iter().all(|(f, v)| f.len() <= MAX_WORD + 2 && v.len() <= MAX_WORD));
    }

    #[test]
    fn what_the_configuration_sets_is_not_opt_in() {
        let mut o = options(
            r#"
p.add_argument("--use-ema", action="store_true")
p.add_argument("--gail", action="store_true")
p.add_argument("--sampler", default="ddim")
p.add_argument("--beta", default=0.0, type=float)
"#,
        );
        let mut found = Vec::new();
        configured("model:\n  use_ema: true  # smooth\nsampler = \"ddpm\"\nbeta: 1.0\n", &mut found);
        for (name, value) in found {
            o.pass(name, value);
        }
        assert_eq!(opt_in(&o, "args.use_ema"), None);
        assert_eq!(opt_in(&o, "args.gail"), Some(true));
        assert_eq!(opt_in(&o, "args.sampler == 'ddpm'"), None);
        assert_eq!(opt_in(&o, "args.beta > 0"), None);
    }

    #[test]
    fn an_option_declared_in_different_ways_has_no_default() {
        let mut o = options("p.add_argument('--fast', action='store_true')");
        o.add("fast".into(), Some(Default::Text(Some("yes".into()))));
        assert_eq!(opt_in(&o, "args.fast"), None);
        let mut same = options("p.add_argument('--fast', action='store_true')");
        same.add("fast".into(), Some(Default::Off));
        assert_eq!(opt_in(&same, "args.fast"), Some(true));
    }
}
