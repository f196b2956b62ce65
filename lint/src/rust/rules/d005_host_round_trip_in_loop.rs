//! D005 for Rust code. What it finds, why, and its fixes: `d005_host_round_trip_in_loop.md` beside this file (what
//! `devcheck explain D005` prints); its row in the rule table is in [`crate::registry`].

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Expr, ExprMethodCall};

use crate::rust::crates::Condition;
use crate::rust::device::{DevEnv, DevSrc, FixedKind, classify_options, is_host_tensor};
use crate::diagnostic::Finding;
use crate::rust::api::{Api, is_host_read, is_transfer_method};
use crate::rust::FileCx;
use crate::rust::syntax::{Ctor, as_ident, chain_calls, chain_root, for_each_ident, macro_args, pat_idents, peel};
use crate::rust::walker::{Rule, Checker, LoopBody, cond_flags, is_slice_iterator};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// Reads already reported (by start offset), so nested loops report each once.
    reported: HashSet<usize>,
    /// Moves to the host whose result replaces what was moved (`self.data = self.data.to(Cpu)`):
    /// memory handed back, not a value read (by start offset of the method's name).
    offloads: HashSet<usize>,
}

/// Why a read in a loop is a finding.
enum Why {
    PerLayer,
    PerElement,
    Invariant,
    RoundTrip(Range<usize>),
}

impl Rule for Check {
    fn stmt(&mut self, cx: &Checker<'_, '_>, s: &syn::Stmt, _out: &mut Vec<Finding>) {
        let syn::Stmt::Expr(Expr::Assign(a), _) = s else { return };
        if let Expr::MethodCall(m) = peel(&a.right)
            && read_name(cx.file, m).is_some()
            && is_transfer_method(cx.file.apis, &m.method.to_string())
        {
            let place = |e: &Expr| cx.file.snippet(&cx.file.range(e.span())).split_whitespace().collect::<String>();
            if place(&a.left) == place(&m.receiver) {
                self.offloads.insert(cx.file.range(m.method.span()).start);
            }
        }
    }

    fn enter_loop(&mut self, cx: &Checker<'_, '_>, body: LoopBody<'_>, out: &mut Vec<Finding>) {
        if cx.in_test() || cx.quiet() || cx.scope.device_branch > 0 {
            return;
        }
        let Some(f) = cx.fun() else { return };
        if is_setup_or_report(&f.name) {
            return;
        }
        let mut scan = LoopScan::new(cx.file, &f.env, f.host.clone());
        // The variables of this loop and the loops around it; a loop over batch items or images
        // is not an element-by-element loop.
        scan.loop_vars = f.loop_vars.iter().filter(|v| !v.batch).map(|v| v.name.clone()).collect();
        scan.elements = f.loop_vars.iter().filter(|v| v.slice && !v.batch).map(|v| v.name.clone()).collect();
        scan.all_loop_vars = f.loop_vars.iter().map(|v| v.name.clone()).collect();
        match body {
            LoopBody::Block(b) => {
                scan.assigned_in(|v| v.visit_block(b));
                scan.run(|s| s.visit_block(b));
            }
            LoopBody::Closure(e) => {
                scan.assigned_in(|v| v.visit_expr(e));
                scan.run(|s| s.visit_expr(e));
            }
        }
        if scan.reads.is_empty() && scan.invariant_args.is_empty() {
            return;
        }
        let per_layer = cx.in_per_layer_loop();
        // In a loop over parameters only scalar summaries (a norm, a NaN check) are suspicious;
        // reading whole tensors is what saving a checkpoint does.
        let per_param = cx.in_param_loop();
        // Once per batch item, image or chat turn is not once per step.
        let in_batch_loop = f.batch_loops.last().copied().unwrap_or(false);
        for (i, read) in scan.reads.iter().enumerate() {
            let why = if per_layer || (per_param && read.scalar) {
                Why::PerLayer
            } else if read.per_element {
                Why::PerElement
            } else if read.invariant {
                Why::Invariant
            } else if !in_batch_loop && let Some(at) = scan.sink_for(i) {
                Why::RoundTrip(at)
            } else {
                continue;
            };
            if !self.reported.insert(read.range.start) {
                continue;
            }
            out.push(finding(&f.name, read, why));
        }
        for call in &scan.invariant_args {
            if !self.reported.insert(call.range.start) {
                continue;
            }
            out.push(
                Finding::new(
                    &registry::D005,
                    call.range.clone(),
                    format!(
                        "`{}` reads `{}` back to the host at every iteration, though `{}` does not change in the loop",
                        call.callee, call.arg_text, call.arg_text
                    ),
                )
                .label("host read in the callee")
                .help("read the tensor once before the loop and index the host copy")
                .only_if(Condition::CalleeReadsArg { at: call.at, arg: call.arg }),
            );
        }
    }

