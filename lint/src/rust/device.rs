//! Where does a device value come from? The one classification D001, D004 and the struct facts
//! share: written into the code (fixed), or following an input, a parameter or the weights.

use std::collections::HashMap;
use std::ops::Range;

use syn::Expr;
use syn::spanned::Spanned;

use super::api::{CtorDevice, is_host_read, is_transfer_method};
use super::syntax::{
    Ctor, as_ident, call_path, chain_calls, chain_root, is_tensor_query, last_two, path_ends_with, peel,
    self_field, str_lit,
};
use crate::rust::FileCx;

/// Which fixed device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FixedKind {
    /// The host: `Device::Cpu`, tch's `FLOAT_CPU`, `"cpu".parse()`.
    Cpu,
    /// An accelerator picked in the code: `Device::Cuda(0)`, `Device::new_cuda(0)?`, `Device::Mps`.
    Accelerator,
    /// The process-wide or backend default: `Device::default()`, `Default::default()`,
    /// `default_device()`, `Device::best_available()`.
    Default,
}

/// A device value's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DevSrc {
    /// Written into the code. `at` is where the device itself is named (for messages and labels).
    Fixed { kind: FixedKind, at: Range<usize> },
    /// From an input tensor, a parameter, the module's weights or its loader.
    Follows,
}

/// What is known about names while reading one function.
#[derive(Default, Debug, Clone)]
pub(crate) struct DevEnv {
    /// Local variables and parameters holding a device (or dtype+device options). `None`
    /// records a shadowing binding whose source is not known.
    pub locals: HashMap<String, Option<DevSrc>>,
}

impl DevEnv {
    pub fn bind(&mut self, name: String, src: Option<DevSrc>) {
        self.locals.insert(name, src);
    }
}

/// Is this the name of a device type (`Device`, `NdArrayDevice`, `WgpuDevice`, `B::Device`)?
pub(crate) fn is_device_type(name: &syn::Ident) -> bool {
    let s = name.to_string();
    s.ends_with("Device")
}

fn variant_kind(variant: &syn::Ident) -> Option<FixedKind> {
    let s = variant.to_string();
    if s == "Cpu" {
        Some(FixedKind::Cpu)
    } else if s == "DefaultDevice" {
        Some(FixedKind::Default)
    } else if s.starts_with(|c: char| c.is_ascii_uppercase()) {
        Some(FixedKind::Accelerator)
    } else {
        None
    }
}

/// Classifies a device expression. `fields` answers for `self.<name>` when the struct's
/// constructor is known; `None` means the source cannot be told (never a finding).
pub(crate) fn classify(
    file: &FileCx<'_>,
    e: &Expr,
    env: &DevEnv,
    fields: &dyn Fn(&str) -> Option<DevSrc>,
) -> Option<DevSrc> {
    let e = peel(e);
    let here = || file.range(e.span());
    match e {
        Expr::Path(p) => {
            if let Some(id) = as_ident(e) {
                return env.locals.get(&id.to_string()).cloned().flatten();
            }
            let (ty, variant) = last_two(&p.path)?;
            if is_device_type(ty) {
                return variant_kind(variant).map(|kind| DevSrc::Fixed { kind, at: here() });
            }
            None
        }
        Expr::Call(c) => {
            let path = call_path(c)?;
            if path.segments.len() == 1 {
                let f = &path.segments[0].ident;
                return (f == "default_device")
                    .then(|| DevSrc::Fixed { kind: FixedKind::Default, at: here() });
            }
            if path_ends_with(path, &["Default", "default"])
                || path_ends_with(path, &["devcheck", "default_device"])
            {
                return Some(DevSrc::Fixed { kind: FixedKind::Default, at: here() });
            }
            let (ty, f) = last_two(path)?;
            if !is_device_type(ty) {
                return None;
            }
            let name = f.to_string();
            let kind = match name.as_str() {
                "default" | "best_available" => FixedKind::Default,
                // tch's `Device::cuda_if_available()` takes no ordinal and picks cuda:0.
                "cuda_if_available" if c.args.is_empty() => FixedKind::Default,
                "new_cuda" | "new_metal" | "cuda_if_available" | "metal_if_available" | "new" => {
                    FixedKind::Accelerator
                }
                "Cpu" => FixedKind::Cpu,
                _ if name.starts_with(|ch: char| ch.is_ascii_uppercase()) => FixedKind::Accelerator,
                _ => return None,
            };
            Some(DevSrc::Fixed { kind, at: here() })
        }
        Expr::MethodCall(m) => {
            if m.method == "device" && m.args.is_empty() {
                return Some(DevSrc::Follows);
            }
            if m.method == "parse"
                && m.args.is_empty()
                && let Some(s) = str_lit(&m.receiver)
            {
                let kind = if s == "cpu" { FixedKind::Cpu } else { FixedKind::Accelerator };
                return Some(DevSrc::Fixed { kind, at: here() });
            }
            None
        }
        Expr::Field(_) => {
            let name = self_field(e)?;
            fields(&name.to_string())
        }
        _ => None,
    }
}

