//! D003 for Rust code. What it finds, why, and its fixes: `d003_discarded_transfer.md` beside this file (what
//! `devcheck explain D003` prints); its row in the rule table is in [`crate::registry`].

use std::collections::HashSet;

use syn::spanned::Spanned;
use syn::{Expr, Stmt};

use crate::rust::crates::Condition;
use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::rust::api::{Api, is_transfer_method};
use crate::rust::syntax::{
    Ctor, ParamKind, as_ident, chain_root, classify_type, mentions_tensor, pat_ident, peel, peel_result,
    self_field,
};
use crate::rust::walker::{Rule, Checker};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// Names known to hold tensors, per function.
    tensors: Vec<HashSet<String>>,
}

impl Check {
    fn is_tensor(&self, cx: &Checker<'_, '_>, e: &Expr) -> bool {
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
        cx: &Checker<'_, '_>,
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
            &registry::D003,
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

impl Rule for Check {
    fn enter_fn(&mut self, cx: &Checker<'_, '_>, _sig: &syn::Signature) {
        let names = cx.tensor_params();
        self.tensors.push(names);
    }

    fn exit_fn(&mut self, _cx: &Checker<'_, '_>, _out: &mut Vec<Finding>) {
        self.tensors.pop();
    }

    fn stmt(&mut self, cx: &Checker<'_, '_>, s: &Stmt, out: &mut Vec<Finding>) {
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