    /// A host read outside any per-layer loop of its function: a finding if the function itself
    /// runs once per layer.
    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        if !matches!(e, Expr::MethodCall(_) | Expr::Call(_)) {
            return;
        }
        if cx.in_test() || cx.scope.device_branch > 0 || cx.scope.error_branch > 0 {
            return;
        }
        let Some(f) = cx.fun() else { return };
        // A reporting function (`log_progress`) called at every training step still waits at
        // every step; only set-up code is left alone here.
        if is_setup(&f.name) {
            return;
        }
        let (what, read, range, wait) = match e {
            Expr::MethodCall(m) => {
                if let Some(what) = tch_upload(cx.file, m, &f.env) {
                    (what, &*m.receiver, cx.file.range(e.span()), Wait::Upload)
                } else if let Some(what) = sized_by_data(cx.file, m) {
                    (what, &*m.receiver, cx.file.range(m.method.span()), Wait::Sized)
                } else {
                    let Some(what) = read_name(cx.file, m).or_else(|| tch_conversion_method(cx.file, m)) else {
                        return;
                    };
                    (what, &*m.receiver, cx.file.range(m.method.span()), Wait::Read)
                }
            }
            Expr::Call(c) => {
                let Some((what, arg)) = tch_conversion_call(cx.file, c) else { return };
                (what, arg, cx.file.range(c.func.span()), Wait::Read)
            }
            _ => return,
        };
        if wait != Wait::Upload && is_host_tensor(cx.file, read, &f.env, &|n| f.host.contains(n)) {
            return;
        }
        // A training step: every read waits for the step's queued work, also one printed (a
        // `println!` runs at every step; `debug!` does not at the default level). Not a token
        // picked by `argmax` or a sampler, nor a read in a branch taken every N steps, nor one
        // that decides which way the code goes (`if grad_norm.to_scalar()? < tol { .. }`).
        let chosen = || reads_a_choice(read);
        let each_step = cx.scope.gated == 0 && cx.scope.debug_macro == 0 && cx.scope.deciding == 0 && !chosen();
        if each_step && cx.in_step_loop() && !self.offloads.contains(&range.start) {
            if self.reported.insert(range.start) {
                out.push(at_every_step(&what, wait, range, None));
            }
            return;
        }
        if cx.in_per_layer_loop() {
            // The loop's own scan reports reads; uploads and data-sized results are reported here.
            if wait != Wait::Read && cx.scope.gated == 0 && self.reported.insert(range.start) {
                let (verb, label, help) = wait.words();
                out.push(
                    Finding::new(&registry::D005, range, format!("`{what}` in a loop in `{}` {verb} at every iteration", f.name))
                        .label(label)
                        .help(help),
                );
            }
            return;
        }
        // Else it is a finding if the function runs once per layer, takes a training step that
        // runs again and again, or is called at every training step (several may hold: the
        // first kept is shown).
        let per_step: Vec<Finding> = if each_step && !self.offloads.contains(&range.start) {
            let takes_step = at_every_step(&what, wait, range.clone(), None).only_if(Condition::TakesStep(f.id));
            let called = at_every_step(&what, wait, range.clone(), Some(&f.name)).only_if(Condition::PerStep(f.id));
            let mut found = vec![takes_step, called];
            let loops = cx.loop_ids();
            if !loops.is_empty() {
                found.insert(
                    0,
                    at_every_step(&what, wait, range.clone(), None).only_if(Condition::InStepLoop(loops.to_vec())),
                );
            }
            found
        } else {
            Vec::new()
        };
        if cx.quiet() || is_report(&f.name) {
            out.extend(per_step);
            return;
        }
        let (verb, label, help) = match wait {
            Wait::Read => (
                "waits for the device",
                "host read",
                "keep the value on the device, or compute it once before the layer loop and pass it down",
            ),
            other => other.words(),
        };
        out.push(
            Finding::new(&registry::D005, range, format!("`{what}` in `{}` {verb}, and `{}` runs once per layer", f.name, f.name))
                .label(label)
                .help(help)
                .only_if(Condition::PerLayer(f.id)),
        );
        out.extend(per_step);
    }
}

/// tch's conversions of a tensor to host values: `f32::try_from(&t)`, `f64::try_from(t)`,
/// `Vec::<f32>::try_from(&t)`, `ArrayD::<f32>::try_from(..)`. (`i64::try_from(n)` is as often a
/// number's conversion, and is left alone.)
fn tch_conversion_call<'e>(file: &FileCx<'_>, c: &'e syn::ExprCall) -> Option<(String, &'e Expr)> {
    if !file.apis.is(Api::Tch) || c.args.len() != 1 {
        return None;
    }
    let Expr::Path(p) = &*c.func else { return None };
    let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let [.., ty, f] = segs.as_slice() else { return None };
    if f != "try_from" || !matches!(ty.as_str(), "f32" | "f64" | "Vec" | "ArrayD" | "Array1" | "Array2") {
        return None;
    }
    Some((format!("{ty}::try_from(..)"), c.args.first()?))
}