/// Classifies a constructor's device-or-options argument: a device, a `(dtype, device)` tuple,
/// tch's `(Kind::Float, device)` and its `FLOAT_CPU`-style constants.
pub(crate) fn classify_options(
    file: &FileCx<'_>,
    e: &Expr,
    env: &DevEnv,
    fields: &dyn Fn(&str) -> Option<DevSrc>,
) -> Option<DevSrc> {
    let inner = peel(e);
    match inner {
        Expr::Tuple(t) if t.elems.len() >= 2 => {
            let last = t.elems.last()?;
            classify(file, last, env, fields)
        }
        Expr::Path(p) => {
            let last = p.path.segments.last()?.ident.to_string();
            if last.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()) {
                if last.ends_with("_CPU") {
                    return Some(DevSrc::Fixed { kind: FixedKind::Cpu, at: file.range(inner.span()) });
                }
                if last.ends_with("_CUDA") {
                    return Some(DevSrc::Fixed {
                        kind: FixedKind::Accelerator,
                        at: file.range(inner.span()),
                    });
                }
            }
            classify(file, e, env, fields)
        }
        Expr::MethodCall(m) if m.method == "options" && m.args.is_empty() => Some(DevSrc::Follows),
        _ => classify(file, e, env, fields),
    }
}

/// The device expression inside an options argument, for labels and fixes: the tuple's last
/// element, or the whole argument.
pub(crate) fn device_part(e: &Expr) -> &Expr {
    let mut inner = e;
    while let Expr::Paren(p) = inner {
        inner = &p.expr;
    }
    match inner {
        Expr::Tuple(t) if t.elems.len() >= 2 => t.elems.last().unwrap_or(e),
        _ => e,
    }
}

/// Does `e` denote a tensor that lives on the host by construction: made on the CPU
/// (`Tensor::arange(.., &Device::Cpu)`, tch's `Tensor::from_slice(..)`), moved there
/// (`.to_device(&Device::Cpu)`, `.cpu()`), or computed from such tensors alone (`host.ne(0)?.sum(1)?`,
/// `(host * 2.0)?`, `Tensor::cat(&[a, b], 0)` of host tensors, a block ending in one)? Reading such
/// a tensor back waits for no device, and it never meets the inputs unless moved.
pub(crate) fn is_host_tensor(file: &FileCx<'_>, e: &Expr, env: &DevEnv, host: &dyn Fn(&str) -> bool) -> bool {
    let e = peel(e);
    match e {
        Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(tail, None)) => is_host_tensor(file, tail, env, host),
            _ => false,
        },
        Expr::Binary(b) => {
            let literal = |e: &Expr| matches!(peel(e), Expr::Lit(_));
            (is_host_tensor(file, &b.left, env, host)
                && (literal(&b.right) || is_host_tensor(file, &b.right, env, host)))
                || (literal(&b.left) && is_host_tensor(file, &b.right, env, host))
        }
        _ => {
            // The outermost move decides; without one, the root does (ops keep the device). What a
            // host read returns is data, not a tensor.
            let calls = chain_calls(e);
            // A tensor's shape, dtype or device is not a tensor.
            if calls.first().is_some_and(|c| is_tensor_query(&c.method.to_string())) {
                return false;
            }
            for call in calls {
                let method = call.method.to_string();
                if is_host_read(file.apis, &method, call.turbofish.is_some()) {
                    return false;
                }
                if method == "cpu" {
                    return true;
                }
                if is_transfer_method(file.apis, &method) {
                    return matches!(
                        call.args.first().and_then(|a| classify_options(file, a, env, &|_| None)),
                        Some(DevSrc::Fixed { kind: FixedKind::Cpu, .. })
                    );
                }
            }
            let root = chain_root(e);
            if let Some(ctor) = Ctor::of(file.apis, root) {
                return match ctor.device {
                    CtorDevice::ImplicitCpu => true,
                    CtorDevice::LastArg => matches!(
                        ctor.device_arg().and_then(|a| classify_options(file, a, env, &|_| None)),
                        Some(DevSrc::Fixed { kind: FixedKind::Cpu, .. })
                    ),
                };
            }
            // A module run on host inputs computes on the host (`self.forward(&host)`).
            if let Some(first) = chain_calls(e).last()
                && first.method.to_string().starts_with("forward")
                && first.args.first().is_some_and(|a| is_host_tensor(file, a, env, host))
            {
                return true;
            }
            if let Some(id) = as_ident(root) {
                return host(&id.to_string());
            }
            // `Tensor::cat(&[a, b], 0)` / `Tensor::stack(..)` of host tensors.
            if let Expr::Call(c) = root
                && call_path(c)
                    .and_then(|p| last_two(p))
                    .is_some_and(|(ty, f)| ty == "Tensor" && (f == "cat" || f == "stack"))
                && let Some(Expr::Array(parts)) = c.args.first().map(peel)
            {
                return !parts.elems.is_empty()
                    && parts.elems.iter().all(|p| is_host_tensor(file, p, env, host));
            }
            false
        }
    }
}
