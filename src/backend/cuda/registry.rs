//! The kernel registry: every `.cu` module under `kernels/`, embedded in the binary, and the name
//! of every kernel each one defines. [`check_all`] compiles every module through the same NVRTC
//! path the devices use and compares the entry points NVRTC produced with this list, so the
//! registry and the sources cannot drift apart unnoticed.
//!
//! Kernels are named `<op>_<dtype>` with the dtype spelled as [`crate::DType::as_str`]
//! (`add_f32`, `cast_f16_i64`, `index_select_i64_bf16`); `copy_*` and `fill_*` work by element
//! width (`u8`, `u16`, `u32`, `u64`) rather than dtype. The element-wise and reduction launchers
//! take an op enum (`src/backend/op.rs`), which names their kernels; a test below reads the
//! `.cu` files and checks that every variant's kernels are there and listed here.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::error::{CudaError, CudaResult};
use super::nvrtc::{self, Arch, Compiled};

/// One `.cu` file under `kernels/`.
#[derive(Debug)]
pub struct KernelModule {
    /// The registry name (`binary`), also the file stem.
    pub name: &'static str,
    /// The file name under `kernels/` (`binary.cu`).
    pub file: &'static str,
    /// The embedded source.
    pub source: &'static str,
    names: fn() -> Vec<String>,
}

impl KernelModule {
    /// Every kernel this module defines, in a stable order.
    pub fn kernel_names(&self) -> Vec<String> {
        (self.names)()
    }

    /// Does this module define `kernel`?
    pub fn has_kernel(&self, kernel: &str) -> bool {
        self.kernel_names().iter().any(|k| k == kernel)
    }
}

/// Headers shared by the modules, handed to NVRTC from memory under these include names.
pub const HEADERS: &[(&str, &str)] = &[("common.cuh", include_str!("../../../kernels/common.cuh"))];

/// Every kernel module.
pub static MODULES: &[KernelModule] = &[
    KernelModule {
        name: "unary",
        file: "unary.cu",
        source: include_str!("../../../kernels/unary.cu"),
        names: unary,
    },
    KernelModule {
        name: "binary",
        file: "binary.cu",
        source: include_str!("../../../kernels/binary.cu"),
        names: binary,
    },
    KernelModule {
        name: "cast",
        file: "cast.cu",
        source: include_str!("../../../kernels/cast.cu"),
        names: cast,
    },
    KernelModule {
        name: "reduce",
        file: "reduce.cu",
        source: include_str!("../../../kernels/reduce.cu"),
        names: reduce,
    },
    KernelModule {
        name: "softmax",
        file: "softmax.cu",
        source: include_str!("../../../kernels/softmax.cu"),
        names: softmax,
    },
    KernelModule {
        name: "select",
        file: "select.cu",
        source: include_str!("../../../kernels/select.cu"),
        names: select,
    },
    KernelModule {
        name: "indexing",
        file: "indexing.cu",
        source: include_str!("../../../kernels/indexing.cu"),
        names: indexing,
    },
    KernelModule {
        name: "random",
        file: "random.cu",
        source: include_str!("../../../kernels/random.cu"),
        names: random,
    },
    KernelModule {
        name: "adamw",
        file: "adamw.cu",
        source: include_str!("../../../kernels/adamw.cu"),
        names: adamw,
    },
];

/// The module called `name`.
pub fn module(name: &str) -> Option<&'static KernelModule> {
    MODULES.iter().find(|m| m.name == name)
}

/// The module that defines `kernel`, or [`CudaError::UnknownKernel`] with the closest name.
pub fn module_for_kernel(kernel: &str) -> CudaResult<&'static KernelModule> {
    if let Some(m) = MODULES.iter().find(|m| m.has_kernel(kernel)) {
        return Ok(m);
    }
    let suggestion = MODULES
        .iter()
        .flat_map(|m| m.kernel_names())
        .map(|k| (edit_distance(&k, kernel), k))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| k);
    Err(CudaError::UnknownKernel { kernel: kernel.to_string(), suggestion })
}