/// `t.f_sum(Kind::Float)?.try_into()?`: tch's conversion of a reduced tensor to a host value.
fn tch_conversion_method(file: &FileCx<'_>, m: &ExprMethodCall) -> Option<String> {
    if !file.apis.is(Api::Tch) || m.method != "try_into" || !m.args.is_empty() {
        return None;
    }
    let reduced = chain_calls(&m.receiver).iter().any(|c| {
        let name = c.method.to_string();
        let name = name.strip_prefix("f_").unwrap_or(&name);
        matches!(name, "sum" | "mean" | "max" | "min" | "norm" | "argmax" | "sum_dim_intlist" | "mean_dim")
    });
    reduced.then(|| ".try_into()".to_string())
}

/// How a finding's call waits for the device.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// It reads device data on the host.
    Read,
    /// It copies a tensor made on the host to the device: PyTorch's blocking copy (tch) waits
    /// for the stream, as a read does.
    Upload,
    /// Its result's size is the data's (`masked_select`, `nonzero`): the host waits for the count.
    Sized,
}

impl Wait {
    /// The verb of the message, the label and the help.
    fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Wait::Read => (
                "waits for the device",
                "host read",
                "keep the value on the device (add losses and metrics up as tensors) and read it every N steps or once after the loop",
            ),
            Wait::Upload => (
                "copies a host tensor to the device and waits for the copy",
                "blocking upload",
                "make it on the device (`Tensor::zeros(&[], (kind, device))`, `Tensor::full(..)`), or make it once outside the loop and reuse it",
            ),
            Wait::Sized => (
                "sizes its result by the data, so the host waits for the device",
                "sized by the data",
                "keep a fixed shape: multiply by the mask (or `where_self`) instead of selecting, or select once after the loop",
            ),
        }
    }
}

/// tch's `masked_select` and `nonzero`, burn's `argwhere` and `nonzero`: the host must know how
/// many elements the result has before it can be made.
fn sized_by_data(file: &FileCx<'_>, m: &ExprMethodCall) -> Option<String> {
    let name = m.method.to_string();
    let sized = match name.as_str() {
        "masked_select" | "f_masked_select" | "f_nonzero" | "f_argwhere" => file.apis.is(Api::Tch),
        "nonzero" | "argwhere" => file.apis.is(Api::Tch) || file.apis.is(Api::Burn),
        _ => false,
    };
    sized.then(|| format!(".{name}(..)"))
}

/// tch's upload of a constant made on the host (`Tensor::from(0.).to_device(d)`,
/// `Tensor::of_slice(&[1., 0.]).to(d)`): libtorch's blocking copy waits for the device's stream.
fn tch_upload(file: &FileCx<'_>, m: &ExprMethodCall, env: &DevEnv) -> Option<String> {
    let method = m.method.to_string();
    if !file.apis.is(Api::Tch) || !matches!(method.as_str(), "to_device" | "to") || m.args.len() != 1 {
        return None;
    }
    let Expr::Call(c) = peel(&m.receiver) else { return None };
    let Expr::Path(p) = &*c.func else { return None };
    let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let [.., ty, made] = segs.as_slice() else { return None };
    // Only constants: a batch of data (`Tensor::from_slice(&batch)`) has to be uploaded.
    let constant = match made.as_str() {
        "from" => c.args.len() == 1 && c.args.first().is_some_and(is_literal),
        "of_slice" | "from_slice" | "f_from_slice" | "f_of_slice" => {
            matches!(c.args.first().map(peel), Some(Expr::Array(a)) if a.elems.iter().all(is_literal))
        }
        _ => false,
    };
    if ty != "Tensor" || !constant {
        return None;
    }
    let target = m.args.first()?;
    if matches!(
        classify_options(file, target, env, &|_| None),
        Some(DevSrc::Fixed { kind: FixedKind::Cpu, .. })
    ) {
        return None;
    }
    Some(format!("Tensor::{made}(..).{method}(..)"))
}

/// A number or boolean written out (`0.`, `-1`, `true`).
fn is_literal(e: &Expr) -> bool {
    match peel(e) {
        Expr::Lit(l) => matches!(l.lit, syn::Lit::Int(_) | syn::Lit::Float(_) | syn::Lit::Bool(_)),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => is_literal(&u.expr),
        _ => false,
    }
}

/// A read (or blocking upload) that waits for the device at every training step: in the step's
/// own code, or in a function (`in_fn`) that the step calls.
fn at_every_step(what: &str, wait: Wait, range: Range<usize>, in_fn: Option<&str>) -> Finding {
    let (verb, label, help) = wait.words();
    let message = match in_fn {
        None => format!("`{what}` {verb} at every training step"),
        Some(f) => format!("`{what}` in `{f}` {verb}, and `{f}` runs at every training step"),
    };
    Finding::new(&registry::D005, range, message).label(label).help(help)
}

