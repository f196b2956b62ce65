use std::collections::HashSet;

use syn::spanned::Spanned;
use syn::{Expr, Stmt};

use crate::crates::Condition;
use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::profile::{Api, is_transfer_method};
use crate::registry::declare_rule;
use crate::syntax::{
    Ctor, ParamKind, as_ident, chain_root, classify_type, mentions_tensor, pat_ident, peel, peel_result,
    self_field,
};
use crate::walker::{Check, Cx};

declare_rule! {
    /// ### What it does
    /// Flags a statement that moves a tensor to a device and throws the moved copy away:
    /// `x.to_device(&d)?;`, `x.to(&d);`, `x.cuda();`, `let _ = x.to_device(&d);`.
    ///
    /// In devcheck, `.to(..)`, `.cpu()` and `.cuda(..)` are only flagged on values known to be
    /// tensors (a tensor parameter, a variable made by a tensor constructor, a `Tensor` field),
    /// because `Module::to(&mut self, ..)` moves a module in place and is right as a statement.
    /// In-place methods (`copy_`, names ending in `_`) and results that are used are fine, and so
    /// is a receiver that is not known to be a tensor when the crate defines an in-place method of
    /// that name (`fn to_device(&mut self, device: &Device) -> Result<()>` on a batch or an
    /// encoding, which moves its tensors and returns nothing).
    ///
    /// ### Why is this bad?
    /// Tensor moves are not in place: they return a new tensor on the target device and leave
    /// the original where it was. The statement does the copy and drops it, and the code after
    /// it still uses the tensor on the old device.
    ///
    /// ### Example
    /// ```ignore
    /// for (xs, ys) in batches {
    ///     xs.to_device(&device)?;
    ///     let logits = model.forward(&xs)?;
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```ignore
    /// for (xs, ys) in batches {
    ///     let xs = xs.to_device(&device)?;
    ///     let logits = model.forward(&xs)?;
    /// }
    /// ```
    ///
    /// ### Fix safety
    /// The fix binds the result to the same name (`let xs = xs.to_device(&device)?;`, or
    /// `self.w = self.w.to_device(..)?;` for a field). It is unsafe: every later use now sees the
    /// moved tensor, which is the intent but changes behaviour, and a borrowed input
    /// (`xs: &Tensor`) becomes an owned tensor, which may not compile where a reference was
    /// expected.
    pub struct D003DiscardedTransfer {
        code: "D003",
        name: "discarded-transfer",
        group: Correctness,
        summary: "the result of `.to(..)` / `.to_non_blocking(..)` / `.to_device(..)` / `.cuda()` / `.cpu()` thrown away",
        fix: Unsafe,
    }
}

#[derive(Default)]
pub(crate) struct Check003 {
    /// Names known to hold tensors, per function.
    tensors: Vec<HashSet<String>>,
}

impl Check003 {
    fn is_tensor(&self, cx: &Cx<'_, '_>, e: &Expr) -> bool {
        let e = peel(e);
        if let Some(id) = as_ident(e) {
            return self.tensors.last().is_some_and(|t| t.contains(&id.to_string()));
        }
        if let Some(field) = self_field(e) {
            let Some(facts) = cx.self_ty().and_then(|t| cx.facts.structs.get(t)) else { return false };
            return facts
                .fields
                .iter()
                .any(|f| *field == f.name && matches!(f.kind, ParamKind::Tensor { .. }));
        }
        false
    }