/// The name of kernel `op` for `dtype`: `kernel_name("add", DType::F32)` = `add_f32`.
pub use crate::backend::op::kernel_name;

/// The outcome of compiling one module in [`check_all`].
#[derive(Debug)]
pub struct ModuleCheck {
    pub module: &'static str,
    /// How many kernels the registry lists for it.
    pub kernels: usize,
    /// PTX and cubin sizes in bytes (0 when compilation failed; no cubin for virtual archs).
    pub ptx_bytes: usize,
    pub cubin_bytes: usize,
    /// NVRTC's warnings, if any.
    pub log: String,
    pub elapsed: Duration,
    pub result: CudaResult<()>,
}

impl ModuleCheck {
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }
}

/// Compiles every kernel module for `arch` (`"sm_80"`; a real architecture also runs ptxas)
/// with the CUDA headers from `include_dirs` (empty: [`nvrtc::default_include_dirs`]), and
/// checks each module's entry points against the registry. Returns one result per module, in
/// registry order; the outer error is for problems that stop every module (no NVRTC, bad arch).
pub fn check_all(arch: &str, include_dirs: &[PathBuf]) -> CudaResult<Vec<ModuleCheck>> {
    let arch = Arch::parse(arch)?;
    if !nvrtc::is_available() {
        return Err(nvrtc::not_found_error());
    }
    let include_dirs: Vec<PathBuf> =
        if include_dirs.is_empty() { nvrtc::info().include_dirs.clone() } else { include_dirs.to_vec() };
    Ok(MODULES.par_iter().map(|module| check_module(module, &arch, &include_dirs)).collect())
}

fn check_module(module: &'static KernelModule, arch: &Arch, include_dirs: &[PathBuf]) -> ModuleCheck {
    let start = Instant::now();
    let listed = module.kernel_names();
    let mut check = ModuleCheck {
        module: module.name,
        kernels: listed.len(),
        ptx_bytes: 0,
        cubin_bytes: 0,
        log: String::new(),
        elapsed: Duration::ZERO,
        result: Ok(()),
    };
    check.result = nvrtc::compile(module, arch, include_dirs).and_then(|compiled: Compiled| {
        check.ptx_bytes = compiled.ptx.len();
        check.cubin_bytes = compiled.cubin.as_ref().map_or(0, Vec::len);
        check.log = compiled.log.clone();
        registry_mismatch(module, arch, &listed, &compiled.entry_points())
    });
    check.elapsed = start.elapsed();
    check
}

/// Ok when the compiled entry points are exactly the listed kernels.
pub(crate) fn registry_mismatch(
    module: &'static KernelModule,
    arch: &Arch,
    listed: &[String],
    compiled: &[String],
) -> CudaResult<()> {
    let missing: Vec<String> = listed.iter().filter(|k| !compiled.contains(k)).cloned().collect();
    let unlisted: Vec<String> = compiled.iter().filter(|k| !listed.contains(k)).cloned().collect();
    if missing.is_empty() && unlisted.is_empty() {
        Ok(())
    } else {
        Err(CudaError::Registry { module: module.name, arch: arch.to_string(), missing, unlisted })
    }
}

/// A plain-text table of [`check_all`]'s results, one line per module and a closing
/// `N passed, M failed` line; failed modules are followed by their rendered error.
pub fn format_report(arch: &str, checks: &[ModuleCheck]) -> String {
    let mut out = format!("compiling {} kernel modules for {arch}\n", checks.len());
    for c in checks {
        let status = if c.is_ok() { "ok" } else { "FAILED" };
        out.push_str(&format!(
            "  {:<10} {:>4} kernels  ptx {:>9} B  cubin {:>9} B  {:>6.2} s  {status}\n",
            c.module,
            c.kernels,
            c.ptx_bytes,
            c.cubin_bytes,
            c.elapsed.as_secs_f64()
        ));
    }
    for c in checks {
        if let Err(e) = &c.result {
            out.push('\n');
            out.push_str(&e.render(100));
        }
    }
    let failed = checks.iter().filter(|c| !c.is_ok()).count();
    out.push_str(&format!("kernels: {} passed, {failed} failed\n", checks.len() - failed));
    out
}