fn finding(in_fn: &str, read: &Read, why: Why) -> Finding {
    let what = &read.what;
    let (message, help) = match &why {
        Why::PerLayer => (
            format!("`{what}` in a loop in `{in_fn}` waits for the device at every iteration"),
            "keep the computation on the device, or collect what you need and read it once after the loop",
        ),
        Why::PerElement => (
            format!("`{what}` reads one element per iteration: a device round trip for each element"),
            "read the whole tensor once before the loop (`to_vec*`, `into_data`) and index the host copy, or use a tensor op",
        ),
        Why::Invariant => (
            format!("`{what}` reads the same tensor back at every iteration: it does not change in the loop"),
            "read it once before the loop and reuse the host copy",
        ),
        Why::RoundTrip(_) => (
            format!(
                "`{what}` in a loop reads device data on the host every iteration, and the value goes back to the device"
            ),
            "keep the value on the device (use tensor ops such as `argmax`, `gather`, `where_cond` instead of reading it), or read once after the loop",
        ),
    };
    let mut finding = Finding::new(&registry::D005, read.range.clone(), message)
        .label("host read")
        .help(help);
    if let Why::RoundTrip(at) = why {
        finding = finding.related(at, "back to the device here");
    }
    finding
}

/// The name of a host read (`.to_vec1()`, `.to_device(&Device::Cpu)`), if `m` is one.
fn read_name(file: &FileCx<'_>, m: &ExprMethodCall) -> Option<String> {
    let name = m.method.to_string();
    if is_host_read(file.apis, &name, m.turbofish.is_some()) {
        return Some(format!(".{name}()"));
    }
    if is_transfer_method(file.apis, &name) {
        if name == "cpu" {
            return Some(".cpu()".to_string());
        }
        let target = m.args.first()?;
        let src = classify_options(file, target, &DevEnv::default(), &|_| None)?;
        if matches!(src, DevSrc::Fixed { kind: FixedKind::Cpu, .. }) {
            return Some(format!(".{name}({})", file.short(&file.range(target.span()))));
        }
    }
    None
}

/// Setup code (`new`, `load`, `init_weights`: it runs once) and reporting code (`print_stats`,
/// `dump`, `log_metrics`: its reads are for people) read the host on purpose.
fn is_setup_or_report(name: &str) -> bool {
    is_setup(name) || is_report(name)
}

fn is_setup(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["new", "load", "init", "build", "setup", "save", "export", "from_", "create"].iter().any(|w| name.starts_with(w))
}

fn is_report(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["print", "log", "dump", "report", "stats", "debug", "summary", "display", "show"].iter().any(|w| name.contains(w))
}

/// A read that yields one number (rather than a whole tensor's data).
fn is_scalar_read(name: &str) -> bool {
    matches!(
        name,
        "to_scalar"
            | "item"
            | "into_scalar"
            | "to_vec0"
            | "double_value"
            | "int64_value"
            | "f_double_value"
            | "f_int64_value"
    )
}

/// Methods that pick part of a tensor.
fn is_index_method(name: &str) -> bool {
    matches!(
        name,
        "i" | "get" | "slice" | "narrow" | "select" | "index_select" | "slice_dim" | "index" | "gather"
    )
}

/// Is `e` the token or action chosen by `argmax`/a sampler, perhaps reshaped or converted
/// (`logits.argmax(D::Minus1)?.squeeze(0)?`), rather than something computed from it (an
/// accuracy: `argmax(..)?.eq(labels)?.sum_all()?`)?
fn reads_a_choice(e: &Expr) -> bool {
    let mut e = peel(e);
    while let Expr::MethodCall(m) = e {
        let name = m.method.to_string();
        if is_choice(&name) {
            return true;
        }
        if !matches!(
            name.as_str(),
            "squeeze" | "unsqueeze" | "reshape" | "flatten" | "flatten_all" | "to_dtype" | "to_kind" | "contiguous"
                | "detach" | "clone" | "i" | "get" | "narrow" | "int" | "float" | "view" | "to_device"
        ) {
            return false;
        }
        e = peel(&m.receiver);
    }
    false
}

/// A sampler's name (`sample`, `sample_top_p`, `logits_processor.sample`), not a resampling of a
/// signal or an image (`upsample_nearest2d`, `downsample`, `resample`).
fn is_sampling(name: &str) -> bool {
    name.contains("sample") && !name.contains("upsample") && !name.contains("downsample") && !name.contains("resample")
}

/// Methods whose result is a discrete choice over a tensor: reading it is sampling.
fn is_choice(name: &str) -> bool {
    matches!(
        name,
        "argmax" | "argmin" | "argmax_keepdim" | "argmin_keepdim" | "multinomial" | "sample" | "topk"
    )
}

struct Read {
    range: Range<usize>,
    what: String,
    scalar: bool,
    /// One slice picked by the loop's variable, or an item of a loop over a tensor's slices.
    per_element: bool,
    /// The tensor read is made before the loop and not changed in it.
    invariant: bool,
    /// A token chosen by `argmax`/a sampler.
    choice: bool,
}

/// A call inside the loop that passes a tensor made before the loop to a function of the crate.
struct InvariantArg {
    range: Range<usize>,
    /// Where the call's name starts: how the crate-wide pass knows the call.
    at: usize,
    arg: u32,
    callee: String,
    arg_text: String,
}

