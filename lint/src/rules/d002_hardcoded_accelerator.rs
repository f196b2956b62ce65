use syn::Expr;
use syn::spanned::Spanned;

use crate::device::is_device_type;
use crate::diagnostic::Finding;
use crate::profile::Api;
use crate::registry::declare_rule;
use crate::syntax::{call_path, int_lit, last_two, str_lit};
use crate::walker::{Check, Cx};

declare_rule! {
    /// ### What it does
    /// Flags an accelerator written into library or model code: `Device::Cuda(0)`,
    /// `Device::new_cuda(0)`, `Device::cuda_if_available(0)` (candle), `Device::cuda_if_available()`
    /// (tch), `CudaDevice::new(0)`, `WgpuDevice::DiscreteGpu(0)` (burn), `"cuda:0".parse()`.
    ///
    /// Application code is where a device is chosen, so `main` functions, `src/main.rs`,
    /// `src/bin/`, examples, tests, benches and build scripts are not checked; nor are
    /// comparisons (`dev == Device::Cuda(0)`), parsing or conversion code (`impl FromStr`), and
    /// code that defines device values for its callers: a function returning a device
    /// (`fn device(cpu: bool) -> Result<Device>`) or a `(Kind, Device)` constant.
    ///
    /// ### Why is this bad?
    /// The library only works on a machine whose first GPU is free and usable. It cannot run on
    /// the CPU, on another GPU, or on several GPUs at once, and the caller cannot change that
    /// without editing the library.
    ///
    /// ### Example
    /// ```ignore
    /// pub fn load(path: &Path) -> Result<Model> {
    ///     let device = Device::new_cuda(0)?;
    ///     let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, &device)? };
    ///     Model::new(vb)
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```ignore
    /// pub fn load(path: &Path, device: &Device) -> Result<Model> {
    ///     let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, device)? };
    ///     Model::new(vb)
    /// }
    /// // in main: let device = Device::cuda_if_available(0)?;
    /// ```
    ///
    /// ### Fix safety
    /// There is no automatic fix: the device has to become a parameter, and its callers change.
    pub struct D002HardcodedAccelerator {
        code: "D002",
        name: "hardcoded-accelerator",
        group: Suspicious,
        summary: "`Cuda(0)`-style device literals in library/model code (not in main, tests, examples, benches)",
        fix: None,
    }
}

#[derive(Default)]
pub(crate) struct Check002;

impl Check for Check002 {
    fn expr(&mut self, cx: &Cx<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        if !matches!(e, Expr::Call(_) | Expr::MethodCall(_)) {
            return;
        }
        if cx.in_app()
            || cx.in_test()
            || cx.scope.compare > 0
            || cx.scope.conversion > 0
            || cx.scope.device_def > 0
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
        out.push(
            Finding::new(
                &D002HardcodedAccelerator::META,
                range,
                format!("`{text}` hard-codes {what} in library code"),
            )
            .label(format!("always {what}"))
            .help(help),
        );
    }
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
                // tch's form takes no ordinal and means cuda:0.
                "cuda_if_available" if c.args.is_empty() => Some("cuda:0".to_string()),
                "Cuda" | "new_cuda" | "cuda_if_available" => ordinal().map(|n| format!("cuda:{n}")),
                "Metal" | "new_metal" | "metal_if_available" => ordinal().map(|n| format!("metal:{n}")),
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