// ---- kernel names, mirroring the instantiation lists at the end of each .cu file ----

const FLOATS: &[&str] = &["f32", "f64", "f16", "bf16"];
const INTS: &[&str] = &["i64", "i32", "u8"];
const SIGNED_INTS: &[&str] = &["i64", "i32"];
const WIDTHS: &[&str] = &["u8", "u16", "u32", "u64"];
const INDEX_TYPES: &[&str] = &["i64", "i32"];

fn numeric() -> Vec<&'static str> {
    FLOATS.iter().chain(INTS).copied().collect()
}

fn all_dtypes() -> Vec<&'static str> {
    let mut v = numeric();
    v.push("bool");
    v
}

fn names(ops: &[&str], dtypes: &[&str]) -> Vec<String> {
    ops.iter().flat_map(|op| dtypes.iter().map(move |d| format!("{op}_{d}"))).collect()
}

fn with_scalar(ops: &[&str], dtypes: &[&str]) -> Vec<String> {
    ops.iter()
        .flat_map(|op| dtypes.iter().flat_map(move |d| [format!("{op}_{d}"), format!("{op}_scalar_{d}")]))
        .collect()
}

/// The unary ops with float kernels.
pub const UNARY_FLOAT_OPS: &[&str] = &[
    "neg",
    "abs",
    "relu",
    "sign",
    "square",
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "recip",
    "tanh",
    "sigmoid",
    "silu",
    "gelu",
    "gelu_tanh",
    "sin",
    "cos",
    "erf",
    "floor",
    "ceil",
    "round",
];
/// The unary ops that also have signed-integer kernels (`square` also has u8).
pub const UNARY_SIGNED_INT_OPS: &[&str] = &["neg", "abs", "relu", "sign"];

fn unary() -> Vec<String> {
    let mut v = names(UNARY_FLOAT_OPS, FLOATS);
    v.extend(names(UNARY_SIGNED_INT_OPS, SIGNED_INTS));
    v.extend(names(&["square"], INTS));
    v
}

/// Binary ops with kernels for every numeric dtype, each also with a `_scalar` form.
pub const BINARY_NUMERIC_OPS: &[&str] = &["add", "sub", "mul", "maximum", "minimum"];
/// Binary ops for float dtypes only (integers are promoted first).
pub const BINARY_FLOAT_OPS: &[&str] = &["div", "pow"];
/// Comparisons (bool out); `eq` and `ne` also exist for bool.
pub const COMPARISON_OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge"];

fn binary() -> Vec<String> {
    let mut v = with_scalar(BINARY_NUMERIC_OPS, &numeric());
    v.extend(with_scalar(BINARY_FLOAT_OPS, FLOATS));
    v.extend(with_scalar(&["eq", "ne"], &all_dtypes()));
    v.extend(with_scalar(&["lt", "le", "gt", "ge"], &numeric()));
    v.extend(with_scalar(&["logical_and", "logical_or"], &["bool"]));
    v.extend(names(&["rsub_scalar"], &numeric()));
    v.extend(names(&["rdiv_scalar", "rpow_scalar"], FLOATS));
    v
}

fn cast() -> Vec<String> {
    let all = all_dtypes();
    all.iter().flat_map(|from| all.iter().map(move |to| format!("cast_{from}_{to}"))).collect()
}

fn reduce() -> Vec<String> {
    let mut v = two_pass(&["sum", "mean", "var"], FLOATS);
    v.extend(two_pass(&["sum"], INTS));
    v.extend(two_pass(&["sum"], &["bool"]));
    v.extend(two_pass(&["max", "min", "argmax", "argmin"], &numeric()));
    v
}

/// A reduction's first pass `<op>_<dtype>` and its second, `<op>_finish_<dtype>`.
fn two_pass(ops: &[&str], dtypes: &[&str]) -> Vec<String> {
    ops.iter()
        .flat_map(|op| dtypes.iter().flat_map(move |d| [format!("{op}_{d}"), format!("{op}_finish_{d}")]))
        .collect()
}

fn softmax() -> Vec<String> {
    names(&["softmax", "log_softmax"], FLOATS)
}