/// Reads the body of one loop: host reads, how host values flow between names in program order,
/// where they reach the device again, and which values decide whether the loop stops.
struct LoopScan<'a, 'f> {
    file: &'a FileCx<'f>,
    env: &'a DevEnv,
    /// Host tensors: the function's, then the loop's own `let`s.
    host: HashSet<String>,
    /// Variables bound by the loop's pattern (and by enclosing loops'), but not of loops over
    /// batch items or images.
    loop_vars: HashSet<String>,
    /// Every loop variable, for what changes from one iteration to the next.
    all_loop_vars: HashSet<String>,
    /// Inside a branch that leaves the loop or the program (`if x.is_nan() { dump(); panic!() }`):
    /// it runs once, not per iteration.
    once: u32,
    /// Names bound or assigned inside the loop body.
    changed: HashSet<String>,
    /// Locals holding one element picked by a loop variable, or a slice of a loop over slices.
    elements: HashSet<String>,
    reads: Vec<Read>,
    /// Reads by start offset, so the second pass finds the first pass's.
    read_at: HashMap<usize, usize>,
    invariant_args: Vec<InvariantArg>,
    /// Names carrying host data, with the reads it came from (a bit per read), in program order.
    tainted: HashMap<String, u64>,
    /// Where host data went back to the device, with the reads it came from.
    sinks: Vec<(Range<usize>, u64)>,
    /// The reads whose values decide whether the loop stops (`if tok == eos { break }`).
    stops_on: u64,
    /// The reads whose values a sampler takes (`sample_top_p(&logits, ..)`): token choice.
    sampled: u64,
    /// The reads seen inside the value being visited, innermost value last.
    acc: Vec<u64>,
    /// The second pass over the body only follows values around the loop's back edge.
    second_pass: bool,
}

impl<'a, 'f> LoopScan<'a, 'f> {
    fn new(file: &'a FileCx<'f>, env: &'a DevEnv, host: HashSet<String>) -> Self {
        LoopScan {
            file,
            env,
            host,
            loop_vars: HashSet::new(),
            all_loop_vars: HashSet::new(),
            once: 0,
            changed: HashSet::new(),
            elements: HashSet::new(),
            reads: Vec::new(),
            read_at: HashMap::new(),
            invariant_args: Vec::new(),
            tainted: HashMap::new(),
            sinks: Vec::new(),
            stops_on: 0,
            sampled: 0,
            acc: Vec::new(),
            second_pass: false,
        }
    }

    /// Collects the names the body binds or assigns (so a tensor read there may change).
    fn assigned_in(&mut self, walk: impl FnOnce(&mut Assigned)) {
        let mut a = Assigned(HashSet::new());
        walk(&mut a);
        self.changed = a.0;
    }

    /// Two passes: values read late in one iteration may reach the device early in the next.
    fn run(&mut self, mut walk: impl FnMut(&mut Self)) {
        walk(self);
        self.second_pass = true;
        walk(self);
    }

    /// The first place read `i`'s value went back to the device, unless the read is an
    /// inherent per-token choice (sampling, or a value that decides when the loop stops).
    fn sink_for(&self, i: usize) -> Option<Range<usize>> {
        let bit = read_bit(i);
        if self.reads[i].choice || (self.stops_on | self.sampled) & bit != 0 {
            return None;
        }
        self.sinks.iter().find(|(_, mask)| mask & bit != 0).map(|(at, _)| at.clone())
    }

    fn idents(e: &Expr) -> Vec<String> {
        let mut v = Vec::new();
        for_each_ident(e, |i| v.push(i.to_string()));
        v
    }

    /// The reads whose data the names in `e` carry.
    fn mask_of(&self, e: &Expr) -> u64 {
        // Most loops read nothing back: no name carries host data, and no walk can find one.
        if self.tainted.is_empty() {
            return 0;
        }
        Self::idents(e)
            .iter()
            .chain(macro_idents(e).iter())
            .fold(0, |m, n| m | self.tainted.get(n).copied().unwrap_or(0))
    }

    /// Visits `value` stored into `targets`: they carry the host data it carries from now on
    /// (`replace`: instead of what they carried).
    fn flow_into(&mut self, targets: Vec<String>, value: &Expr, replace: bool) {
        self.acc.push(0);
        self.visit_expr(value);
        let inner = self.acc.pop().unwrap_or(0);
        let mask = inner | self.mask_of(value);
        if let Some(outer) = self.acc.last_mut() {
            *outer |= inner;
        }
        for t in targets {
            if replace {
                if mask == 0 {
                    self.tainted.remove(&t);
                } else {
                    self.tainted.insert(t, mask);
                }
            } else if mask != 0 {
                *self.tainted.entry(t).or_default() |= mask;
            }
        }
    }

