//! D004 for Rust code. What it finds, why, and its fixes: `d004_unmoved_tensor_field.md` beside this file (what
//! `devcheck explain D004` prints); its row in the rule table is in [`crate::registry`].

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;

use syn::Expr;
use syn::spanned::Spanned;

use crate::rust::device::{DevSrc, classify_options};
use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::rust::facts::{FixedTensor, fixed_tensor_of};
use crate::rust::fields::{Fate, burn_fields, devcheck_fields};
use crate::rust::api::{Api, is_transfer_method};
use crate::rust::syntax::{chain_root, peel, self_field};
use crate::rust::walker::{Rule, Checker};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// Receivers of moves seen in forward methods (by address in the tree).
    moved: HashSet<usize>,
    /// `self.<field>` used in a forward method without a move: (struct, field) → first use.
    uses: BTreeMap<(String, String), (Range<usize>, String)>,
    /// Preview: statics holding a tensor made on a fixed device (`LazyLock`, `lazy_static!`,
    /// `OnceLock::get_or_init`), by name.
    statics: BTreeMap<String, FixedTensor>,
    /// Statics used in a forward pass: name → first use.
    static_uses: BTreeMap<String, (Range<usize>, String)>,
}

impl Check {
    /// Preview: statics filled with `OnceLock::get_or_init(|| ..)`, and statics read in a forward
    /// pass.
    fn static_expr(&mut self, cx: &Checker<'_, '_>, e: &Expr) {
        match e {
            Expr::MethodCall(m) if m.method == "get_or_init" => {
                if let (Some(name), Some(arg)) = (crate::rust::syntax::as_ident(peel(&m.receiver)), m.args.first())
                    && let Some(fixed) = fixed_in(cx, closure_body(arg), &name.to_string())
                {
                    self.statics.entry(name.to_string()).or_insert(fixed);
                }
            }
            Expr::Path(p) if cx.in_forward() => {
                let Some(f) = cx.fun() else { return };
                if let Some(id) = p.path.get_ident().map(|i| i.to_string())
                    && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                {
                    self.static_uses.entry(id).or_insert_with(|| (cx.file.range(e.span()), f.name.clone()));
                }
            }
            _ => {}
        }
    }
}

/// The tensor a static's initialiser makes on a fixed device, directly or through
/// `LazyLock::new(|| ..)` / `Lazy::new(..)`.
fn static_tensor(cx: &Checker<'_, '_>, init: &Expr, in_fn: &str) -> Option<FixedTensor> {
    match peel(init) {
        Expr::Call(c) if c.args.len() == 1 => fixed_in(cx, closure_body(&c.args[0]), in_fn),
        other => fixed_in(cx, other, in_fn),
    }
}

/// The body of `|| body`, or the expression itself.
fn closure_body(e: &Expr) -> &Expr {
    match peel(e) {
        Expr::Closure(cl) => &cl.body,
        other => other,
    }
}

fn fixed_in(cx: &Checker<'_, '_>, e: &Expr, in_fn: &str) -> Option<FixedTensor> {
    fixed_tensor_of(cx.file, e, &Default::default(), &|_| None, in_fn, &cx.facts.fixed_helpers)
}

impl Rule for Check {
    fn item_struct(&mut self, cx: &Checker<'_, '_>, s: &syn::ItemStruct, out: &mut Vec<Finding>) {
        if cx.in_test() || !devcheck_classify::has_module_derive(&s.attrs) {
            return;
        }
        let apis = cx.file.apis;
        let burn = apis.is(Api::Burn);
        let devcheck = !burn && (apis.is(Api::Devcheck) || apis.is_empty());
        let fields = if devcheck {
            devcheck_fields(cx.file, s)
        } else if burn {
            burn_fields(cx.file, s)
        } else {
            return;
        };
        let facts = cx.facts.structs.get(&s.ident.to_string());
        for field in fields.iter().filter(|f| f.fate == Fate::LeftBehind) {
            let name = &field.name;
            let ty = &s.ident;
            // A skipped `Option` that every constructor leaves `None` is a cache the module fills
            // later from its own (moved) tensors, like a fused weight.
            let cache = field.ty.starts_with("Option")
                && facts.and_then(|f| f.inits.get(name)).is_some_and(|i| i.always_none == Some(true));
            if cache {
                continue;
            }
            let (message, help) = match (&field.skip, devcheck) {
                (Some(_), true) => (
                    format!(
                        "`{ty}.{name}` holds tensors but is marked `#[module(skip)]`: moving `{ty}` to a device leaves it behind"
                    ),
                    "use `#[module(non_persistent)]` to move it with the module without saving it, or drop the attribute to make it a saved buffer",
                ),
                (Some(_), false) => (
                    format!(
                        "`{ty}.{name}` holds tensors but is marked `#[module(skip)]`: moving `{ty}` to a device leaves it behind"
                    ),
                    "drop `#[module(skip)]` so the tensor is a module constant that `to_device` moves, or move it in `forward` (`self.x.clone().to_device(&input.device())`)",
                ),
                (None, _) => (
                    format!(
                        "`{ty}.{name}` holds a tensor in `Ignored`: moving `{ty}` to a device leaves it behind"
                    ),
                    "store the tensor as a plain field (a module constant that `to_device` moves), or move it in `forward`",
                ),
            };
            let fix = field.skip.as_ref().filter(|_| field.can_be_non_persistent).map(|skip| {
                Fix::new(
                    Applicability::Safe,
                    "move it with the module, without saving it: `#[module(non_persistent)]`",
                    vec![Edit { range: skip.clone(), replacement: "non_persistent".to_string() }],
                )
            });
            let mut finding = Finding::new(&registry::D004, field.range.clone(), message)
                .label("not moved with the module")
                .help(help)
                .fix(fix);
            if let Some(skip) = &field.skip {
                finding = finding.related(skip.clone(), "skipped here");
            }
            out.push(finding);
        }
    }