fn select() -> Vec<String> {
    names(&["where", "masked_fill", "triu", "tril"], &all_dtypes())
}

fn indexing() -> Vec<String> {
    let mut v = Vec::new();
    for index in INDEX_TYPES {
        for d in all_dtypes() {
            v.push(format!("index_select_{index}_{d}"));
            v.push(format!("gather_{index}_{d}"));
        }
    }
    v.extend(names(&["copy", "fill"], WIDTHS));
    v
}

fn random() -> Vec<String> {
    names(&["uniform", "normal"], FLOATS)
}

fn adamw() -> Vec<String> {
    names(&["adamw"], FLOATS)
}

/// Levenshtein distance, for "did you mean" on unknown kernel names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::op::{BinaryOp, CmpOp, LogicalOp, ReduceOp, UnaryOp};
    use crate::dtype::DType;

    #[test]
    fn every_cu_file_is_registered_and_every_module_exists() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".cu"))
            .collect();
        on_disk.sort();
        let mut registered: Vec<String> = MODULES.iter().map(|m| m.file.to_string()).collect();
        registered.sort();
        assert_eq!(on_disk, registered);
        for m in MODULES {
            assert_eq!(m.file, format!("{}.cu", m.name));
            assert_eq!(std::fs::read_to_string(dir.join(m.file)).unwrap(), m.source);
        }
    }

    #[test]
    fn kernel_names_are_unique_across_modules() {
        let mut all: Vec<String> = MODULES.iter().flat_map(|m| m.kernel_names()).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        // The counts NVRTC reports for sm_80 (checked by `check_all`).
        let counts: Vec<(&str, usize)> = MODULES.iter().map(|m| (m.name, m.kernel_names().len())).collect();
        assert_eq!(
            counts,
            [
                ("unary", 103),
                ("binary", 193),
                ("cast", 64),
                ("reduce", 88),
                ("softmax", 8),
                ("select", 32),
                ("indexing", 40),
                ("random", 8),
                ("adamw", 4)
            ]
        );
    }

    #[test]
    fn every_op_the_cpu_side_names_has_kernels_for_f32() {
        for &op in UnaryOp::ALL {
            assert_eq!(module_for_kernel(&op.kernel(DType::F32)).unwrap().name, "unary");
        }
        for &op in BinaryOp::ALL {
            assert_eq!(module_for_kernel(&op.kernel(DType::BF16)).unwrap().name, "binary");
        }
        for &op in CmpOp::ALL {
            assert_eq!(module_for_kernel(&op.kernel(DType::BF16)).unwrap().name, "binary");
        }
        assert_eq!(module_for_kernel("cast_bf16_i64").unwrap().name, "cast");
        assert_eq!(module_for_kernel("argmax_f16").unwrap().name, "reduce");
        assert_eq!(module_for_kernel("index_select_i32_bool").unwrap().name, "indexing");
    }

    /// Every variant of every op enum, for every dtype the front end sends to the GPU: the
    /// kernels its launcher names (`CudaStorage::unary`, `binary`, `binary_scalar`, `compare`,
    /// `compare_scalar`, `logical`, `reduce` take the enum and launch what it names) are defined
    /// in the `.cu` file read from disk, and the registry, through which a launch finds its
    /// module, lists them in that module. A variant added without its kernel fails here, on any
    /// machine, instead of on a GPU at run time.
    #[test]
    fn every_op_variant_has_its_kernel_in_kernels_cu_and_a_launcher() {
        const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];
        const INTS: [DType; 3] = [DType::I64, DType::I32, DType::U8];
        let numeric = [FLOATS.as_slice(), &INTS].concat();
        let mut wanted: Vec<(&str, String)> = Vec::new();
        for &op in UnaryOp::ALL {
            // u8 abs and relu are a copy, and u8 neg an error, in the front end.
            let ints: &[DType] = if op.takes_integers() { &[DType::I64, DType::I32] } else { &[] };
            wanted.extend(FLOATS.iter().chain(ints).map(|&d| ("unary", op.kernel(d))));
        }
        for &op in BinaryOp::ALL {
            // Integer division and powers are computed in floating point by the front end.
            let float_only = matches!(op, BinaryOp::Div | BinaryOp::Pow);
            for &d in if float_only { &FLOATS[..] } else { &numeric } {
                wanted.push(("binary", op.kernel(d)));
                wanted.push(("binary", op.scalar_kernel(d, false)));
                // `rsub_scalar` etc.: commutative ops need no reversed kernel.
                if matches!(op, BinaryOp::Sub | BinaryOp::Div | BinaryOp::Pow) {
                    wanted.push(("binary", op.scalar_kernel(d, true)));
                }
            }
        }
        for &op in CmpOp::ALL {
            let with_bool = matches!(op, CmpOp::Eq | CmpOp::Ne);
            for &d in numeric.iter().chain(with_bool.then_some(&DType::Bool)) {
                wanted.push(("binary", op.kernel(d)));
                wanted.push(("binary", op.scalar_kernel(d)));
            }
        }
        wanted.extend(LogicalOp::ALL.iter().map(|op| ("binary", op.kernel())));
        for &op in ReduceOp::ALL {
            let dtypes: Vec<DType> = match op {
                ReduceOp::Sum => [numeric.as_slice(), &[DType::Bool]].concat(),
                ReduceOp::Mean | ReduceOp::Var(_) => FLOATS.to_vec(),
                ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin => numeric.clone(),
            };
            for d in dtypes {
                wanted.push(("reduce", op.kernel(d)));
                wanted.push(("reduce", op.finish_kernel(d)));
            }
        }
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let headers: Vec<String> =
            HEADERS.iter().map(|(name, _)| std::fs::read_to_string(dir.join(name)).unwrap()).collect();
        let mut problems = Vec::new();
        for (module, kernel) in &wanted {
            let file = format!("{module}.cu");
            let source = std::fs::read_to_string(dir.join(&file)).unwrap();
            if !cu::entry_points(&source, &headers).contains(kernel) {
                problems.push(format!("`{kernel}` is not defined in kernels/{file}"));
            }
            match module_for_kernel(kernel) {
                Ok(m) if m.name == *module => {}
                Ok(m) => problems.push(format!("`{kernel}` is registered in `{}`, not `{module}`", m.name)),
                Err(_) => problems.push(format!("`{kernel}` is not in the registry")),
            }
        }
        assert!(problems.is_empty(), "op variants without their kernel:\n{}", problems.join("\n"));
    }

    #[test]
    fn entry_points_are_found_through_the_macros_that_define_them() {
        let header = "#define FOR_TWO(M, ...) M(f32, __VA_ARGS__) M(i64, __VA_ARGS__)\n".to_string();
        let source = "// FOR_TWO(UNARY, commented, Out)\n\
                      #define UNARY(T, NAME, OP) \\\n    extern \"C\" __global__ void NAME##_##T(const T *x) {}\n\
                      #define TWICE(T, _u) UNARY(T, first, A) UNARY(T, second, B)\n\
                      FOR_TWO(UNARY, neg, Neg)\nTWICE(bool, _)\n\
                      extern \"C\" __global__ void plain(int n) {}\n";
        assert_eq!(
            cu::entry_points(source, &[header]),
            ["neg_f32", "neg_i64", "first_bool", "second_bool", "plain"]
        );
    }

    #[test]
    fn unknown_kernels_name_the_closest_one() {
        let err = module_for_kernel("ad_f32").unwrap_err();
        insta::assert_snapshot!(err.render(100));
        assert!(matches!(
            module_for_kernel("nothing_like_it"),
            Err(CudaError::UnknownKernel { suggestion: None, .. })
        ));
    }

    #[test]
    fn arch_strings_are_validated() {
        assert!(Arch::parse("sm_80").unwrap().is_real());
        assert!(Arch::parse("sm_90a").unwrap().is_real());
        assert!(!Arch::parse("compute_90").unwrap().is_real());
        for bad in ["80", "sm80", "sm_", "sm_8", "gfx90a", "sm_80ab"] {
            assert!(matches!(Arch::parse(bad), Err(CudaError::InvalidArch { .. })), "{bad}");
        }
        insta::assert_snapshot!(check_all("ampere", &[]).unwrap_err().render(100));
    }

    #[test]
    fn registry_mismatches_list_both_sides() {
        let m = module("softmax").unwrap();
        let arch = Arch::parse("sm_80").unwrap();
        let listed = vec!["softmax_f32".to_string(), "log_softmax_f32".to_string()];
        let compiled = vec!["softmax_f32".to_string(), "softmax_f64".to_string()];
        let err = registry_mismatch(m, &arch, &listed, &compiled).unwrap_err();
        insta::assert_snapshot!(err.render(100));
        assert!(registry_mismatch(m, &arch, &listed, &listed).is_ok());
    }

    #[test]
    fn entry_points_are_read_from_ptx() {
        let compiled = Compiled {
            ptx: ".version 8.8\n.visible .entry add_f32(\n\t.param .u64 a\n)\n.visible .entry mul_f32(\n"
                .into(),
            cubin: None,
            log: String::new(),
        };
        assert_eq!(compiled.entry_points(), ["add_f32", "mul_f32"]);
    }

    #[test]
    fn parameter_lists_are_read_from_ptx_entries_only() {
        use super::nvrtc::PtxParam::{Bits, F64, Other};
        let ptx = ".visible .entry fill_u16(\n\t.param .u64 fill_u16_param_0,\n\t.param .u64 fill_u16_param_1,\n\
                   \t.param .u16 fill_u16_param_2\n)\n{\n\t.param .b64 param0;\n}\n\
                   .visible .entry scale_f32(\n\t.param .f64 scale_f32_param_0,\n\
                   \t.param .align 8 .b8 scale_f32_param_1[16]\n)\n.visible .entry nothing()\n";
        let compiled = Compiled { ptx: ptx.into(), cubin: None, log: String::new() };
        assert_eq!(
            compiled.signatures(),
            [
                ("fill_u16".to_string(), vec![Bits(64), Bits(64), Bits(16)]),
                ("scale_f32".to_string(), vec![F64, Other]),
                ("nothing".to_string(), vec![]),
            ]
        );
    }

    /// Just enough of the C preprocessor to list the kernels a `.cu` file defines, without NVRTC:
    /// the function-like `#define`s of the file and of the shared headers are expanded in the
    /// file's other lines (parameters, `__VA_ARGS__`, `##` pasting, expansions of expansions),
    /// and every `extern "C" __global__ void NAME` in the result is an entry point. Comments are
    /// dropped first; object-like macros and conditionals are left alone (no kernel name is made
    /// with them).
    mod cu {
        use std::collections::HashMap;

        struct Macro {
            params: Vec<String>,
            body: String,
        }

        pub fn entry_points(source: &str, headers: &[String]) -> Vec<String> {
            let mut macros = HashMap::new();
            let mut text = String::new();
            for (file, is_source) in headers.iter().map(|h| (h.as_str(), false)).chain([(source, true)]) {
                for line in strip_comments(&file.replace("\\\n", " ")).lines() {
                    let line = line.trim_start();
                    if let Some(definition) = line.strip_prefix("#define") {
                        define(definition.trim_start(), &mut macros);
                    } else if is_source && !line.starts_with('#') {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
            }
            let expanded = expand(&text, &macros, &mut Vec::new());
            let words: Vec<&str> = expanded.split_whitespace().collect();
            let mut found = Vec::new();
            let flat = words.join(" ");
            for (at, _) in flat.match_indices("extern \"C\" __global__ void ") {
                let rest = &flat[at + "extern \"C\" __global__ void ".len()..];
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                found.push(name);
            }
            found
        }

        fn strip_comments(code: &str) -> String {
            let mut out = String::with_capacity(code.len());
            let mut chars = code.chars().peekable();
            let mut in_string = false;
            while let Some(c) = chars.next() {
                if in_string {
                    in_string = c != '"';
                    out.push(c);
                } else if c == '"' {
                    in_string = true;
                    out.push(c);
                } else if c == '/' && chars.peek() == Some(&'/') {
                    while chars.peek().is_some_and(|&c| c != '\n') {
                        chars.next();
                    }
                } else if c == '/' && chars.peek() == Some(&'*') {
                    chars.next();
                    let mut last = ' ';
                    for c in chars.by_ref() {
                        if last == '*' && c == '/' {
                            break;
                        }
                        last = c;
                    }
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            out
        }

        /// `NAME(params) body`; object-like macros are skipped.
        fn define(definition: &str, macros: &mut HashMap<String, Macro>) {
            let name_end =
                definition.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(definition.len());
            let (name, rest) = definition.split_at(name_end);
            let Some(rest) = rest.strip_prefix('(') else { return };
            let Some((params, body)) = rest.split_once(')') else { return };
            let params = params.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect();
            macros.insert(name.to_string(), Macro { params, body: body.trim().to_string() });
        }

        /// Identifiers, `##`, single other characters, and runs of whitespace, in order.
        fn tokens(text: &str) -> Vec<String> {
            let chars: Vec<char> = text.chars().collect();
            let mut out = Vec::new();
            let mut i = 0;
            while i < chars.len() {
                let start = i;
                let c = chars[i];
                if c.is_alphanumeric() || c == '_' {
                    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                } else if c.is_whitespace() {
                    while i < chars.len() && chars[i].is_whitespace() {
                        i += 1;
                    }
                } else if c == '#' && chars.get(i + 1) == Some(&'#') {
                    i += 2;
                } else {
                    i += 1;
                }
                out.push(chars[start..i].iter().collect());
            }
            out
        }

        fn expand(text: &str, macros: &HashMap<String, Macro>, active: &mut Vec<String>) -> String {
            let tokens = tokens(text);
            let mut out = String::new();
            let mut i = 0;
            while i < tokens.len() {
                let token = &tokens[i];
                if let Some(m) = macros.get(token).filter(|_| !active.contains(token)) {
                    let open = (i + 1..tokens.len()).find(|&j| !tokens[j].trim().is_empty());
                    if let Some(open) = open.filter(|&j| tokens[j] == "(") {
                        let (args, close) = arguments(&tokens, open);
                        active.push(token.clone());
                        out.push_str(&expand(&substitute(m, &args), macros, active));
                        active.pop();
                        i = close + 1;
                        continue;
                    }
                }
                out.push_str(token);
                i += 1;
            }
            out
        }

        /// The arguments of the call whose `(` is `tokens[open]`, and the index of its `)`.
        fn arguments(tokens: &[String], open: usize) -> (Vec<String>, usize) {
            let (mut args, mut current, mut depth) = (Vec::new(), String::new(), 0);
            for (j, token) in tokens.iter().enumerate().skip(open + 1) {
                match token.as_str() {
                    ")" if depth == 0 => {
                        args.push(current.trim().to_string());
                        return (args, j);
                    }
                    "," if depth == 0 => args.push(std::mem::take(&mut current).trim().to_string()),
                    t => {
                        depth += usize::from(t == "(");
                        depth -= usize::from(t == ")");
                        current.push_str(t);
                    }
                }
            }
            (args, tokens.len())
        }

        fn substitute(m: &Macro, args: &[String]) -> String {
            let mut out: Vec<String> = Vec::new();
            let mut paste = false;
            for token in tokens(&m.body) {
                if token == "##" {
                    while out.last().is_some_and(|t| t.trim().is_empty()) {
                        out.pop();
                    }
                    paste = true;
                    continue;
                }
                if paste && token.trim().is_empty() {
                    continue;
                }
                let value = if token == "__VA_ARGS__" {
                    let first = m.params.iter().position(|p| p == "...").unwrap_or(m.params.len());
                    args.get(first..).unwrap_or_default().join(", ")
                } else if let Some(k) = m.params.iter().position(|p| *p == token) {
                    args.get(k).cloned().unwrap_or_default()
                } else {
                    token
                };
                match out.last_mut() {
                    Some(last) if paste => last.push_str(&value),
                    _ => out.push(value),
                }
                paste = false;
            }
            out.concat()
        }
    }
}