    fn note_read(&mut self, m: &ExprMethodCall, what: String) {
        let range = self.file.range(m.method.span());
        if let Some(&i) = self.read_at.get(&range.start) {
            if let Some(top) = self.acc.last_mut() {
                *top |= read_bit(i);
            }
            return;
        }
        if self.second_pass
            || self.once > 0
            || is_host_tensor(self.file, &m.receiver, self.env, &|n| self.host.contains(n))
        {
            return;
        }
        self.read_at.insert(range.start, self.reads.len());
        if let Some(top) = self.acc.last_mut() {
            *top |= read_bit(self.reads.len());
        }
        let calls = chain_calls(&m.receiver);
        let root = chain_root(&m.receiver);
        let root_name = as_ident(root).map(|i| i.to_string());
        let mentions_loop_var = |e: &Expr| Self::idents(e).iter().any(|n| self.loop_vars.contains(n));
        let indexed_by_loop = calls.iter().any(|c| {
            is_index_method(&c.method.to_string())
                && c.args.iter().any(|a| mentions_loop_var(a) || macro_mentions(a, &self.loop_vars))
        });
        let per_element = indexed_by_loop || root_name.as_ref().is_some_and(|n| self.elements.contains(n));
        let varies = |n: &String| self.changed.contains(n) || self.all_loop_vars.contains(n);
        let arg_varies = |a: &Expr| {
            Self::idents(a).iter().any(varies)
                || macro_mentions(a, &self.changed)
                || macro_mentions(a, &self.all_loop_vars)
        };
        let invariant = root_name.as_ref().is_some_and(|n| !varies(n))
            && calls.iter().all(|c| !c.args.iter().any(arg_varies))
            && !m.args.iter().any(arg_varies);
        let choice = calls.iter().any(|c| is_choice(&c.method.to_string()));
        self.reads.push(Read {
            range,
            what,
            scalar: is_scalar_read(&m.method.to_string()),
            per_element,
            invariant,
            choice,
        });
    }

    /// A call to a function with a tensor made before the loop (`get(i, &rewards)`): the callee
    /// may read it again at every iteration.
    fn note_call_args(
        &mut self,
        callee: String,
        args: &syn::punctuated::Punctuated<Expr, syn::Token![,]>,
        at: Range<usize>,
        shown: impl FnOnce() -> Range<usize>,
    ) {
        if self.second_pass || self.once > 0 {
            return;
        }
        // The whole call's range walks all of its tokens: only worth it for a finding.
        let mut shown = Some(shown);
        let mut shown_range = None;
        for (i, a) in args.iter().enumerate() {
            let Some(name) = as_ident(peel(a)) else { continue };
            let name = name.to_string();
            if self.changed.contains(&name) || self.all_loop_vars.contains(&name) || self.host.contains(&name)
            {
                continue;
            }
            let range = shown_range.get_or_insert_with(|| shown.take().map(|f| f()).unwrap_or_default());
            self.invariant_args.push(InvariantArg {
                range: range.clone(),
                at: at.start,
                arg: i as u32,
                callee: callee.clone(),
                arg_text: name,
            });
        }
    }

    /// Ctor arguments that are data (not a shape or a device): `Tensor::new(data, ..)`,
    /// `from_vec(data, ..)`, `full`'s value.
    fn ctor_data_args<'e>(&self, c: &'e syn::ExprCall, name: &str) -> Vec<&'e Expr> {
        let args: Vec<&Expr> = c.args.iter().collect();
        match name {
            "new" | "from_vec" | "from_slice" | "from_iter" | "from_data" | "from_floats" | "from_ints"
            | "from_bool" | "scalar" | "from_ndarray" | "of_slice" | "from_slice2" | "of_slice2"
            | "f_from_slice" => args.first().copied().into_iter().collect(),
            "full" if self.file.apis.is(Api::Candle) => args.first().copied().into_iter().collect(),
            "full" => args.get(1).copied().into_iter().collect(),
            _ => Vec::new(),
        }
    }
}

/// Integer arithmetic on names and literals (`y * w + x`, `(t as usize).min(n - 1)`): a
/// position, not a tensor.
fn is_position_arithmetic(e: &Expr) -> bool {
    match e {
        Expr::Path(_) | Expr::Lit(_) | Expr::Field(_) => true,
        Expr::Paren(p) => is_position_arithmetic(&p.expr),
        Expr::Cast(c) => is_position_arithmetic(&c.expr),
        Expr::Unary(u) => is_position_arithmetic(&u.expr),
        Expr::Binary(b) => {
            use syn::BinOp::*;
            matches!(b.op, Add(_) | Sub(_) | Mul(_) | Div(_) | Rem(_) | Shl(_) | Shr(_))
                && is_position_arithmetic(&b.left)
                && is_position_arithmetic(&b.right)
        }
        Expr::MethodCall(m) => {
            matches!(
                m.method.to_string().as_str(),
                "min" | "max" | "clamp" | "saturating_sub" | "saturating_add" | "wrapping_add" | "wrapping_sub"
            ) && is_position_arithmetic(&m.receiver)
                && m.args.iter().all(is_position_arithmetic)
        }
        _ => false,
    }
}

