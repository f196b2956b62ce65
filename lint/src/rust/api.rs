//! What the linter knows of the Rust frameworks' APIs (devcheck, candle, tch, burn): which
//! crates a file uses, what tensor creation, device values, transfers and host reads look like
//! in each. The counterpart of [`crate::python::api`] for PyTorch. A file's APIs come from its
//! `use` lines; `--api` overrides.

pub(crate) use crate::source::{Api, ApiSet};

/// Reads a file's APIs from its `use` and `extern crate` items (in every module of the file); if
/// there are none, from fully qualified paths such as `candle_core::Tensor` in its text.
pub(crate) fn detect(file: &syn::File, text: &str) -> ApiSet {
    let mut set = ApiSet::EMPTY;
    collect_uses(&file.items, &mut set);
    if set.is_empty() {
        for (needle, api) in [
            ("devcheck::", Api::Devcheck),
            ("candle_core::", Api::Candle),
            ("candle::", Api::Candle),
            ("candle_nn::", Api::Candle),
            ("tch::", Api::Tch),
            ("burn::", Api::Burn),
        ] {
            if text.contains(needle) {
                set.insert(api);
            }
        }
    }
    set
}

fn collect_uses(items: &[syn::Item], set: &mut ApiSet) {
    for item in items {
        match item {
            syn::Item::Use(u) => use_tree_roots(&u.tree, set),
            syn::Item::ExternCrate(c) => {
                if let Some(api) = Api::of_crate(&c.ident.to_string()) {
                    set.insert(api);
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    collect_uses(items, set);
                }
            }
            syn::Item::Fn(f) => {
                for stmt in &f.block.stmts {
                    if let syn::Stmt::Item(syn::Item::Use(u)) = stmt {
                        use_tree_roots(&u.tree, set);
                    }
                }
            }
            _ => {}
        }
    }
}

fn use_tree_roots(tree: &syn::UseTree, set: &mut ApiSet) {
    match tree {
        syn::UseTree::Path(p) => {
            if let Some(api) = Api::of_crate(&p.ident.to_string()) {
                set.insert(api);
            }
        }
        syn::UseTree::Name(n) => {
            if let Some(api) = Api::of_crate(&n.ident.to_string()) {
                set.insert(api);
            }
        }
        syn::UseTree::Rename(r) => {
            if let Some(api) = Api::of_crate(&r.ident.to_string()) {
                set.insert(api);
            }
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_tree_roots(t, set);
            }
        }
        syn::UseTree::Glob(_) => {}
    }
}

/// How a tensor constructor gets its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CtorDevice {
    /// The last argument is the device (or dtype+device options).
    LastArg,
    /// tch's `Tensor::from_slice(&data)`: always on the CPU.
    ImplicitCpu,
}

/// Is `Tensor::<name>` with `nargs` arguments a constructor that places a new tensor?
pub(crate) fn tensor_ctor(apis: ApiSet, name: &str, nargs: usize) -> Option<CtorDevice> {
    const DEVCHECK: &[&str] = &[
        "zeros",
        "ones",
        "full",
        "arange",
        "linspace",
        "rand",
        "randn",
        "eye",
        "from_vec",
        "from_slice",
        "scalar",
        "from_raw_bytes",
        "from_ndarray",
    ];
    const CANDLE: &[&str] = &[
        "zeros",
        "ones",
        "full",
        "new",
        "arange",
        "arange_step",
        "from_vec",
        "from_slice",
        "from_iter",
        "rand",
        "randn",
        "eye",
        "tril2",
        "triu2",
        "from_raw_buffer",
    ];
    const TCH: &[&str] = &[
        "zeros",
        "ones",
        "full",
        "arange",
        "arange_start",
        "arange_start_step",
        "rand",
        "randn",
        "randint",
        "randint_low",
        "eye",
        "empty",
        "linspace",
        "logspace",
        "f_zeros",
        "f_ones",
        "f_full",
        "f_arange",
        "f_rand",
        "f_randn",
        "f_eye",
        "f_empty",
    ];
    const TCH_IMPLICIT_CPU: &[&str] = &["from_slice", "of_slice", "from_slice2", "of_slice2", "f_from_slice"];
    const BURN: &[&str] = &[
        "zeros",
        "ones",
        "full",
        "empty",
        "arange",
        "arange_step",
        "random",
        "from_data",
        "from_floats",
        "from_ints",
        "from_bool",
    ];
    if apis.may_be(Api::Tch) && nargs == 1 && TCH_IMPLICIT_CPU.contains(&name) {
        return Some(CtorDevice::ImplicitCpu);
    }
    if nargs < 2 {
        return None;
    }
    let known = (apis.may_be(Api::Devcheck) && DEVCHECK.contains(&name))
        || (apis.may_be(Api::Candle) && CANDLE.contains(&name))
        || (apis.may_be(Api::Tch) && TCH.contains(&name))
        || (apis.may_be(Api::Burn) && BURN.contains(&name));
    known.then_some(CtorDevice::LastArg)
}

/// Names that are a tensor move in some API (whatever the file uses).
pub(crate) fn is_transfer_name(name: &str) -> bool {
    matches!(name, "to_device" | "to" | "cpu" | "cuda" | "to_non_blocking")
}

/// Methods that copy a tensor to another device and return the copy.
pub(crate) fn is_transfer_method(apis: ApiSet, name: &str) -> bool {
    match name {
        "to_device" => apis.may_be(Api::Candle) || apis.may_be(Api::Tch) || apis.may_be(Api::Burn),
        "to" | "cpu" | "cuda" => apis.is(Api::Devcheck) || apis.is(Api::Tch),
        "to_non_blocking" => apis.may_be(Api::Devcheck),
        _ => false,
    }
}

/// Methods that read tensor data back to the host (and so wait for the device).
pub(crate) fn is_host_read(apis: ApiSet, name: &str, has_turbofish: bool) -> bool {
    match name {
        "to_vec0" | "to_vec1" | "to_vec2" | "to_vec3" => {
            apis.may_be(Api::Candle) || apis.may_be(Api::Devcheck)
        }
        "to_scalar" => apis.may_be(Api::Candle) || apis.may_be(Api::Devcheck),
        // `<[T]>::to_vec` is everywhere; a tensor's takes the element type.
        "to_vec" => has_turbofish && apis.may_be(Api::Devcheck),
        "item" => apis.may_be(Api::Devcheck) || apis.may_be(Api::Tch),
        "to_raw_bytes" | "to_ndarray" | "with_ndarray" => apis.may_be(Api::Devcheck),
        "double_value" | "int64_value" | "f_double_value" | "f_int64_value" => apis.may_be(Api::Tch),
        "into_scalar" | "into_data" | "to_data" => apis.may_be(Api::Burn),
        _ => false,
    }
}

/// Calls that wait for the device: explicit synchronisation, or a host read.
pub(crate) fn is_sync_method(name: &str) -> bool {
    matches!(
        name,
        "synchronize"
            | "sync"
            | "cuda_synchronize"
            | "f_cuda_synchronize"
            | "device_synchronize"
            | "synchronize_device"
    )
}