    fn item_static(&mut self, cx: &Checker<'_, '_>, name: &syn::Ident, init: &Expr, _out: &mut Vec<Finding>) {
        if !cx.file.preview {
            return;
        }
        if let Some(fixed) = static_tensor(cx, init, &name.to_string()) {
            self.statics.insert(name.to_string(), fixed);
        }
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, _out: &mut Vec<Finding>) {
        if cx.file.preview && !cx.in_test() {
            self.static_expr(cx, e);
        }
        // Where the field meets the inputs: a forward pass, or (preview) an optimizer's step.
        let meets_inputs =
            cx.fun().is_some_and(|f| f.name.starts_with("forward") || (cx.file.preview && f.name == "step"));
        if !(cx.file.apis.is(Api::Candle) || cx.file.apis.is(Api::Tch)) || !cx.in_forward() || !meets_inputs {
            return;
        }
        match e {
            Expr::MethodCall(m) if is_transfer_method(cx.file.apis, &m.method.to_string()) => {
                let target_fixed = match m.method.to_string().as_str() {
                    "cpu" | "cuda" => true,
                    _ => m.args.first().is_some_and(|a| {
                        let fields = |f: &str| cx.facts.field_device(cx.self_ty(), f);
                        matches!(
                            classify_options(cx.file, a, &Default::default(), &fields),
                            Some(DevSrc::Fixed { .. })
                        )
                    }),
                };
                if !target_fixed {
                    self.moved.insert(chain_root(&m.receiver) as *const Expr as usize);
                }
            }
            Expr::Field(_) => {
                if self.moved.contains(&(e as *const Expr as usize)) {
                    return;
                }
                let (Some(field), Some(ty), Some(f)) = (self_field(peel(e)), cx.self_ty(), cx.fun()) else {
                    return;
                };
                let key = (ty.to_string(), field.to_string());
                self.uses.entry(key).or_insert_with(|| (cx.file.range(e.span()), f.name.clone()));
            }
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        for (name, (use_range, in_fn)) in &self.static_uses {
            let Some(fixed) = self.statics.get(name) else { continue };
            out.push(
                Finding::new(
                    &registry::D004,
                    fixed.ctor_range.clone(),
                    format!(
                        "the static `{name}` holds a tensor made on a fixed device (`{}`), and `{in_fn}` uses it with its inputs",
                        cx.file.short(&fixed.device_range)
                    ),
                )
                .label("made on a fixed device, once for the whole program")
                .related(use_range.clone(), format!("used in `{in_fn}` here"))
                .help("a static cannot follow the model to a device: keep the tensor in the module (built on the device of the weights), or move it where it is used (`.to_device(xs.device())`)"),
            );
        }
        for ((ty, field), (use_range, in_fn)) in &self.uses {
            let Some(facts) = cx.facts.structs.get(ty) else { continue };
            // Not a field that can only hold host data (a table read back into a `Vec<f64>`).
            if facts.fields.iter().any(|f| f.name == *field && f.host_data) {
                continue;
            }
            let Some(init) = facts.inits.get(field) else { continue };
            for fixed in &init.fixed_tensors {
                let device = if fixed.device_range == fixed.ctor_range {
                    "the CPU, as it takes no device".to_string()
                } else {
                    format!("`{}`", cx.file.short(&fixed.device_range))
                };
                let help = if cx.file.apis.is(Api::Tch) {
                    "build it on the VarStore's device (`vs.device()`), or move it where it is used: `self.x.to_device(xs.device())`"
                } else {
                    "build it on the device of the weights (`vb.device()`), or move it where it is used: `self.x.to_device(xs.device())?`"
                };
                out.push(
                    Finding::new(
                        &registry::D004,
                        fixed.ctor_range.clone(),
                        format!(
                            "`{ty}.{field}` is made on a fixed device ({device}) in `{}` and used in `{in_fn}` without a move",
                            fixed.in_fn
                        ),
                    )
                    .label("made on a fixed device")
                    .related(use_range.clone(), format!("used in `{in_fn}` here"))
                    .help(help),
                );
            }
        }
    }
}