/// Does a macro argument (`s![y..y + 1, x]`) name one of these variables?
fn macro_mentions(e: &Expr, names: &HashSet<String>) -> bool {
    let Expr::Macro(m) = e else { return false };
    let mut hit = false;
    let mut stack = vec![m.mac.tokens.clone()];
    while let Some(ts) = stack.pop() {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Ident(i) if names.contains(&i.to_string()) => hit = true,
                proc_macro2::TokenTree::Group(g) => stack.push(g.stream()),
                _ => {}
            }
        }
    }
    hit
}

impl<'ast> Visit<'ast> for LoopScan<'_, '_> {
    /// A `let` inside a block ends with the block: the outer name (and its data) comes back.
    fn visit_block(&mut self, b: &'ast syn::Block) {
        let mut shadowed: Vec<(String, Option<u64>)> = Vec::new();
        for stmt in &b.stmts {
            if let syn::Stmt::Local(l) = stmt {
                let mut names = Vec::new();
                pat_idents(&l.pat, &mut names);
                for n in names {
                    if !shadowed.iter().any(|(s, _)| *s == n) {
                        let before = self.tainted.get(&n).copied();
                        shadowed.push((n, before));
                    }
                }
            }
            self.visit_stmt(stmt);
        }
        for (name, before) in shadowed {
            match before {
                Some(mask) => {
                    self.tainted.insert(name, mask);
                }
                None => {
                    self.tainted.remove(&name);
                }
            }
        }
    }

