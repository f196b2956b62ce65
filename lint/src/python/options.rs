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
//! Options that choose how a GPU run is set up (`--cuda`, `--amp`, `--distributed`) are left out:
//! a run on a GPU is the run devcheck speaks of, and it passes them.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Stmt};
use rustc_hash::FxHashMap;

/// The most options one file declares that are kept (generated parsers declare thousands).
const MAX_OPTIONS: usize = 1024;

/// What an option is in a run that does not pass it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Default {
    /// `action="store_true"` (with no default, or `default=False`): off.
    Off,
    /// `action="store_false"` (with no default, or `default=True`): on.
    On,
    /// `default="generalized"`: that string.
    Text(String),
}

/// The options one file declares, by the attribute that holds each (`--sample-type` is
/// `args.sample_type`, or its `dest=`); an option set with `set_defaults(name=..)` anywhere in
/// the file, or declared twice in different ways, is `None`: its default is not known.
pub(crate) fn declared(body: &[Stmt]) -> Vec<(String, Option<Default>)> {
    struct Walk {
        found: Vec<(String, Option<Default>)>,
    }
    impl<'a> Visitor<'a> for Walk {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e
                && let Expr::Attribute(a) = &*c.func
                && self.found.len() < MAX_OPTIONS
            {
                match a.attr.as_str() {
                    "add_argument" => {
                        if let Some((name, default)) = option(c) {
                            self.found.push((name, default));
                        }
                    }
                    "set_defaults" => {
                        for k in &c.arguments.keywords {
                            if let Some(name) = &k.arg {
                                self.found.push((name.to_string(), None));
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

/// `add_argument("--name", ..)`: the attribute it sets, and its default when the option is one
/// this module speaks of.
fn option(c: &ast::ExprCall) -> Option<(String, Option<Default>)> {
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
    let default = keyword("default");
    let boolean = |b: bool| default.is_none_or(|d| matches!(d, Expr::BooleanLiteral(l) if l.value == b));
    let default = match keyword("action").and_then(text).as_deref() {
        Some("store_true") => boolean(false).then_some(Default::Off),
        Some("store_false") => boolean(true).then_some(Default::On),
        Some(_) => None,
        None => default.and_then(text).map(Default::Text),
    };
    Some((name, default))
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
}

impl Options {
    pub(crate) fn add(&mut self, name: String, default: Option<Default>) {
        match self.defaults.get_mut(&name) {
            Some(known) if *known != default => *known = None,
            Some(_) => {}
            None => {
                self.defaults.insert(name, default);
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.defaults.is_empty()
    }

    /// The default of the option an attribute (`args.gail`, `self.opt.gail`) or name holds.
    fn default_of(&self, e: &Expr) -> Option<&Default> {
        let name = match e {
            Expr::Attribute(a) => a.attr.as_str(),
            Expr::Name(n) => n.id.as_str(),
            _ => return None,
        };
        self.defaults.get(name)?.as_ref()
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
            Expr::Compare(c) if c.comparators.len() == 1 => {
                let (left, right) = (&*c.left, &c.comparators[0]);
                let (option, value) = match (self.default_of(left), self.default_of(right)) {
                    (Some(Default::Text(d)), _) => (d, right),
                    (_, Some(Default::Text(d))) => (d, left),
                    _ => return None,
                };
                let Expr::StringLiteral(s) = value else { return None };
                let default = s.value.to_str() == option;
                match c.ops[0] {
                    ast::CmpOp::Eq => (!default).then_some(true),
                    ast::CmpOp::NotEq => default.then_some(true),
                    _ => None,
                }
            }
            _ if switch => None,
            _ => match self.default_of(test)? {
                Default::Off => Some(true),
                Default::On => Some(false),
                Default::Text(_) => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(src: &str) -> Options {
        let parsed = ruff_python_parser::parse_module(src).expect("parses");
        let mut options = Options::default();
        for (name, default) in declared(&parsed.syntax().body) {
            options.add(name, default);
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
    return p.parse_args()
"#,
        );
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
    fn an_option_declared_in_different_ways_has_no_default() {
        let mut o = options("p.add_argument('--fast', action='store_true')");
        o.add("fast".into(), Some(Default::Text("yes".into())));
        assert_eq!(opt_in(&o, "args.fast"), None);
        let mut same = options("p.add_argument('--fast', action='store_true')");
        same.add("fast".into(), Some(Default::Off));
        assert_eq!(opt_in(&same, "args.fast"), Some(true));
    }
}