    fn report(
        &self,
        cx: &Cx<'_, '_>,
        stmt: &Stmt,
        value: &Expr,
        wild_let: Option<&syn::Local>,
        out: &mut Vec<Finding>,
    ) {
        let Expr::MethodCall(m) = peel_result(value) else { return };
        let method = m.method.to_string();
        if !is_transfer_method(cx.file.apis, &method) {
            return;
        }
        // devcheck's `Module::to` is in place: only known tensors count.
        let known_tensor = self.is_tensor(cx, &m.receiver);
        let ambiguous = matches!(method.as_str(), "to" | "cpu" | "cuda") && cx.file.apis.is(Api::Devcheck);
        if ambiguous && !known_tensor {
            return;
        }
        let receiver = peel(&m.receiver);
        let recv_range = cx.file.range(receiver.span());
        let recv_text = cx.file.snippet(&recv_range).to_string();
        let stmt_range = cx.file.range(stmt.span());
        let call = if m.args.is_empty() { format!(".{method}()") } else { format!(".{method}(..)") };
        let help = if as_ident(receiver).is_some() {
            format!("moves are not in place; bind the result: `let {recv_text} = {recv_text}{call}`")
        } else if self_field(receiver).is_some() {
            format!("moves are not in place; store the result: `{recv_text} = {recv_text}{call}`")
        } else {
            "moves are not in place; use the returned tensor".to_string()
        };
        let fix = if as_ident(receiver).is_some() || self_field(receiver).is_some() {
            let (edit, how) = match wild_let {
                Some(local) => {
                    let wild = cx.file.range(local.pat.span());
                    let name = if as_ident(receiver).is_some() { recv_text.clone() } else { String::new() };
                    if name.is_empty() {
                        (None, String::new())
                    } else {
                        (
                            Some(Edit { range: wild, replacement: name.clone() }),
                            format!("bind the moved tensor to `{name}`"),
                        )
                    }
                }
                None => {
                    let prefix = if as_ident(receiver).is_some() {
                        format!("let {recv_text} = ")
                    } else {
                        format!("{recv_text} = ")
                    };
                    (
                        Some(Edit { range: stmt_range.start..stmt_range.start, replacement: prefix }),
                        format!("assign the moved tensor back to `{recv_text}`"),
                    )
                }
            };
            edit.map(|e| Fix::new(Applicability::Unsafe, how, vec![e]))
        } else {
            None
        };
        let mut finding = Finding::new(
            &D003DiscardedTransfer::META,
            stmt_range,
            format!(
                "the result of `{call}` is thrown away: `{}` stays on its old device",
                cx.file.short(&recv_range)
            ),
        )
        .label("the moved copy is dropped here")
        .help(help)
        .fix(fix);
        // A receiver not known to be a tensor may be the crate's own type with an in-place move
        // (`fn to_device(&mut self, ..)`, as a batch or an encoding has): then nothing is dropped.
        if !known_tensor {
            finding = finding.only_if(Condition::NoInPlaceMethod(method.clone()));
        }
        out.push(finding);
    }
}

impl Check for Check003 {
    fn enter_fn(&mut self, cx: &Cx<'_, '_>, _sig: &syn::Signature) {
        let names = cx.tensor_params();
        self.tensors.push(names);
    }

    fn exit_fn(&mut self, _cx: &Cx<'_, '_>, _out: &mut Vec<Finding>) {
        self.tensors.pop();
    }

    fn stmt(&mut self, cx: &Cx<'_, '_>, s: &Stmt, out: &mut Vec<Finding>) {
        match s {
            Stmt::Expr(e, Some(_)) => self.report(cx, s, e, None, out),
            Stmt::Local(local) => {
                if let (syn::Pat::Wild(_), Some(init)) = (&local.pat, &local.init) {
                    self.report(cx, s, &init.expr, Some(local), out);
                    return;
                }
                let Some(name) = pat_ident(&local.pat) else { return };
                let typed_tensor = matches!(&local.pat, syn::Pat::Type(t) if mentions_tensor(&t.ty) && matches!(classify_type(&t.ty), ParamKind::Tensor { .. }));
                let made = local.init.as_ref().is_some_and(|init| {
                    let root = chain_root(&init.expr);
                    Ctor::of(cx.file.apis, root).is_some() || self.is_tensor(cx, root)
                });
                if let Some(t) = self.tensors.last_mut() {
                    if typed_tensor || made {
                        t.insert(name.to_string());
                    } else {
                        t.remove(&name.to_string());
                    }
                }
            }
            _ => {}
        }
    }
}