    fn visit_local(&mut self, local: &'ast syn::Local) {
        let mut names = Vec::new();
        pat_idents(&local.pat, &mut names);
        if let Some(init) = &local.init {
            self.flow_into(names.clone(), &init.expr, true);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
            let host = is_host_tensor(self.file, &init.expr, self.env, &|n| self.host.contains(n));
            // A local picked out of a tensor by the loop variable holds one element.
            let calls = chain_calls(&init.expr);
            let element = calls.iter().any(|c| {
                is_index_method(&c.method.to_string())
                    && c.args.iter().any(|a| {
                        Self::idents(a).iter().any(|n| self.loop_vars.contains(n))
                            || macro_mentions(a, &self.loop_vars)
                    })
            });
            // A position computed from the loop variables (`let at = y * w + x;`) steps with them.
            let position = is_position_arithmetic(peel(&init.expr))
                && (Self::idents(&init.expr).iter().any(|n| self.loop_vars.contains(n)));
            for n in names {
                if position {
                    self.loop_vars.insert(n.clone());
                }
                if host {
                    self.host.insert(n.clone());
                } else {
                    self.host.remove(&n);
                }
                if element {
                    self.elements.insert(n);
                } else {
                    self.elements.remove(&n);
                }
            }
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Assign(a) => {
                self.visit_expr(&a.left);
                self.flow_into(chain_target(&a.left), &a.right, as_ident(&a.left).is_some());
            }
            Expr::Binary(b) if is_compound_assign(&b.op) => {
                self.visit_expr(&b.left);
                self.flow_into(chain_target(&b.left), &b.right, false);
            }
            Expr::If(i) => {
                self.visit_expr(&i.cond);
                let leaves = block_leaves_loop(&i.then_branch);
                if leaves {
                    self.stops_on |= self.mask_of(&i.cond);
                }
                if !cond_flags(&i.cond).gated {
                    let once = leaves || ends_program(&i.then_branch);
                    self.once += once as u32;
                    self.visit_block(&i.then_branch);
                    self.once -= once as u32;
                }
                if let Some((_, els)) = &i.else_branch {
                    self.visit_expr(els);
                }
            }
            Expr::While(w) => {
                self.stops_on |= self.mask_of(&w.cond);
                visit::visit_expr(self, e);
            }
            Expr::Call(c) => {
                if let Some(ctor) = Ctor::of(self.file.apis, e) {
                    let data = self.ctor_data_args(c, &ctor.name.to_string());
                    let mask = data.iter().fold(0, |m, a| m | self.mask_of(a));
                    if mask != 0 {
                        self.sinks.push((self.file.range(c.func.span()), mask));
                    }
                } else if let Expr::Path(p) = &*c.func
                    && let Some(last) = p.path.segments.last()
                {
                    if is_sampling(&last.ident.to_string()) {
                        self.sampled |= c.args.iter().fold(0, |m, a| m | self.mask_of(a));
                    }
                    let at = self.file.range(c.func.span());
                    let file = self.file;
                    self.note_call_args(last.ident.to_string(), &c.args, at, || file.range(e.span()));
                }
                visit::visit_expr(self, e);
            }
            Expr::MethodCall(m) => {
                let method = m.method.to_string();
                let read = read_name(self.file, m);
                match &read {
                    Some(what) => self.note_read(m, what.clone()),
                    None => {
                        let mask = self.mask_of(&m.receiver);
                        if is_transfer_method(self.file.apis, &method) && mask != 0 {
                            self.sinks.push((self.file.range(m.method.span()), mask));
                        }
                        if is_sampling(&method) {
                            // `sample_top_p(&logits, ..)`, or a distribution built from the read
                            // values: `WeightedIndex::new(&probs)?.sample(&mut rng)`.
                            self.sampled |= m.args.iter().fold(self.mask_of(&m.receiver), |acc, a| acc | self.mask_of(a));
                        }
                        let at = self.file.range(m.method.span());
                        let file = self.file;
                        let start = at.start;
                        self.note_call_args(method.clone(), &m.args, at, || start..file.range(e.span()).end);
                    }
                }
                if matches!(
                    method.as_str(),
                    "push" | "extend" | "insert" | "push_back" | "extend_from_slice" | "append"
                ) {
                    self.visit_expr(&m.receiver);
                    let targets = chain_target(&m.receiver);
                    for arg in &m.args {
                        self.flow_into(targets.clone(), arg, false);
                    }
                } else {
                    visit::visit_expr(self, e);
                }
            }
            // `vec![value; n]`, `vec![a, b]`: the elements carry data (printing macros are
            // skipped: what they read is for people).
            Expr::Macro(m) if m.mac.path.is_ident("vec") => {
                for arg in macro_args(&m.mac) {
                    self.visit_expr(&arg);
                }
            }
            Expr::ForLoop(f) => {
                // An inner loop's variable over a tensor's slices holds one element each time.
                if chain_calls(&f.expr).iter().any(|c| is_slice_iterator(&c.method.to_string())) {
                    let mut names = Vec::new();
                    pat_idents(&f.pat, &mut names);
                    self.elements.extend(names);
                }
                visit::visit_expr(self, e);
            }
            _ => visit::visit_expr(self, e),
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The identifiers inside a `vec!` in `e` (`TensorData::new(vec![tok], ..)`).
fn macro_idents(e: &Expr) -> Vec<String> {
    struct Vecs(Vec<String>);
    impl<'ast> Visit<'ast> for Vecs {
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            if m.path.is_ident("vec") {
                for arg in macro_args(m) {
                    for_each_ident(&arg, |i| self.0.push(i.to_string()));
                }
            }
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut v = Vecs(Vec::new());
    v.visit_expr(e);
    v.0
}

/// A read's bit in a mask (reads past the 63rd share the last bit).
fn read_bit(i: usize) -> u64 {
    1 << i.min(63)
}

/// Does the block end the program or the function (`panic!`, `bail!`, `return Err(..)`)?
fn ends_program(b: &syn::Block) -> bool {
    let leaving_macro = |m: &syn::Macro| {
        m.path.segments.last().is_some_and(|s| {
            matches!(
                s.ident.to_string().as_str(),
                "panic" | "bail" | "unreachable" | "todo" | "unimplemented"
            )
        })
    };
    b.stmts.iter().any(|s| match s {
        syn::Stmt::Macro(m) => leaving_macro(&m.mac),
        syn::Stmt::Expr(Expr::Macro(m), _) => leaving_macro(&m.mac),
        syn::Stmt::Expr(Expr::Return(_), _) => true,
        _ => false,
    })
}

/// Does the block leave the loop (`break`, `return`) at its top level?
fn block_leaves_loop(b: &syn::Block) -> bool {
    b.stmts.iter().any(|s| matches!(s, syn::Stmt::Expr(Expr::Break(_) | Expr::Return(_), _)))
}

/// Collects every name a body binds (`let`) or assigns (`x = ..`, `x += ..`, `x.push(..)`,
/// in-place ops `x.add_(..)`).
struct Assigned(HashSet<String>);

impl<'ast> Visit<'ast> for Assigned {
    fn visit_local(&mut self, local: &'ast syn::Local) {
        pat_idents(&local.pat, &mut self.0);
        visit::visit_local(self, local);
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Assign(a) => self.0.extend(chain_target(&a.left)),
            Expr::Binary(b) if is_compound_assign(&b.op) => self.0.extend(chain_target(&b.left)),
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                if name.ends_with('_')
                    || name == "set"
                    || name == "copy_from"
                    || name.starts_with("slice_assign")
                {
                    self.0.extend(chain_target(&m.receiver));
                }
            }
            Expr::Closure(c) => c.inputs.iter().for_each(|p| pat_idents(p, &mut self.0)),
            Expr::ForLoop(f) => pat_idents(&f.pat, &mut self.0),
            // `if let` / `while let` / let chains, and `match` arms bind their names anew at
            // every iteration.
            Expr::Let(l) => pat_idents(&l.pat, &mut self.0),
            Expr::Match(m) => m.arms.iter().for_each(|arm| pat_idents(&arm.pat, &mut self.0)),
            _ => {}
        }
        visit::visit_expr(self, e);
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn chain_target(e: &Expr) -> Vec<String> {
    let mut e = e;
    loop {
        e = match e {
            Expr::Index(i) => &i.expr,
            Expr::Field(f) => &f.base,
            Expr::Paren(p) => &p.expr,
            Expr::Unary(u) => &u.expr,
            Expr::MethodCall(m) => &m.receiver,
            _ => break,
        }
    }
    as_ident(e).map(|i| vec![i.to_string()]).unwrap_or_default()
}

fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}
