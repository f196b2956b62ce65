//! D002 for Rust code. What it finds, why, and its fixes: `d002_hardcoded_accelerator.md` beside this file (what
//! `devcheck explain D002` prints); its row in the rule table is in [`crate::registry`].

use std::collections::HashSet;

use syn::Expr;
use syn::spanned::Spanned;

use crate::rust::crates::Condition;
use crate::rust::device::is_device_type;
use crate::diagnostic::Finding;
use crate::rust::api::Api;
use crate::rust::syntax::{as_ident, call_path, int_lit, last_two, pat_ident, peel, str_lit};
use crate::rust::walker::{Rule, Checker};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// Device expressions whose value is only tested (`Device::cuda_if_available().is_cuda()`),
    /// by address in the tree.
    tested: HashSet<usize>,
    /// Per function: device literals bound to a name, held until the function ends.
    fns: Vec<Vec<Bound>>,
}

/// `let device = Device::cuda_if_available();`: reported only if the name is used for more than
/// asking what the machine has (`device.is_cuda()`).
struct Bound {
    name: String,
    call: usize,
    finding: Option<Finding>,
    uses: usize,
    tests: usize,
}

/// Methods that ask what a device is, without using it.
fn is_device_test(name: &str) -> bool {
    matches!(name, "is_cuda" | "is_cpu" | "is_metal" | "is_mps" | "is_gpu" | "is_vulkan")
}

impl Rule for Check {
    fn enter_fn(&mut self, _cx: &Checker<'_, '_>, _sig: &syn::Signature) {
        self.fns.push(Vec::new());
    }

    fn exit_fn(&mut self, _cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        for b in self.fns.pop().unwrap_or_default() {
            if b.uses > b.tests {
                out.extend(b.finding);
            }
        }
    }

    fn stmt(&mut self, _cx: &Checker<'_, '_>, s: &syn::Stmt, _out: &mut Vec<Finding>) {
        let syn::Stmt::Local(local) = s else { return };
        let (Some(name), Some(init)) = (pat_ident(&local.pat), &local.init) else { return };
        let value = peel(&init.expr);
        if hardcoded(value).is_some()
            && let Some(bound) = self.fns.last_mut()
        {
            bound.push(Bound { name: name.to_string(), call: addr(value), finding: None, uses: 0, tests: 0 });
        }
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        match e {
            Expr::MethodCall(m) if is_device_test(&m.method.to_string()) && m.args.is_empty() => {
                self.tested.insert(addr(peel(&m.receiver)));
                if let Some(id) = as_ident(peel(&m.receiver))
                    && let Some(b) =
                        self.fns.last_mut().and_then(|v| v.iter_mut().rev().find(|b| id == &b.name))
                {
                    b.tests += 1;
                }
                return;
            }
            Expr::Path(_) => {
                if let Some(id) = as_ident(e)
                    && let Some(b) =
                        self.fns.last_mut().and_then(|v| v.iter_mut().rev().find(|b| id == &b.name))
                {
                    b.uses += 1;
                }
                return;
            }
            Expr::Call(_) | Expr::MethodCall(_) => {}
            _ => return,
        }
        if cx.in_app()
            || cx.in_test()
            || cx.scope.compare > 0
            || cx.scope.conversion > 0
            || cx.scope.device_def > 0
            // Probe-then-choose, dispatch on a device-config enum, configuration types.
            || cx.scope.probe > 0
            || cx.scope.device_branch > 0
            || cx.scope.config > 0
            || self.tested.contains(&addr(e))
        {
            return;
        }
        let Some(what) = hardcoded(e) else { return };
        let range = cx.file.range(e.span());
        let text = cx.file.short(&range);
        let help = match cx.file.apis.iter().next() {
            Some(Api::Candle) => {
                "take the device as a parameter or from the weights (`vb.device()`, `xs.device()`); let `main` pick it with `Device::cuda_if_available(0)?`"
            }
            Some(Api::Tch) => {
                "take the device as a parameter or from the VarStore (`vs.device()`); let `main` pick it with `Device::cuda_if_available()`"
            }
            Some(Api::Burn) => {
                "take the device as a parameter (`device: &B::Device`) or from the weights; let the application pick it"
            }
            _ => {
                "take the device as a parameter or from the inputs (`xs.device()`); let `main` pick it with `Device::best_available()`"
            }
        };
        let mut finding = Finding::new(
            &registry::D002,
            range,
            format!("`{text}` hard-codes {what} in library code"),
        )
        .label(format!("always {what}"))
        .help(help)
        // A module of a package that only builds binaries is application code.
        .only_if(Condition::NotBinaryOnly);
        // A free function that `main` calls is the application's own entry point.
        if let Some(f) = cx.fun()
            && f.self_ty.is_none()
        {
            finding = finding.only_if(Condition::NotEntry(f.id));
        }
        if let Some(b) = self.fns.last_mut().and_then(|v| v.iter_mut().find(|b| b.call == addr(e))) {
            b.finding = Some(finding);
            return;
        }
        out.push(finding);
    }
}

fn addr(e: &Expr) -> usize {
    e as *const Expr as usize
}

/// What accelerator the expression names, if it is a literal one.
fn hardcoded(e: &Expr) -> Option<String> {
    match e {
        Expr::Call(c) => {
            let path = call_path(c)?;
            let (ty, f) = last_two(path)?;
            if !is_device_type(ty) {
                return None;
            }
            let name = f.to_string();
            let ordinal = || c.args.first().and_then(int_lit).filter(|_| c.args.len() == 1);
            match name.as_str() {
                // `cuda_if_available` / `metal_if_available` pick a device with a CPU fallback:
                // the idiomatic selection, not a literal (strict precision 0.00 on the tuning
                // repositories while they counted).
                "Cuda" | "new_cuda" => ordinal().map(|n| format!("cuda:{n}")),
                "Metal" | "new_metal" => ordinal().map(|n| format!("metal:{n}")),
                "DiscreteGpu" | "IntegratedGpu" | "VirtualGpu" => ordinal().map(|n| format!("gpu {n}")),
                "new" if ty == "CudaDevice" => ordinal().map(|n| format!("cuda:{n}")),
                "from_str" | "try_from" | "from" | "new" => {
                    c.args.first().and_then(str_lit).filter(|s| is_accelerator_str(s)).map(|s| accel_name(&s))
                }
                _ => None,
            }
        }
        Expr::MethodCall(m) if m.method == "parse" && m.args.is_empty() => {
            let s = str_lit(&m.receiver)?;
            is_accelerator_str(&s).then(|| accel_name(&s))
        }
        _ => None,
    }
}

fn is_accelerator_str(s: &str) -> bool {
    s == "cuda" || s == "mps" || s == "metal" || s.starts_with("cuda:") || s.starts_with("metal:")
}

fn accel_name(s: &str) -> String {
    if s == "cuda" { "cuda:0".to_string() } else { s.to_string() }
}
