//! D005 for PyTorch code. What it finds, why, and its fixes: `d005_host_round_trip_in_loop.md` beside this file (what
//! `devcheck explain D005` prints); its row in the rule table is in [`crate::registry`].

use rustc_hash::FxHashSet;
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::diagnostic::Finding;
use crate::python::api;
use crate::python::checker::{Checker, Hot, Node, Reads, Rule, leaves_for_good};
use crate::python::model::{BindingId, BindingKind, CallSite, FunctionId, Part};
use crate::python::typing::Kind;
use crate::registry;

use super::helpers::{any_subexpr, any_subexpr_is, method_call, provenance_in_project, range};


#[derive(Default)]
pub(crate) struct Check;

/// A host read and what it reads.
struct Sync<'a> {
    /// A whole tensor copied to the host (`.cpu()`, `.numpy()`, `.tolist()`) rather than one
    /// value (`.item()`, `float(t)`, `if t:`): collecting it is the point, not a deferrable read.
    bulk: bool,
    /// One read per element (`all(t)`, `max(t)`: Python walks the tensor and asks each element
    /// for its truth): a waste whether or not the host needs the answer.
    per_element: bool,
    /// Not a read but a blocking copy to the device of a tensor just made on the host
    /// (`torch.arange(n).to(device)`, or `x[torch.arange(n)]`, which PyTorch copies to index
    /// `x`): PyTorch waits for the device before it returns.
    upload: Option<Upload>,
    /// A wait the computation does not need: an `assert` on a tensor (a check the code runs
    /// the same without), or an op whose result's size the device decides (`x.nonzero()`: the
    /// host waits for the count to allocate it). Reported whatever is done with the value.
    always: Option<AlwaysWaits>,
    /// What is shown: `.item()`, `float(..)`, `if loss:`.
    what: String,
    /// The tensor read.
    tensor: &'a Expr,
    /// The whole expression whose value the host gets (the outermost call of the chain).
    value: &'a Expr,
    at: TextRange,
}

impl<'a> Sync<'a> {
    /// A read of one value or of a whole tensor (`bulk`).
    fn read(bulk: bool, what: String, tensor: &'a Expr, value: &'a Expr, at: TextRange) -> Sync<'a> {
        Sync { bulk, per_element: false, upload: None, always: None, what, tensor, value, at }
    }
}

/// How a tensor made on the host reaches the device.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upload {
    /// `.to(device)` or `.cuda()`.
    Moved,
    /// As an index of a tensor on the device.
    Index,
    /// An array of indices numpy made, as an index of a tensor on the device.
    NumpyIndex,
    /// Built from data on the host by a factory given the device (`torch.tensor([0.5],
    /// device=d)`): PyTorch makes it on the host and copies it there.
    Built,
    /// A module's tensor kept in a plain attribute, made on the host, moved at each use
    /// (`self.window.to(x.device)`).
    Field,
    /// A NumPy array the object keeps, made a tensor on the device at each use
    /// (`x.new_tensor(self.offsets)`).
    KeptArray,
}

/// Why a wait is there whatever the value is used for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AlwaysWaits {
    /// `assert t.all()`: the check reads the tensor's truth.
    Assert,
    /// `x.nonzero()`, `torch.where(mask)`, `x.masked_select(m)`: the result's size.
    SizedByData,
    /// `torch.cuda.synchronize()` itself, where no clock is read: a wait and nothing else.
    Synchronize,
    /// `max(t.sum(), 1)`: Python compares the tensor with the number, whatever the result is for.
    Compared,
    /// `torch.full(size, alphas[i], device=d)`: the fill value is taken as a number.
    Fill,
    /// `torch.allclose(a, b)`: compared on the device, answered with a Python bool.
    Answered,
    /// `torch.tensor([t] * b, device=d)`: each element of the list is read as a number.
    Listed,
    /// `torch.repeat_interleave(x, counts)` with no `output_size=`: the result's size is the sum
    /// of the counts, read on the host.
    Repeats,
    /// `Normal(mu, std)`: `torch.distributions` checks its arguments' constraints as it builds
    /// one, and reads the answer on the host.
    Validated,
}

/// A value a read can be of as it stands: a name, an attribute or an item (a call is read, if
/// at all, as itself).
fn plain_value(e: &Expr) -> bool {
    matches!(e, Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_))
}

impl Rule for Check {
    fn reads(&self) -> Reads {
        // Calls (`.item()`, `float(t)`, `print(t)`), formatting (`f"{t:.3f}"`, `"%f" % t`), and
        // the tests of `if t:` / `while t:`.
        Reads::CALL | Reads::FORMAT | Reads::OPERATOR | Reads::SUBSCRIPT | Reads::TEST
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        match e {
            Expr::Call(_) => {
                if let Some(sync) = explicit_synchronize(cx, e) {
                    report(cx, sync, out);
                } else if let Read::Found(sync) = call_read(cx, e) {
                    report(cx, sync, out);
                } else if let Some(sync) =
                    upload(cx, e).or_else(|| built_on_device(cx, e)).or_else(|| validated_distribution(cx, e))
                {
                    report(cx, sync, out);
                }
            }
            Expr::Subscript(_) => {
                if let Some(sync) = index_upload(cx, e).or_else(|| mask_index(cx, e)) {
                    report(cx, sync, out);
                }
            }
            Expr::FString(f) => {
                for element in f.value.elements() {
                    if let ast::InterpolatedStringElement::Interpolation(i) = element {
                        formatted(cx, &i.expression, e, |v| format!("f\"{{{v}}}\""), out);
                    }
                }
            }
            // `"%.3f" % loss`, `"%f %f" % (a, b)`.
            // `("%10s" * 2 + "%10.4g" * 5) % (epoch, *mloss)`: each item of the unpacked tensor.
            Expr::BinOp(b) if b.op == ast::Operator::Mod && format_string(&b.left) => match &*b.right {
                Expr::Tuple(t) => t.elts.iter().for_each(|v| match v {
                    Expr::Starred(s) => formatted(cx, &s.value, e, |v| format!("\"..\" % (*{v}, ..)"), out),
                    v => formatted(cx, v, e, |v| format!("\"..\" % ({v}, ..)"), out),
                }),
                v => formatted(cx, v, e, |v| format!("\"..\" % {v}"), out),
            },
            _ => {}
        }
    }

    fn test(&mut self, cx: &Checker<'_, '_>, test: &Expr, out: &mut Vec<Finding>) {
        // A test that is itself a read (`if x.item():`) is the call's finding, from `expr`.
        if let Read::Undecided = call_read(cx, test)
            && let Some(sync) = test_read(cx, test)
        {
            report(cx, sync, out);
        }
    }
}

/// A format string: a literal, or literals repeated and joined (`"%10s" * 2 + "%10.4g" * n`).
fn format_string(e: &Expr) -> bool {
    match e {
        Expr::StringLiteral(_) => true,
        Expr::BinOp(b) if b.op == ast::Operator::Add => format_string(&b.left) && format_string(&b.right),
        // Repeated a number of times, literal or not (`"%10.4g" * self.loss_num`).
        Expr::BinOp(b) if b.op == ast::Operator::Mult => format_string(&b.left) || format_string(&b.right),
        _ => false,
    }
}

/// A value formatted into text (`what` shows how, given the value's text) is read on the host
/// if it is a tensor: `f"{loss:.3f}"` calls `loss.item()` underneath.
fn formatted<'a>(
    cx: &Checker<'_, 'a>,
    value: &'a Expr,
    whole: &'a Expr,
    what: impl Fn(&str) -> String,
    out: &mut Vec<Finding>,
) {
    if let Some(sync) = implicit(cx, value, whole, what(&cx.short(value.range()))) {
        report(cx, sync, out);
    }
}

/// A tensor handed to something that reads it on the host (formatting, `print`, TensorBoard's
/// `add_scalar`): a read, when it is a plain name, attribute or subscript, or one converted or
/// reduced by a tensor's own methods (`f"{loss.detach().float()}"`); a call that reads, moves or
/// returns something else is read, if at all, as itself.
fn implicit<'a>(cx: &Checker<'_, 'a>, value: &'a Expr, whole: &'a Expr, what: String) -> Option<Sync<'a>> {
    if !(plain_value(value) || tensor_chain(cx, value, 0)) || !cx.kind_of(value).may_be_tensor() {
        return None;
    }
    Some(Sync::read(false, what, value, whole, value.range()))
}

/// `loss.detach().float()`, `losses.mean()`: a plain value taken through tensor methods that
/// return a tensor where it is (not a move: `.cpu()`, `.to(..)`; `.item()` and `.tolist()` return
/// no tensor).
fn tensor_chain(cx: &Checker<'_, '_>, e: &Expr, depth: u32) -> bool {
    let Expr::Call(c) = e else { return false };
    let Expr::Attribute(a) = &*c.func else { return false };
    let method = a.attr.as_str();
    depth < 8
        && api::tensor_method_returns_tensor(method)
        && !matches!(method, "cpu" | "to" | "cuda" | "type")
        // (`torch.min(y)` is a function of torch's, not a method.)
        && cx.kind_of(&a.value).may_be_tensor()
        && (plain_value(&a.value) || tensor_chain(cx, &a.value, depth + 1))
}

fn report(cx: &Checker<'_, '_>, sync: Sync<'_>, out: &mut Vec<Finding>) {
    if !cx.facts.project_uses_accelerator || cx.in_except > 0 {
        return;
    }
    // `raise ValueError(f"got {int(ids.max())}")`, and an assert's message
    // (`assert ok, f"got {x.tolist()}"`): read only on the way out, when it fails.
    if cx.parents.iter().any(|p| match p {
        Node::Stmt(Stmt::Raise(_)) => true,
        Node::Stmt(Stmt::Assert(a)) => a.msg.as_ref().is_some_and(|m| m.range().contains_range(sync.at)),
        _ => false,
    }) {
        return;
    }
    let Some(hot) = cx.hot() else { return };
    // A test function of a test file (`def test_radix_major():`) checks values, the helpers of a
    // file of tests set them up, and a script in a folder of tests, or named for tests and
    // comparing results (`ops_dcnv3/test.py` with its `torch.allclose`), compares or checks by
    // hand: their speed is not a run's. (An evaluation script named `test_net.py` beside the
    // training script has no test function and compares nothing.)
    if cx.kind.is_test_like()
        && (cx.facts.in_tests_folder
            || cx.enclosing_functions().any(|f| cx.model.function(f).name().starts_with("test"))
            || defines_tests(cx.module_body))
        || cx.facts.checks_by_hand
    {
        return;
    }
    if sync.upload.is_none()
        && sync.always != Some(AlwaysWaits::Synchronize)
        && (!cx.kind_of(sync.tensor).may_be_tensor() || !provenance_in_project(cx, sync.tensor).on_accelerator)
    {
        return;
    }
    // A check for NaN or Inf decides what follows, but it reads the value at every step for a
    // case that rarely comes: it waits as an `assert` does.
    let checked = sync.upload.is_none()
        && sync.always.is_none()
        && (in_bad_value_check(cx, sync.value.range()) || read_for_a_bad_value_check(cx, sync.value));
    if (!sync.per_element
        && sync.upload.is_none()
        && sync.always.is_none()
        && !checked
        && needed_on_host(cx, sync.value, sync.bulk))
        || synchronized_just_before(cx)
        || super::helpers::in_evaluation_pass(cx)
        || fills_a_cache(cx, sync.value.range())
        || fills_a_keyed_cache(cx, sync.value.range())
        || fills_a_missed_entry(cx, sync.value.range())
        || number_or_tensor_parameter(cx, sync.tensor)
    {
        return;
    }
    let (message, help) = match hot {
        Hot::Forward => (
            format!(
                "`{}` in `{}` waits for the device at every {}",
                sync.what,
                cx.function_name().unwrap_or("forward"),
                cx.pass_words()
            ),
            if cx.pass_words() == "forward pass" {
                "keep the value on the device (`torch.where`, masking) or move the check out of the forward pass"
            } else {
                "keep the value on the device (`torch.where`, masking) or move the check out of the training step"
            },
        ),
        Hot::CalledInLoop(_) => (
            format!("`{}` in a loop waits for the device at every step", sync.what),
            "accumulate a detached tensor on the device (`total += loss.detach()`) and read it every N steps (`if step % log_every == 0:`) or once at the end",
        ),
        Hot::Step(_) => (
            format!(
                "`{}` in `{}` waits for the device at every training step: each call takes one",
                sync.what,
                cx.function_name().unwrap_or("the function")
            ),
            "return the tensor (`loss.detach()`) and let the trainer accumulate it on the device, reading it every N steps or once at the end",
        ),
        Hot::CalledElsewhere(i) => (
            match cx.facts.elsewhere.get(i) {
                Some(c) => format!(
                    "`{}` in `{}` waits for the device at every step: `{}` is called {} at {}:{}",
                    sync.what,
                    cx.function_name().unwrap_or(&c.function),
                    c.function,
                    c.how,
                    c.caller,
                    c.line
                ),
                None => format!("`{}` waits for the device at every step", sync.what),
            },
            "return the tensor and let the caller accumulate it on the device (`total += acc.detach()`), reading it every N steps or once at the end",
        ),
    };
    let every = match hot {
        Hot::Forward => format!("at every {}", cx.pass_words()),
        _ => "at every step".to_string(),
    };
    let (message, help) = if sync.upload == Some(Upload::Moved) {
        (
            format!(
                "`{}` makes a tensor on the host and copies it to the device {every}: the copy waits for the device",
                sync.what,
            ),
            if sync.what.starts_with("torch.from_numpy(") {
                // (`from_numpy` takes no device: the array is converted once, or a constant made by
                // torch's own factory on the device.)
                "convert the array once, in `__init__` as a buffer (`self.register_buffer(\"table\", torch.from_numpy(arr), persistent=False)`), or make a constant with torch's factory on the device (`torch.eye(3, device=x.device)`)"
            } else if sync.what.starts_with("torch.") {
                "make it on the device: pass `device=` to the factory (`torch.arange(n, device=x.device)`)"
            } else {
                "make it on the device: hand the helper the device (`coords_grid(b, h, w, device=x.device)`) and pass it to its factories (`torch.arange(h, device=device)`)"
            },
        )
    } else if sync.upload == Some(Upload::Field) {
        (
            format!(
                "`{}` copies a tensor the module keeps in a plain attribute, made on the host, to the device {every}: the copy waits for the device",
                sync.what,
            ),
            "register it as a buffer in `__init__` (`self.register_buffer(\"window\", torch.hann_window(n), persistent=False)`): `model.to(device)` then moves it once, and the use needs no `.to(..)`",
        )
    } else if sync.upload == Some(Upload::KeptArray) {
        (
            format!(
                "`{}` copies a NumPy array the module keeps to the device {every}: the copy waits for the device",
                sync.what,
            ),
            "register it once as a buffer in `__init__` (`self.register_buffer(\"offsets\", torch.as_tensor(offsets), persistent=False)`): `model.to(device)` then moves it, and the use needs no copy",
        )
    } else if sync.upload == Some(Upload::Built) {
        (
            format!(
                "`{}` builds its data on the host and copies it to the device {every}: the copy waits for the device",
                sync.what,
            ),
            "keep a Python number a number (`x * 0.5`), or make the constant once, outside the loop or as a buffer (`self.register_buffer(..)`)",
        )
    } else if sync.upload == Some(Upload::NumpyIndex) {
        (
            format!(
                "`{}` is made by numpy and indexes a tensor on the device: PyTorch copies it there {every}, and the copy waits for the device",
                sync.what,
            ),
            "draw the indices on the device (`torch.randperm(n, device=x.device)[:k]`, `torch.randint(n, (k,), device=x.device)`)",
        )
    } else if sync.upload == Some(Upload::Index) {
        (
            format!(
                "`{}` is made on the host and indexes a tensor on the device: PyTorch copies it there {every}, and the copy waits for the device",
                sync.what,
            ),
            "make the index on the device: pass `device=` to the factory (`torch.arange(n, device=x.device)`)",
        )
    } else if sync.bulk && round_trip(cx, sync.value) {
        (
            format!("{message}, and the loop takes the copy back to the device"),
            "keep the values on the device (collect them there) and copy what the host needs once, after the loop",
        )
    } else if sync.bulk && argument_of(cx, sync.value, |c| collected_at_each_step(cx, c)) {
        (
            format!("{message}, to collect it"),
            "collect the tensors on the device (`preds.append(out.detach())`) and copy them once after the loop (`torch.cat(preds).cpu()`), or copy only on the steps that use them",
        )
    } else if sync.bulk && copied_for_a_metric(cx, sync.value) {
        (
            format!("{message}, to compute a statistic"),
            "compute the statistic on the device (`(out.argmax(1) == y).float().mean()`) and read it every N steps, or copy the batch to the host only on the steps that log it",
        )
    } else if checked {
        (
            message,
            "a check for NaN or Inf reads the value on the host each time it runs: check every N steps (where the loss is logged), keep it on the device (`torch.nan_to_num(..)`, `torch.where(torch.isfinite(loss), loss, 0)`), or let `torch.amp.GradScaler` skip the steps whose gradients are not finite",
        )
    } else if sync.always == Some(AlwaysWaits::Assert)
        || cx.parents.iter().any(|p| matches!(p, Node::Stmt(Stmt::Assert(a)) if a.test.range().contains_range(sync.at)))
    {
        (
            message,
            "an `assert` on a tensor reads it on the host each time it runs: keep the check out of the loop (or behind a debugging flag), or check on the device with `torch._assert_async(cond)`",
        )
    } else if sync.always == Some(AlwaysWaits::Synchronize) {
        (
            format!("`{}` waits for the device {every}, and nothing here needs it to", sync.what),
            "remove it unless another stream or a timer needs it: PyTorch orders the work of one stream by itself, and a value read on the host waits for what it needs",
        )
    } else if sync.always == Some(AlwaysWaits::Compared) {
        (
            format!("{message}: Python compares the tensor with the number on the host"),
            "bound it on the device: `t.clamp(min=1)` for `max(t, 1)`, `t.clamp(max=1)` for `min(t, 1)`",
        )
    } else if sync.always == Some(AlwaysWaits::Answered) {
        (
            format!("{message}: the comparison's answer is a Python bool, read on the host"),
            "keep the decision on the device (`same = torch.isclose(a, b).all()`, then `torch.where(same, ..)`), or compare every N steps",
        )
    } else if sync.always == Some(AlwaysWaits::Listed) {
        (
            format!("{message}: the list's tensor is read as a number, and the new tensor is built on the host and copied back"),
            "build it from the tensor on the device: `t.expand(b)` or `t.repeat(b)` (`t.reshape(1).expand(b)` for a 0-dim `t`)",
        )
    } else if sync.always == Some(AlwaysWaits::Fill) {
        (
            format!("{message}: `torch.full` takes its fill value as a number, read on the host"),
            "keep the element on the device: index with a slice and expand it (`alphas[index:index + 1].view(1, 1).expand(b, 1)`), or keep the schedule on the host as numbers",
        )
    } else if sync.always == Some(AlwaysWaits::Repeats) {
        (
            format!("{message}: the size of its result is the sum of the repeats, read on the host"),
            "pass the total the host already knows as `output_size=` (the number of nodes or tokens, `x.size(0)`), so PyTorch does not read the repeats",
        )
    } else if sync.always == Some(AlwaysWaits::Validated) {
        (
            format!("{message}: PyTorch checks the distribution's arguments and reads the answer on the host"),
            "pass `validate_args=False` where it is built at every step, or turn the checks off once at start-up with `torch.distributions.Distribution.set_default_validate_args(False)` (keep them on while debugging)",
        )
    } else if sync.always == Some(AlwaysWaits::SizedByData) {
        (
            format!("{message}: the size of its result is known only once the device has computed it"),
            "keep a fixed-size form on the device (`torch.where(mask, x, 0)`, multiplying by the mask), or compute the indices once, outside the loop, when the mask does not change",
        )
    } else if !sync.bulk && picks_from_a_tensor(cx, sync.value) {
        (
            format!("{message}, only to pick from a tensor"),
            "pick on the device: index with the tensor itself (`x.index_select(0, idx)` with `idx` a tensor of indices), or draw every row's index at once (`idx = torch.multinomial(w, 1).squeeze(1)`) and index once",
        )
    } else if sync.per_element {
        (
            format!("{message}, once for each element"),
            "reduce on the device and read once (`bool(t.all())`, `t.max().item()`), or copy the tensor once with `.tolist()`",
        )
    } else {
        (message, help)
    };
    let label = match (sync.upload, sync.always) {
        (Some(Upload::Moved | Upload::Built), _) => "made on the host",
        (Some(Upload::Field), _) => "copied at every call",
        (Some(Upload::Index | Upload::NumpyIndex), _) => "index made on the host",
        (_, Some(AlwaysWaits::Synchronize)) => "waits for the device",
        (_, Some(AlwaysWaits::Validated)) => "arguments checked, answer read on the host",
        _ => "host read",
    };
    let mut finding = Finding::new(&registry::D005, range(sync.at), message).label(label).help(help);
    match (hot, cx.loops.is_empty()) {
        (Hot::CalledInLoop(at), true) => finding = finding.related(range(at), "called in a loop here"),
        (Hot::Step(at), _) => finding = finding.related(range(at), "the training step it takes"),
        _ => {}
    }
    out.push(finding);
}

/// Does the module define tests at its top level, as a file of pytest's tests does: a
/// `def test_..` function, or a `class Test..` without `__init__` (pytest collects neither a
/// `def test(model, loader)` evaluation nor a `TestTimeAugmentation` module)?
fn defines_tests(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::FunctionDef(f) => f.name.as_str().starts_with("test_"),
        Stmt::ClassDef(c) => {
            c.name.as_str().starts_with("Test")
                && !c.body.iter().any(|s| matches!(s, Stmt::FunctionDef(f) if f.name.as_str() == "__init__"))
        }
        _ => false,
    })
}

/// What a call is to this rule.
enum Read<'a> {
    /// A host read.
    Found(Sync<'a>),
    /// A call that reads the host in a way the rule leaves alone (the rest of a chain read once,
    /// `float(x)` of something not a tensor).
    Passed,
    /// Not a host read by itself; as the test of an `if`, its truth may be one.
    Undecided,
}

/// A dtype, not a device: `torch.float16`, `x.dtype`, `self.weight.dtype`, a name for a dtype.
fn names_a_dtype(cx: &Checker<'_, '_>, t: &Expr) -> bool {
    super::helpers::is_dtype(cx, t)
        || matches!(t, Expr::Attribute(a) if a.attr.as_str() == "dtype")
        || matches!(t, Expr::Name(n) if n.id.as_str().contains("dtype"))
}

/// `torch.arange(n).to(device)`, `torch.zeros(b).cuda()`, `torch.arange(b).type_as(x)` with `x` on
/// the device: a tensor made on the host by a factory that takes no data, copied to the device at
/// once with a blocking copy.
fn upload<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let (call, receiver, method) = method_call(e)?;
    let moves = match method {
        "cuda" => true,
        "to" => call
            .arguments
            .args
            .first()
            .or_else(|| call.arguments.find_keyword("device").map(|k| &k.value))
            .is_some_and(|t| super::helpers::literal_device(cx, t).is_none_or(|d| d != "cpu") && !names_a_dtype(cx, t)),
        // `torch.arange(b).type_as(scores)`: to the other tensor's device (and dtype).
        "type_as" => call.arguments.args.first().is_some_and(|other| {
            cx.kind_of(other).may_be_tensor() && provenance_in_project(cx, other).on_accelerator
        }),
        _ => false,
    };
    let non_blocking = call
        .arguments
        .find_keyword("non_blocking")
        .is_some_and(|k| !matches!(k.value, Expr::BooleanLiteral(ast::ExprBooleanLiteral { value: false, .. })));
    if !moves || non_blocking {
        return None;
    }
    if let Some(field) = host_made_field(cx, receiver) {
        let what = format!("{field}.{method}({})", if call.arguments.is_empty() { "" } else { ".." });
        return Some(Sync { upload: Some(Upload::Field), ..Sync::read(false, what, receiver, e, e.range()) });
    }
    // `coords_grid(b, h, w).to(x.device)`: a helper of the project that makes its result on the
    // host at each call (not given the device it takes).
    if let Some(helper) = host_made_by_helper(cx, receiver) {
        let what = format!("{helper}(..).{method}({})", if call.arguments.is_empty() { "" } else { ".." });
        return Some(Sync { upload: Some(Upload::Moved), ..Sync::read(false, what, receiver, e, e.range()) });
    }
    let (factory, made) = host_made(cx, receiver)?;
    let what = format!("torch.{factory}(..).{method}({})", if call.arguments.is_empty() { "" } else { ".." });
    // At the factory, where `device=` goes (`t = torch.rand(b) * s` two lines above `t.to(x)`).
    Some(Sync { upload: Some(Upload::Moved), ..Sync::read(false, what, receiver, e, made) })
}

/// The name of a helper of the project (a function of this file or another) that makes every
/// result on the host at each call ([`crate::python::project::returns_host_made`]), called here
/// without the device it may take.
fn host_made_by_helper(cx: &Checker<'_, '_>, receiver: &Expr) -> Option<String> {
    let Expr::Call(c) = receiver else { return None };
    // (Under `torch.set_default_device(..)` or `with torch.device(..)`, torch's factories make it
    // on the device, as `host_made` says of them.)
    if cx.default_device_set() || cx.device_block > 0 {
        return None;
    }
    let unless = match cx.model.callee(c, cx.function) {
        Some(crate::python::model::Callee::Function(f)) => {
            let fun = cx.model.function(f);
            if fun.class.is_some() {
                return None;
            }
            cx.makes_on_host
                .borrow_mut()
                .entry(f)
                .or_insert_with(|| crate::python::project::returns_host_made(fun.def))
                .clone()?
        }
        Some(crate::python::model::Callee::Class(_)) => return None,
        None => cx.types.project().host_maker(&cx.callee_name(c)?)?,
    };
    if let Some((name, position)) = unless
        && (c.arguments.find_keyword(&name).is_some()
            || c.arguments.args.len() > position
            || c.arguments.keywords.iter().any(|k| k.arg.is_none()))
    {
        return None;
    }
    Some(cx.short(c.func.range()).to_string())
}

/// `self.offsets` where every assignment of `offsets` in the class is a NumPy array
/// (`self.offsets = np.array((0, *np.cumsum(field_dims)[:-1]))`): data the object keeps on the
/// host, which a tensor made of it at each call (`x.new_tensor(self.offsets)`) copies again.
fn numpy_field(cx: &Checker<'_, '_>, data: &Expr) -> bool {
    let Expr::Attribute(a) = data else { return false };
    let Some(class) = cx.types.receiver_class(&a.value) else { return false };
    let assigns = cx.types.class_attrs(class, a.attr.as_str());
    !assigns.is_empty()
        && assigns.iter().all(|x| {
            x.how == crate::python::model::AttrHow::Assign
                && x.value.is_some_and(|v| {
                    matches!(v, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| q.starts_with("numpy.")))
                })
        })
}

/// `self.window` in a module's method, where every assignment of `window` in the class is a plain
/// one (not a buffer) of a tensor made on the host (`torch.hann_window(n)`,
/// `torch.from_numpy(get_window(..))`, `getattr(torch, name)(n)`): `model.to(device)` leaves it
/// there, so moving it at each call copies it again. The field as written (`self.window`).
fn host_made_field(cx: &Checker<'_, '_>, receiver: &Expr) -> Option<String> {
    // Through views and casts that keep it where it is (`self.pe[:, :n]`,
    // `self.pos_embed.expand(b, -1, -1).type_as(x)`): the copy is of the attribute's data.
    let mut field = receiver;
    for _ in 0..8 {
        match field {
            // A slice or a number (`self.pe[:, :n]`, `self.table[0]`); not an index tensor, which the
            // host's tensor cannot take from the device in the first place.
            Expr::Subscript(s) if static_index(&s.slice) => field = &s.value,
            _ => match method_call(field) {
                Some((_, inner, m)) if api::keeps_place(m) => field = inner,
                // `.to(torch.float32)`, `.type(x.dtype)`: a cast of dtype only.
                Some((c, inner, "to" | "type")) if casts_dtype_only(cx, c) => field = inner,
                _ => break,
            },
        }
    }
    let Expr::Attribute(a) = field else { return None };
    let class = cx.types.receiver_class(&a.value)?;
    if cx.types.is_module_class(class) != crate::python::typing::Truth::Yes
        || ["_apply", "to", "cuda"].iter().any(|m| cx.model.method(class, m).is_some_and(|f| cx.model.function(f).class == Some(class)))
    {
        return None;
    }
    let assigns = cx.types.class_attrs(class, a.attr.as_str());
    let made_on_host = |v: &Expr| {
        // Through methods that keep it where it is (`torch.from_numpy(w).float()`).
        let mut at = v;
        for _ in 0..4 {
            match method_call(at) {
                Some((_, inner, m)) if m == "float" || m == "double" || m == "half" || m == "contiguous" => at = inner,
                Some((c, inner, "to" | "type")) if casts_dtype_only(cx, c) => at = inner,
                _ => break,
            }
        }
        let Expr::Call(c) = at else { return false };
        match cx.callee_name(c).as_deref() {
            Some("torch.from_numpy") => true,
            // `torch.tensor(np.load("ray_template.npy"))`: NumPy's data copied into a tensor of
            // the host (no `device=`).
            Some("torch.tensor" | "torch.as_tensor" | "torch.Tensor" | "torch.FloatTensor" | "torch.LongTensor")
                if c.arguments.find_keyword("device").is_none() =>
            {
                c.arguments.args.first().is_some_and(|data| {
                    matches!(data, Expr::Call(d) if cx.callee_name(d).is_some_and(|q| q.starts_with("numpy.")))
                })
            }
            // `getattr(torch, window)(win_length)`: one of torch's window functions by name.
            _ if matches!(&*c.func, Expr::Call(g) if cx.callee_name(g).is_some_and(|q| q == "builtins.getattr")
                && g.arguments.args.first().is_some_and(|m| cx.model.canonical_name(m).is_some_and(|q| q == "torch"))) =>
            {
                c.arguments.find_keyword("device").is_none()
            }
            // A function of the project whose every result is on the host
            // (`get_sinusoid_encoding_table(n, d)` returning `torch.tensor(table)`).
            // (Not under `torch.set_default_device(..)` in this file, as `host_made` is not.)
            _ if super::helpers::project_function(cx, c) == Some(true) => {
                !cx.default_device_set()
            }
            _ => host_made(cx, v).is_some(),
        }
    };
    // `nn.Parameter(..)` in one branch (a learned table, when asked for) and a tensor made on the
    // host in the other: the plain one is copied at every use.
    let parameter = |v: &Expr| {
        matches!(v, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter"))
    };
    let plain = |x: &&crate::python::model::AttrAssign<'_>| x.how == crate::python::model::AttrHow::Assign;
    // Not where the constructor's defaults take the parameter's branch
    // (`use_learnable_pos_emb=True`): the table on the host is the option then.
    if assigns.iter().any(|x| {
        x.value.is_some_and(parameter) && taken_by_default(cx.model.function(x.method).def, x.range) == Some(true)
    }) {
        return None;
    }
    let host: Vec<_> = assigns.iter().filter(|x| plain(x) && x.value.is_some_and(made_on_host)).collect();
    // Each parameter on another path than every host table (`if learned: .. else: ..` of one
    // method): not a table rewrapped as a parameter afterwards, or by a subclass.
    let apart = |p: &crate::python::model::AttrAssign<'_>| {
        host.iter().all(|h| h.method == p.method && exclusive(&cx.model.function(p.method).def.body, p.range, h.range))
    };
    (!host.is_empty()
        && assigns.iter().all(|x| {
            plain(x) && x.value.is_some_and(|v| made_on_host(v) || (parameter(v) && apart(x)))
        }))
    .then(|| cx.short(receiver.range()))
}

/// Are `a` and `b` on different branches of one `if` (its body and an `elif`/`else` clause, or
/// two clauses) of `body`, so that no run takes both?
fn exclusive(body: &[Stmt], a: TextRange, b: TextRange) -> bool {
    let Some(s) = body.iter().find(|s| s.range().contains_range(a)) else { return false };
    if !s.range().contains_range(b) {
        return false;
    }
    let Stmt::If(i) = s else { return false };
    let blocks: Vec<&[Stmt]> =
        std::iter::once(&i.body[..]).chain(i.elif_else_clauses.iter().map(|c| &c.body[..])).collect();
    let within = |r: TextRange| blocks.iter().position(|blk| blk.iter().any(|s| s.range().contains_range(r)));
    match (within(a), within(b)) {
        (Some(x), Some(y)) if x != y => true,
        (Some(x), Some(_)) => exclusive(blocks[x], a, b),
        _ => false,
    }
}

/// Does a call with the function's defaults run the statement at `at`, where it sits under
/// `if flag:` (or `if not flag:`, or their `else`) on a parameter of the function that defaults to
/// `True` or `False`? `None` when no such test decides it.
fn taken_by_default(f: &ast::StmtFunctionDef, at: TextRange) -> Option<bool> {
    fn flag(f: &ast::StmtFunctionDef, test: &Expr) -> Option<bool> {
        match test {
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => flag(f, &u.operand).map(|b| !b),
            Expr::Name(n) => f.parameters.iter_non_variadic_params().find(|p| p.name().as_str() == n.id.as_str()).and_then(
                |p| match p.default.as_deref() {
                    Some(Expr::BooleanLiteral(b)) => Some(b.value),
                    _ => None,
                },
            ),
            _ => None,
        }
    }
    fn walk(f: &ast::StmtFunctionDef, body: &[Stmt], at: TextRange, depth: u32) -> Option<bool> {
        let s = body.iter().find(|s| s.range().contains_range(at))?;
        let Stmt::If(i) = s else { return None };
        if depth == 0 {
            return None;
        }
        let inner = |b: &[Stmt], taken: bool| if taken { walk(f, b, at, depth - 1).or(Some(true)) } else { Some(false) };
        let value = flag(f, &i.test);
        if i.body.iter().any(|s| s.range().contains_range(at)) {
            return value.and_then(|v| inner(&i.body, v)).or_else(|| walk(f, &i.body, at, depth - 1));
        }
        match &i.elif_else_clauses[..] {
            [clause] if clause.test.is_none() => {
                value.and_then(|v| inner(&clause.body, !v)).or_else(|| walk(f, &clause.body, at, depth - 1))
            }
            _ => None,
        }
    }
    walk(f, &f.body, at, 4)
}

/// A slice, a number, `None` or `...`, or a tuple of them: an index that is no tensor.
fn static_index(e: &Expr) -> bool {
    match e {
        Expr::Slice(_) | Expr::NumberLiteral(_) | Expr::NoneLiteral(_) | Expr::EllipsisLiteral(_) => true,
        Expr::UnaryOp(u) => matches!(&*u.operand, Expr::NumberLiteral(_)),
        Expr::Tuple(t) => t.elts.iter().all(static_index),
        _ => false,
    }
}

/// `.to(torch.float32)`, `.to(dtype=x.dtype)`, `.type(torch.half)`: a call that names a dtype and no
/// device (not `.type("torch.cuda.FloatTensor")`, nor `.to(x)`, which takes `x`'s device too).
fn casts_dtype_only(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    let dtype = c.arguments.args.first().or_else(|| c.arguments.find_keyword("dtype").map(|k| &k.value));
    dtype.is_some_and(|t| names_a_dtype(cx, t))
        && c.arguments.args.len() <= 1
        && c.arguments.keywords.iter().all(|k| {
            k.arg.as_ref().is_some_and(|n| matches!(n.as_str(), "dtype" | "copy" | "memory_format" | "non_blocking"))
        })
}


/// `torch.tensor([0.5], device=d)`, `torch.as_tensor(1.0, device=d)`: literal numbers given to a
/// factory with an accelerator device are built on the host and copied there, as
/// `torch.tensor([0.5]).to(d)` is.
fn built_on_device<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let Expr::Call(c) = e else { return None };
    // `residue_index.new_tensor(2)`, `x.new_tensor([0.5, 0.5])`: on `x`'s device, from the host's
    // numbers, as `torch.tensor(.., device=x.device)` is.
    if let Some((_, receiver, "new_tensor")) = method_call(e)
        && let [data] = &c.arguments.args[..]
        && c.arguments.find_keyword("device").is_none()
        && cx.kind_of(receiver).may_be_tensor()
        && provenance_in_project(cx, receiver).on_accelerator
        && (host_numbers(cx, data) || numpy_field(cx, data))
    {
        let kept = numpy_field(cx, data);
        let what = match kept {
            true => format!("{}.new_tensor({})", cx.short(receiver.range()), cx.short(data.range())),
            false => format!("{}.new_tensor(..)", cx.short(receiver.range())),
        };
        let upload = if kept { Upload::KeptArray } else { Upload::Built };
        return Some(Sync { upload: Some(upload), ..Sync::read(false, what, e, e, e.range()) });
    }
    let device = c.arguments.find_keyword("device")?;
    if super::helpers::literal_device(cx, &device.value).is_some_and(|d| d == "cpu")
        || matches!(device.value, Expr::NoneLiteral(_))
    {
        return None;
    }
    let [data] = &c.arguments.args[..] else { return None };
    let q = cx.callee_name(c)?;
    let factory = match q.as_ref() {
        "torch.tensor" => "tensor",
        "torch.as_tensor" => "as_tensor",
        _ => return None,
    };
    if numpy_field(cx, data) {
        let what = format!("torch.{factory}({}, device=..)", cx.short(data.range()));
        return Some(Sync { upload: Some(Upload::KeptArray), ..Sync::read(false, what, e, e, e.range()) });
    }
    if !host_numbers(cx, data) {
        return None;
    }
    let what = format!("torch.{factory}(.., device=..)");
    Some(Sync { upload: Some(Upload::Built), ..Sync::read(false, what, e, e, e.range()) })
}

/// Is the value read a parameter that defaults to `None` or a number, read in a branch on whether
/// it is a tensor (`int(n.item()) if isinstance(n, torch.Tensor) else int(n)`)? The function is
/// written to be given a number, and its callers most often give one.
fn number_or_tensor_parameter(cx: &Checker<'_, '_>, tensor: &Expr) -> bool {
    let Expr::Name(n) = tensor else { return false };
    let Some(b) = cx.model.binding_of(n) else { return false };
    let BindingKind::Parameter { default: Some(default), .. } = cx.model.binding(b).kind else { return false };
    if !matches!(default, Expr::NoneLiteral(_) | Expr::NumberLiteral(_)) {
        return false;
    }
    let tests_tensor = |test: &Expr| {
        matches!(test, Expr::Call(c)
            if cx.callee_name(c).is_some_and(|q| matches!(q.as_ref(), "builtins.isinstance" | "torch.is_tensor"))
                && matches!(c.arguments.args.first(), Some(Expr::Name(v)) if v.id == n.id))
    };
    // (Its other branch, `else int(n)`, is given the number.)
    cx.parents.iter().rev().any(|p| match p {
        Node::Expr(Expr::If(i)) => tests_tensor(&i.test),
        Node::Stmt(Stmt::If(i)) => tests_tensor(&i.test),
        _ => false,
    })
}

/// Is the place in the value put into a cache under a key it does not hold yet
/// (`if key not in hann_window: hann_window[key] = torch.hann_window(n).to(y.device)`)? The
/// value is made once per key (a window per size and device), not at each call.
fn fills_a_keyed_cache(cx: &Checker<'_, '_>, at: TextRange) -> bool {
    let mut stmts = cx.parents.iter().rev().filter_map(|n| match n {
        Node::Stmt(s) => Some(*s),
        Node::Expr(_) => None,
    });
    let Some(Stmt::Assign(assign)) = stmts.next() else { return false };
    let [Expr::Subscript(target)] = &assign.targets[..] else { return false };
    if !assign.value.range().contains_range(at) {
        return false;
    }
    let text = |e: &Expr| cx.model.text(e.range());
    stmts.take(4).any(|s| {
        let Stmt::If(i) = s else { return false };
        matches!(&*i.test, Expr::Compare(c)
            if matches!(&c.ops[..], [ast::CmpOp::NotIn])
                && text(&c.left) == text(&target.slice)
                && c.comparators.first().is_some_and(|d| text(d) == text(&target.value)))
            && i.body.iter().any(|b| b.range().contains_range(assign.range()))
    })
}

/// Is the place inside a branch taken when a cache lookup missed, which puts the value it makes
/// into the cache (`tensor = _cache.get(key, None)`, `if tensor is None: tensor = torch.as_tensor(
/// .., device=device); _cache[key] = tensor`)? The value is made once per key, not at each call.
fn fills_a_missed_entry(cx: &Checker<'_, '_>, at: TextRange) -> bool {
    let parents = cx.parents.len();
    (0..parents).rev().take(12).any(|k| {
        let Node::Stmt(Stmt::If(i)) = cx.parents[k] else { return false };
        let Expr::Compare(c) = &*i.test else { return false };
        let (Expr::Name(name), [ast::CmpOp::Is], [Expr::NoneLiteral(_)]) = (&*c.left, &c.ops[..], &c.comparators[..])
        else {
            return false;
        };
        // Bound by a lookup in a container in the statements before the branch, and put into the
        // same container in it, under the same key; a container that outlives the call (a global,
        // an attribute of the object), not this step's own dict.
        let Some((block, place)) = cx.block_of(k) else { return false };
        let text = |e: &Expr| cx.model.text(e.range());
        let lasting = |c: &Expr| match c {
            Expr::Attribute(a) => matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self"),
            // Not a local of the function (a global, or one of an enclosing function's).
            Expr::Name(n) => cx
                .enclosing_functions()
                .next()
                .and_then(|f| cx.model.function(f).scope)
                .is_none_or(|scope| !cx.model.bound_names(scope).any(|(bound, _)| bound == n.id.as_str())),
            _ => false,
        };
        i.body.iter().any(|s| s.range().contains_range(at))
            && block[..place].iter().any(|s| {
                let Stmt::Assign(a) = s else { return false };
                let (Some(Expr::Name(t)), Expr::Call(c)) = (a.targets.first(), &*a.value) else { return false };
                let Expr::Attribute(get) = &*c.func else { return false };
                t.id == name.id
                    && get.attr.as_str() == "get"
                    && lasting(&get.value)
                    && i.body.iter().any(|s| {
                        matches!(s, Stmt::Assign(put)
                            if matches!(put.targets.as_slice(), [Expr::Subscript(sub)]
                                if text(&sub.value) == text(&get.value)
                                    && c.arguments.args.first().is_some_and(|key| text(key) == text(&sub.slice)))
                                && matches!(&*put.value, Expr::Name(v) if v.id == name.id))
                    })
            })
    })
}

/// Is `at` past a guard that returns while a cache of the object is filled
/// (`if self.cos_cached is not None and n <= len(self.cos_cached): return`), in a method that
/// fills it (`self.cos_cached = ..`)? What follows runs when the cache is missed, not each time.
fn fills_a_cache(cx: &Checker<'_, '_>, at: TextRange) -> bool {
    let Some(f) = cx.enclosing_functions().next() else { return false };
    let fun = cx.model.function(f);
    let Some(receiver) = fun.receiver else { return false };
    fn attr_of<'e>(e: &'e Expr, receiver: &str) -> Option<&'e str> {
        match e {
            Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == receiver) => {
                Some(a.attr.as_str())
            }
            _ => None,
        }
    }
    // The cache itself is tested: `self.x is (not) None`, its size (`len(self.x)`,
    // `self.x.shape[0]`, `self.x.size(0)`), or a key in it (`k in self.x`).
    fn tested_cache<'e>(e: &'e Expr, receiver: &str, out: &mut Vec<&'e str>) {
        let Expr::Compare(c) = e else { return };
        let is_none = c.ops.iter().all(|o| matches!(o, ast::CmpOp::Is | ast::CmpOp::IsNot))
            && c.comparators.iter().all(|r| matches!(r, Expr::NoneLiteral(_)));
        let keyed = c.ops.iter().all(|o| matches!(o, ast::CmpOp::In | ast::CmpOp::NotIn));
        if is_none {
            out.extend(attr_of(&c.left, receiver));
        } else if keyed {
            out.extend(c.comparators.iter().filter_map(|r| attr_of(r, receiver)));
        } else {
            for side in std::iter::once(&*c.left).chain(&c.comparators) {
                let sized = match side {
                    Expr::Call(call) => match &*call.func {
                        Expr::Name(n) if n.id.as_str() == "len" => call.arguments.args.first(),
                        Expr::Attribute(a) if matches!(a.attr.as_str(), "size" | "numel") => Some(&*a.value),
                        _ => None,
                    },
                    Expr::Subscript(sub) => match &*sub.value {
                        Expr::Attribute(a) if a.attr.as_str() == "shape" => Some(&*a.value),
                        _ => None,
                    },
                    _ => None,
                };
                out.extend(sized.and_then(|x| attr_of(x, receiver)));
            }
        }
    }
    let body = &fun.def.body;
    let mut guarded: Vec<&str> = Vec::new();
    let mut guard_end = None;
    for stmt in body.iter().take_while(|s| s.start() < at.start()) {
        if let Stmt::If(i) = stmt
            && i.elif_else_clauses.is_empty()
            && matches!(i.body.as_slice(), [Stmt::Return(_)])
        {
            any_subexpr(&i.test, &mut |e| {
                tested_cache(e, receiver, &mut guarded);
                true
            });
            guard_end = Some(i.end());
        }
    }
    // Filled after the guard with a value that is not a flag, a count or the cache itself.
    let fills = |value: &Expr, name: &str| {
        !matches!(
            value,
            Expr::Compare(_) | Expr::BoolOp(_) | Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::NoneLiteral(_)
        ) && !any_subexpr_is(value, |e| attr_of(e, receiver) == Some(name))
    };
    let Some(guard_end) = guard_end else { return false };
    !guarded.is_empty()
        && body.iter().filter(|s| s.start() >= guard_end).any(|s| match s {
            Stmt::Assign(a) => a.targets.iter().any(|t| {
                attr_of(t, receiver).is_some_and(|n| guarded.contains(&n) && fills(&a.value, n))
            }),
            _ => false,
        })
}


/// `torch.cuda.synchronize()` (or `torch.mps`'s, `torch.xpu`'s, `torch.accelerator`'s, with a
/// device or not).
fn is_synchronize(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    cx.callee_name(c).is_some_and(|q| {
        matches!(
            q.as_ref(),
            "torch.cuda.synchronize" | "torch.mps.synchronize" | "torch.xpu.synchronize" | "torch.accelerator.synchronize"
        )
    })
}

/// An explicit wait as a statement of its own. Not where something may need it: where the
/// function times its work (a clock, CUDA events, `datetime`), or a caller times the call (in
/// the loop that makes it, or anywhere when it is in no loop); in a file that uses streams (a
/// wait that orders them); in tests and benchmarks; nor in a helper that only waits (its callers
/// decide).
fn explicit_synchronize<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let Expr::Call(c) = e else { return None };
    if !matches!(cx.parent(), Some(Node::Stmt(Stmt::Expr(_)))) || !is_synchronize(cx, c) || cx.kind.is_test_like() {
        return None;
    }
    let method = |site: &CallSite<'_>, names: &[&str]| {
        matches!(&*site.call.func, Expr::Attribute(a) if names.contains(&a.attr.as_str()))
    };
    let times = |site: &CallSite<'_>| {
        method(site, &["elapsed_time"])
            || cx.callee_name(site.call).is_some_and(|q| {
                api::is_clock(&q) || q.starts_with("datetime.") || q == "torch.cuda.Event"
            })
    };
    // Does a call of `function` within `range` time the work?
    let timed_in = |range: TextRange, function: Option<FunctionId>| {
        cx.model.calls.iter().any(|s| s.function == function && range.contains_range(s.call.range()) && times(s))
    };
    let function = cx.enclosing_functions().next();
    // The function's own code (a script's top level: the file's).
    let own = function.map_or(TextRange::up_to(ruff_text_size::TextSize::of(cx.model.source)), |f| {
        cx.model.function(f).def.range()
    });
    let timed = timed_in(own, function)
        || function.is_some_and(|f| {
            cx.facts.calls_to[f.index()].iter().take(256).filter_map(|&i| cx.model.calls.get(i)).any(|site| {
                match site.in_loop {
                    Some(l) => timed_in(cx.model.loop_(l).stmt.range(), site.function),
                    None => cx.facts.reads_clock_in(site.function),
                }
            })
        });
    let streams = cx.model.calls.iter().any(|s| {
        method(s, &["wait_stream", "record_stream", "wait_event"])
            || cx.callee_name(s.call).is_some_and(|q| {
                matches!(q.as_ref(), "torch.cuda.Stream" | "torch.cuda.stream" | "torch.cuda.CUDAGraph" | "torch.cuda.graph")
            })
    });
    if timed || streams {
        return None;
    }
    let only_waits = function.is_some_and(|f| {
        let mut body = cx.model.function(f).def.body.iter();
        let mut statements = body.by_ref().filter(|s| !matches!(s, Stmt::Expr(x) if matches!(&*x.value, Expr::StringLiteral(_))));
        matches!((statements.next(), statements.next()), (Some(Stmt::Expr(x)), None) if std::ptr::eq(&*x.value, e))
    });
    if only_waits {
        return None;
    }
    let what = format!("{}()", cx.callee_name(c)?);
    Some(Sync { always: Some(AlwaysWaits::Synchronize), ..Sync::read(false, what, e, e, e.range()) })
}

/// `x[torch.arange(n), idx]` (or assigned into): a tensor made on the host and used to index a
/// tensor on the device, which PyTorch first copies to the device with a blocking copy. Also through a name bound to
/// one (`idx = torch.randint(n, (k,))`, then `x[:, idx]`).
fn index_upload<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let Expr::Subscript(s) = e else { return None };
    if s.ctx == ast::ExprContext::Del {
        return None;
    }
    let parts: &[Expr] = match &*s.slice {
        Expr::Tuple(t) => &t.elts,
        slice => std::slice::from_ref(slice),
    };
    // The index first (a look at its syntax, or one binding), the indexed tensor's device last.
    let (part, factory) = parts.iter().find_map(|part| {
        let made = match part {
            Expr::Name(_) => single_assignment(cx, part)
                .filter(|value| !cx.device_blocks.iter().any(|b| b.contains_range(value.range())))?,
            Expr::Call(_) | Expr::Subscript(_) => part,
            _ => return None,
        };
        // A 0-dim index (`x[:, torch.tensor(1)]`) is read on the host as a number: nothing is
        // copied.
        host_made_within(cx, made, 8)
            .filter(|(_, _, zero_dim)| !zero_dim && !cx.default_device_set())
            .map(|(factory, _, _)| (part, (format!("torch.{factory}(..)"), Upload::Index)))
            .or_else(|| numpy_indices(cx, made).map(|made| (part, (format!("{made}(..)"), Upload::NumpyIndex))))
    })?;
    let (what, upload) = factory;
    // Numpy indexes numpy arrays far more often than tensors: its indices count only for what is
    // known to be a tensor.
    if cx.hot().is_none()
        || !cx.kind_of(&s.value).may_be_tensor()
        || (upload == Upload::NumpyIndex && cx.kind_of(&s.value) != crate::python::typing::Kind::Tensor)
        || !provenance_in_project(cx, &s.value).on_accelerator
    {
        return None;
    }
    Some(Sync { upload: Some(upload), ..Sync::read(false, what, part, e, part.range()) })
}

/// An array of indices numpy makes (`np.random.choice(n, size=k)`, `np.random.permutation(n)`,
/// `np.arange(a, b)`): indexing a tensor on the device with it copies it there. The name as
/// written (`np.random.choice`); `None` for a call that may return one number
/// (`np.random.randint(n)`, `np.random.choice(n)` without a size).
fn numpy_indices(cx: &Checker<'_, '_>, made: &Expr) -> Option<String> {
    // `np.random.permutation(n)[:k]`: a slice of one; `perm[:k]` with `perm` bound to one.
    let made = match made {
        Expr::Subscript(s) if matches!(&*s.slice, Expr::Slice(_)) => match &*s.value {
            name @ Expr::Name(_) => single_assignment(cx, name)?,
            value => value,
        },
        made => made,
    };
    let Expr::Call(c) = made else { return None };
    let q = cx.callee_name(c)?;
    let sized = c.arguments.find_keyword("size").is_some();
    let array = match q.strip_prefix("numpy.")? {
        "random.permutation" | "arange" | "argsort" | "flatnonzero" | "array" | "asarray" => true,
        "random.choice" => sized || c.arguments.args.len() >= 2,
        "random.randint" => sized || c.arguments.args.len() >= 3,
        _ => false,
    };
    array.then(|| cx.short(c.func.range()))
}

/// Is `data` a parameter of the function around it to which a call of the file gives one of the
/// calling object's own arrays (`self.betas`, `np.log(self.betas[1:])`, `1.0 - self.alphas`)?
/// (The first few dozen calls are looked at.)
fn given_an_objects_array(cx: &Checker<'_, '_>, data: &Expr) -> bool {
    let Some(b) = super::helpers::name_binding(cx, data) else { return false };
    let BindingKind::Parameter { function: Some(f), position, variadic: false, .. } = cx.model.binding(b).kind else {
        return false;
    };
    // A method's first parameter is its receiver: calls pass the others.
    let position = if cx.model.function(f).receiver.is_some() { position.checked_sub(1) } else { Some(position) };
    let Some(position) = position else { return false };
    fn own_array(e: &Expr, depth: u32) -> bool {
        depth < 4
            && match e {
                Expr::Attribute(a) => matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self"),
                Expr::Subscript(s) => own_array(&s.value, depth + 1),
                Expr::NumberLiteral(_) => true,
                // `1.0 - self.alphas_cumprod`
                Expr::BinOp(b) => own_array(&b.left, depth + 1) && own_array(&b.right, depth + 1),
                Expr::UnaryOp(u) => own_array(&u.operand, depth + 1),
                Expr::Call(c) => {
                    matches!(&*c.func, Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if matches!(n.id.as_str(), "np" | "numpy")))
                        && !c.arguments.args.is_empty()
                        && c.arguments.args.iter().all(|a| own_array(a, depth + 1))
                }
                _ => false,
            }
    }
    cx.facts.calls_to[f.index()].iter().take(64).any(|&i| {
        cx.model.calls.get(i).is_some_and(|site| {
            site.call.arguments.args.get(position).is_some_and(|a| !matches!(a, Expr::NumberLiteral(_)) && own_array(a, 0))
        })
    })
}

/// The value a name was given, when it is bound once in its scope by a plain assignment (one
/// bound on several paths, `if cuda: idx = ..cuda() else: idx = ..`, may hold either).
fn single_assignment<'a>(cx: &Checker<'_, 'a>, name: &Expr) -> Option<&'a Expr> {
    match cx.model.binding(super::helpers::name_binding(cx, name)?) {
        crate::python::model::Binding {
            kind:
                crate::python::model::BindingKind::Assignment { value, part: crate::python::model::Part::Whole, .. },
            shadowed,
            ..
        } if shadowed.is_none() || in_straight_line(cx, value) => Some(value),
        _ => None,
    }
}

/// Is `value` assigned by a statement of the current function's own body, outside any branch or
/// loop (`targets = zeros.scatter_(..)` after `def forward(self, inputs, targets):`)? Then the
/// name holds it at every later place of the function until it is bound again, whatever it held
/// before.
fn in_straight_line(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    let Some(f) = cx.function else { return false };
    let at = std::ptr::from_ref(value) as usize;
    if let Some(known) = cx.straight_line.borrow().get(&f) {
        return known.contains(&at);
    }
    let values: FxHashSet<usize> = cx
        .model
        .function(f)
        .def
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign(a) => Some(std::ptr::from_ref(&*a.value) as usize),
            _ => None,
        })
        .collect();
    let found = values.contains(&at);
    cx.straight_line.borrow_mut().insert(f, values);
    found
}

/// An index named a mask (`mask`, `condition_mask`, `self.valid_mask`, `fg_masks`: the name's last word),
/// that may be a tensor: indexing with a tensor of floats fails, and one of indices is named for
/// them (`mask_idx`), so a tensor named a mask is one of booleans.
fn named_a_mask(cx: &Checker<'_, '_>, index: &Expr) -> bool {
    let name = match index {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.as_str(),
        _ => return false,
    };
    let mut words = name.rsplit('_');
    let last = words.next().unwrap_or(name);
    // An attention mask is 0/1 or additive, not a boolean index (`hidden[attention_mask]` gathers
    // rows 0 and 1).
    let attention = words.any(|w| w.eq_ignore_ascii_case("attention") || w.eq_ignore_ascii_case("attn"));
    // `fg_masks = torch.cat(fg_masks, 0)`: masks joined are one.
    let mask_word = last.eq_ignore_ascii_case("mask") || last.eq_ignore_ascii_case("masks");
    if !mask_word || attention || !cx.kind_of(index).may_be_tensor() {
        return false;
    }
    match super::helpers::name_binding(cx, index).map(|b| cx.model.binding(b).kind) {
        // A parameter may be given anything (a list of class indices): a mask where a call of
        // this file passes a tensor for it.
        Some(BindingKind::Parameter { function: Some(f), position, .. }) => {
            let fun = cx.model.function(f);
            cx.facts.calls_to[f.index()].iter().take(256).filter_map(|&i| cx.model.calls.get(i)).any(|site| {
                super::helpers::argument_for(site.call, fun, position, name)
                    .is_some_and(|a| cx.kind_of(a) == Kind::Tensor)
            })
        }
        Some(BindingKind::Parameter { .. }) => false,
        // `mask = torch.randperm(n)[:k]`, `body_mask = slice(1, -1)`: indices, not booleans.
        Some(BindingKind::Assignment { value, .. }) => !holds_indices(cx, value),
        _ => true,
    }
}

/// Is the value a set of indices: made by a factory of indices (`torch.randperm`, `torch.arange`,
/// `argsort`, `nonzero`, `topk`'s), a slice, a range, directly or through indexing and methods?
fn holds_indices(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    let mut at = value;
    for _ in 0..16 {
        match at {
            Expr::Subscript(s) => at = &s.value,
            Expr::Call(c) => {
                if let Some(q) = cx.callee_name(c)
                    && matches!(
                        q.as_ref(),
                        "torch.randperm"
                            | "torch.arange"
                            | "torch.randint"
                            | "torch.argsort"
                            | "torch.nonzero"
                            | "torch.topk"
                            | "builtins.slice"
                            | "builtins.range"
                            | "numpy.arange"
                            | "numpy.random.permutation"
                    )
                {
                    return true;
                }
                match &*c.func {
                    Expr::Attribute(a) if matches!(a.attr.as_str(), "argsort" | "nonzero" | "topk" | "indices") => {
                        return true;
                    }
                    Expr::Attribute(a) => at = &a.value,
                    _ => return false,
                }
            }
            Expr::Attribute(a) if a.attr.as_str() == "indices" => return true,
            _ => return false,
        }
    }
    false
}

/// Is the name a parameter of the function, given a tensor of the device by the calls that run
/// it at every step? (A name bound to what a function returns, `select` of `.., select, .. =
/// consistency_loss(..)`, was tried too: 15 of 24 new places true, blind, the rest most often
/// detection post-processing in evaluation, or a select beside a wait the code already takes.)
fn handed_a_device_tensor(cx: &Checker<'_, '_>, name: &Expr) -> bool {
    super::helpers::name_binding(cx, name)
        .is_some_and(|b| matches!(cx.model.binding(b).kind, BindingKind::Parameter { .. }))
        && provenance_in_project(cx, name).on_accelerator
}

/// Tensor methods and functions of torch that compare element by element or test each element:
/// their result is a mask.
const COMPARISONS: &[&str] =
    &["ge", "gt", "le", "lt", "eq", "ne", "greater", "greater_equal", "less", "less_equal", "not_equal", "isnan", "isinf", "isfinite", "isneginf", "isposinf"];

/// `loss[valid]` with a boolean mask made by comparing a tensor (`valid = target > 0`, or the
/// comparison in place), or a tensor named a mask ([`named_a_mask`]): the result's size is the
/// number of `True`s, which the host waits for; so does updating through one (`x[mask] *= w`
/// reads `x[mask]` first). (Assigning through a mask, `x[mask] = 0`, is a masked fill: no wait.)
fn mask_index<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let Expr::Subscript(s) = e else { return None };
    // (`x[mask] *= w` reads `x[mask]` first, then writes it back.)
    let updated = matches!(cx.parents.last(), Some(Node::Stmt(Stmt::AugAssign(a))) if std::ptr::eq(&*a.target, e));
    if s.ctx != ast::ExprContext::Load && !updated {
        return None;
    }
    fn compares_tensors(cx: &Checker<'_, '_>, m: &Expr, depth: u32) -> bool {
        match m {
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Invert => compares_tensors(cx, &u.operand, depth),
            // `(i >= 0) & (i < n)`: masks combined are a mask.
            Expr::BinOp(b) if depth > 0 && matches!(b.op, ast::Operator::BitAnd | ast::Operator::BitOr) => {
                compares_tensors(cx, &b.left, depth - 1) || compares_tensors(cx, &b.right, depth - 1)
            }
            // `(u > 0) * (l == u)`: two masks multiplied are their `and`.
            Expr::BinOp(b) if depth > 0 && b.op == ast::Operator::Mult => {
                compares_tensors(cx, &b.left, depth - 1) && compares_tensors(cx, &b.right, depth - 1)
            }
            Expr::Call(c) if depth > 0 && cx.callee_name(c).is_some_and(|q| {
                matches!(q.as_ref(), "torch.logical_and" | "torch.logical_or" | "torch.logical_not")
            }) => {
                c.arguments.args.iter().any(|a| compares_tensors(cx, a, depth - 1))
            }
            // (Not a comparison of a tensor made on the host, `torch.arange(n) != cls_pos`: that mask
            // is on the host, and PyTorch counts it there.)
            // (Also a parameter of unknown kind that every caller at a step hands a tensor of the
            // device: `idxes[selected_mask == 1]` in a helper given the batch's mask.)
            Expr::Compare(c) => {
                c.ops.len() == 1
                    && !matches!(c.ops[0], ast::CmpOp::Is | ast::CmpOp::IsNot | ast::CmpOp::In | ast::CmpOp::NotIn)
                    && (cx.kind_of(&c.left) == Kind::Tensor
                        || (matches!(&*c.left, Expr::Name(_))
                            && cx.kind_of(&c.left) == Kind::Unknown
                            && handed_a_device_tensor(cx, &c.left)))
                    && host_made(cx, &c.left).is_none()
            }
            // `max_probs.ge(thr)`, `torch.gt(x, 0)`, `loss.isnan()`: the comparisons and tests
            // spelled as calls, of a tensor of the device; and `~diag.bool()`, a tensor of the
            // device cast to booleans (not one the name holds where it is cast, made on the host:
            // `mask = torch.ones(h); mask[pruned] = 0`).
            Expr::Call(c) => {
                let compared = match cx.callee_name(c).as_deref().and_then(|q| q.strip_prefix("torch.")) {
                    Some(op) if COMPARISONS.contains(&op) => c.arguments.args.first(),
                    Some(_) => None,
                    None => match &*c.func {
                        Expr::Attribute(a)
                            if COMPARISONS.contains(&a.attr.as_str())
                                || (a.attr.as_str() == "bool" && c.arguments.is_empty()) =>
                        {
                            Some(&*a.value)
                        }
                        _ => None,
                    },
                };
                compared.is_some_and(|t| {
                    cx.kind_of(t) == Kind::Tensor && host_made(cx, t).is_none() && !bound_on_host(cx, t)
                })
            }
            // `in_boxes = in_boxes_all | in_centers_all`, each bound once to a comparison.
            Expr::Name(_) if depth > 0 => {
                single_assignment(cx, m).is_some_and(|v| compares_tensors(cx, v, depth - 1))
            }
            _ => false,
        }
    }
    let is_mask = |m: &Expr| {
        let compared = match m {
            Expr::Name(_) => single_assignment(cx, m).is_some_and(|v| compares_tensors(cx, v, 4)),
            m => compares_tensors(cx, m, 4),
        };
        compared || named_a_mask(cx, m)
    };
    // `cost[:, matching > 1]`: a mask among the indices of a tuple.
    let masked = match &*s.slice {
        Expr::Tuple(t) => t.elts.iter().any(|i| !matches!(i, Expr::Slice(_)) && is_mask(i)),
        slice => is_mask(slice),
    };
    if !masked
        || cx.hot().is_none()
        || !cx.kind_of(&s.value).may_be_tensor()
        || !provenance_in_project(cx, &s.value).on_accelerator
    {
        return None;
    }
    let what = format!("{}[{}]", cx.short(s.value.range()), cx.short(s.slice.range()));
    Some(Sync { always: Some(AlwaysWaits::SizedByData), ..Sync::read(false, what, &s.value, e, e.range()) })
}

/// Is `e` a name whose binding where it is used holds a tensor made on the host ([`host_made`]),
/// whatever else the name is bound to in the function (a parameter rebound, `mask =
/// torch.ones(h)`, which [`host_made`], asking for a name bound once, does not follow)?
fn bound_on_host(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let Expr::Name(n) = e else { return false };
    let Some(b) = cx.model.binding_of(n) else { return false };
    matches!(cx.model.binding(b).kind, BindingKind::Assignment { value, part: Part::Whole, .. }
        if host_made(cx, value).is_some())
}

/// A tensor made on the host by a factory that takes no data (`torch.arange(n)`,
/// `torch.randint(k, (n,))`), with no `device=`, through methods that keep it where it is
/// (`.unsqueeze(0)`, `.long()`, `.to(dtype)`), and not empty: the factory's name.
fn host_made<'e>(cx: &Checker<'_, 'e>, e: &'e Expr) -> Option<(&'static str, TextRange)> {
    if cx.default_device_set() {
        return None;
    }
    host_made_within(cx, e, 8).map(|(factory, at, _)| (factory, at))
}

/// [`host_made`], also through a name bound once to such a tensor (`t = torch.rand(b) * s; t.to(x)`),
/// arithmetic (`torch.arange(n) / half`) and elementwise functions (`torch.exp(..)`), `depth`
/// names or operators deep; and whether the tensor is 0-dim (`torch.zeros(())`).
fn host_made_within<'e>(cx: &Checker<'_, 'e>, e: &'e Expr, depth: u32) -> Option<(&'static str, TextRange, bool)> {
    if depth > 0 {
        match e {
            // Bound in this very function: the factory is where the user acts.
            Expr::Name(_) => {
                let function = cx.model.function(cx.enclosing_functions().next()?).def.range();
                let value = single_assignment(cx, e).filter(|value| {
                    function.contains_range(value.range())
                        && !cx.device_blocks.iter().any(|b| b.contains_range(value.range()))
                })?;
                return host_made_within(cx, value, depth - 1);
            }
            // A tensor made on the host that is not 0-dim, combined with anything: PyTorch
            // refuses a tensor of the device as the other operand, so the result is on the host
            // (`torch.rand(b) * (t1 - t0) + t0`). A 0-dim one goes where the other operand is.
            Expr::BinOp(b) => {
                let operand = |e| host_made_within(cx, e, depth - 1).filter(|(_, _, zero_dim)| !zero_dim);
                return operand(&b.left).or_else(|| operand(&b.right));
            }
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::USub => return host_made_within(cx, &u.operand, depth - 1),
            // `torch.arange(b) % 4 == 0`: a mask made where its tensor is.
            Expr::Compare(c) if c.ops.len() == 1 => {
                return host_made_within(cx, &c.left, depth - 1).filter(|(_, _, zero_dim)| !zero_dim);
            }
            Expr::Call(c)
                if c.arguments.len() == 1
                    && cx.callee_name(c).is_some_and(|q| {
                        q.strip_prefix("torch.").is_some_and(|f| {
                            ["exp", "log", "sin", "cos", "sqrt", "rsqrt", "sigmoid", "tanh", "abs", "floor", "ceil", "round"]
                                .contains(&f)
                        })
                    }) =>
            {
                return host_made_within(cx, c.arguments.args.first()?, depth - 1);
            }
            // `self._relative_position_bucket(torch.arange(k)[None, :] - torch.arange(q)[:, None])`:
            // a function of this file that moves nothing ([`moves_anything`]) computes where its
            // first argument is.
            Expr::Call(c) if !c.arguments.args.is_empty() => {
                if let Some(crate::python::model::Callee::Function(f)) = cx.model.callee(c, cx.function)
                    && !moves_anything(cx, cx.model.function(f).def)
                {
                    return host_made_within(cx, c.arguments.args.first()?, depth - 1);
                }
            }
            _ => {}
        }
    }
    // A factory that takes no data, as `torch.<name>`; or one whose data are literal numbers
    // (`torch.tensor([0.5])`, `torch.FloatTensor([0.5])`): a constant, which the device can make
    // itself. Data of any other kind (a batch, `torch.from_numpy(..)`) has to reach the device.
    let factory_of = |e: &'e Expr| -> Option<(&'e ast::ExprCall, &'static str)> {
        const FACTORIES: [&str; 17] = [
            "zeros",
            "ones",
            "empty",
            "full",
            "arange",
            "eye",
            "rand",
            "randn",
            "randint",
            "randperm",
            "linspace",
            "logspace",
            "hann_window",
            "hamming_window",
            "blackman_window",
            "bartlett_window",
            "kaiser_window",
        ];
        const CONSTANTS: [&str; 9] = [
            "tensor",
            "as_tensor",
            "Tensor",
            "FloatTensor",
            "DoubleTensor",
            "HalfTensor",
            "LongTensor",
            "IntTensor",
            "BoolTensor",
        ];
        let Expr::Call(c) = e else { return None };
        let q = cx.callee_name(c)?;
        let name = q.strip_prefix("torch.")?;
        FACTORIES.iter().find(|f| **f == name).map(|f| (c, *f)).or_else(|| {
            // (Also NumPy's constants: `torch.from_numpy(np.eye(k).flatten().astype(np.float32))`.)
            let constant = matches!(&c.arguments.args[..], [data] if literal_numbers(data) || numpy_constant(cx, data));
            if name == "from_numpy" && constant {
                return Some((c, "from_numpy"));
            }
            CONSTANTS.iter().find(|f| **f == name).filter(|_| constant).map(|f| (c, *f))
        }).or_else(|| {
            // `th.from_numpy(arr).to(device)` in a helper a call gives one of the object's own
            // arrays (`_extract_into_tensor(self.sqrt_alphas_cumprod, t, shape)`): a schedule
            // made once, copied again at each call.
            let data = c.arguments.args.first()?;
            ["from_numpy", "tensor", "as_tensor"]
                .into_iter()
                .find(|f| *f == name)
                .filter(|_| given_an_objects_array(cx, data))
                .map(|f| (c, f))
        })
    };
    // The factory, through methods that keep the tensor where it is (`torch.arange(n).unsqueeze(0)`,
    // `.long()`), a few calls deep.
    let mut at = e;
    let mut found = factory_of(at);
    for _ in 0..8 {
        if found.is_some() {
            break;
        }
        // `torch.arange(b)[:, None]`: a view of it.
        if let Expr::Subscript(sub) = at {
            at = &sub.value;
            found = factory_of(at);
            continue;
        }
        // `torch.cat([torch.ones(b), torch.zeros(2 * b)])`: joined from tensors made on the host.
        if let Some(joined) = joined_on_host(cx, at, depth) {
            return Some(joined);
        }
        let Some((c, inner, m)) = torch_form_of_method(cx, at).or_else(|| method_call(at)) else {
            // `offset.view(b, 1)` with `offset = torch.arange(b) * n` above: through the name.
            return match at {
                Expr::Name(_) | Expr::BinOp(_) if depth > 0 && !std::ptr::eq(at, e) => {
                    host_made_within(cx, at, depth - 1)
                }
                _ => None,
            };
        };
        // `.to(dtype)` keeps the device too.
        let keeps = match m {
            "to" => c.arguments.args.first().is_some_and(|t| names_a_dtype(cx, t)),
            // `.type_as(y)` and `.type(torch.cuda.FloatTensor)` may move it to `y`'s device.
            "cuda" | "cpu" | "pin_memory" | "type_as" | "type" => false,
            m => crate::python::api::tensor_method_returns_tensor(m),
        };
        if !keeps {
            return None;
        }
        at = inner;
        found = factory_of(at);
    }
    let (made, factory) = found?;
    if made.arguments.find_keyword("device").is_some() {
        return None;
    }
    // `torch.empty(0)`: nothing to copy, and PyTorch does not wait for an empty copy.
    let zero = |e: &Expr| {
        matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ast::Number::Int(i) if i.as_u8() == Some(0)))
    };
    let empty = |e: &Expr| match e {
        Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => elts.iter().any(zero),
        e => zero(e),
    };
    // `torch.zeros(())`: 0-dim, one element (its copy waits too).
    let no_dims =
        |e: &Expr| matches!(e, Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) if elts.is_empty());
    // The size arguments: all the positional ones, but `full`'s fill value; a typed constructor
    // given numbers (`torch.FloatTensor(0)`, `torch.FloatTensor(2, 3)`) takes sizes.
    let typed_sizes = factory.ends_with("Tensor")
        && made.arguments.args.iter().all(|a| matches!(a, Expr::NumberLiteral(_)));
    let sizes = match factory {
        "zeros" | "ones" | "empty" | "rand" | "randn" => &made.arguments.args[..],
        _ if typed_sizes => &made.arguments.args[..],
        "full" => made.arguments.args.get(..1).unwrap_or(&[]),
        _ => &[],
    };
    if sizes.iter().any(empty) {
        return None;
    }
    // `torch.tensor(0.5)`: 0-dim too.
    let zero_dim = matches!(sizes, [only] if no_dims(only))
        || (factory == "tensor" || factory == "as_tensor")
            && matches!(made.arguments.args.first(), Some(Expr::NumberLiteral(_) | Expr::UnaryOp(_)));
    Some((factory, made.range(), zero_dim))
}

/// `torch.cat([torch.ones(b), torch.zeros(2 * b)])` (or `torch.stack`): a tensor joined from
/// tensors all made on the host (not 0-dim) is made on the host; the first one's factory is
/// where `device=` goes.
fn joined_on_host<'e>(cx: &Checker<'_, 'e>, e: &'e Expr, depth: u32) -> Option<(&'static str, TextRange, bool)> {
    let Expr::Call(c) = e else { return None };
    let q = cx.callee_name(c)?;
    if !matches!(&*q, "torch.cat" | "torch.concat" | "torch.concatenate" | "torch.stack") {
        return None;
    }
    let (Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. })) = c.arguments.args.first()?
    else {
        return None;
    };
    // (A few parts: a long list is data.)
    if elts.len() > 64 {
        return None;
    }
    let mut first = None;
    for elt in elts {
        let (factory, at, zero_dim) = host_made_within(cx, elt, depth.saturating_sub(1))?;
        if zero_dim {
            return None;
        }
        first.get_or_insert((factory, at, false));
    }
    first
}

/// `torch.triu(t, diagonal=1)`: torch's function form of a tensor method that returns a tensor
/// (`t.triu(1)`), given `t` first and nothing else that is a tensor (sizes, dims, offsets). As
/// [`method_call`]: the call, `t` and the method's name.
fn torch_form_of_method<'e>(cx: &Checker<'_, 'e>, e: &'e Expr) -> Option<(&'e ast::ExprCall, &'e Expr, &'e str)> {
    let Expr::Call(c) = e else { return None };
    let Expr::Attribute(f) = &*c.func else { return None };
    let name = f.attr.as_str();
    if !api::tensor_method_returns_tensor(name) || name.ends_with('_') || cx.callee_name(c)?.strip_prefix("torch.")? != name {
        return None;
    }
    let (first, rest) = c.arguments.args.split_first()?;
    let plain = |a: &Expr| matches!(cx.kind_of(a), Kind::Scalar | Kind::Other);
    (rest.iter().all(plain) && c.arguments.keywords.iter().all(|k| plain(&k.value))).then_some((c, first, name))
}

/// Does a function move or place a tensor anywhere: `.cuda()`, `.type_as(..)`, `.to(..)` given
/// anything but a dtype (`.to(torch.long)` converts where the tensor is), or a `device=`?
fn moves_anything(cx: &Checker<'_, '_>, f: &ast::StmtFunctionDef) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Moves<'c, 'm, 'a> {
        cx: &'c Checker<'m, 'a>,
        found: bool,
    }
    impl<'x> Visitor<'x> for Moves<'_, '_, '_> {
        fn visit_expr(&mut self, e: &'x Expr) {
            if let Expr::Call(c) = e {
                self.found |= c.arguments.find_keyword("device").is_some()
                    || matches!(&*c.func, Expr::Attribute(a) if match a.attr.as_str() {
                        "cuda" | "type_as" => true,
                        "to" => c.arguments.args.first().is_none_or(|t| !names_a_dtype(self.cx, t)),
                        _ => false,
                    });
            }
            if !self.found {
                visitor::walk_expr(self, e);
            }
        }
    }
    let mut moves = Moves { cx, found: false };
    moves.visit_body(&f.body);
    moves.found
}

/// A number literal (`0.5`, `-1`), or a list or tuple of them, nested at most a few levels:
/// data written in the code.
fn literal_numbers(e: &Expr) -> bool {
    fn within(e: &Expr, depth: u32) -> bool {
        match e {
            Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) => true,
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::USub => matches!(&*u.operand, Expr::NumberLiteral(_)),
            Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
                depth < 4 && !elts.is_empty() && elts.iter().all(|e| within(e, depth + 1))
            }
            _ => false,
        }
    }
    within(e, 0)
}

/// A NumPy array made from constants (`np.array([1, 0, 0, 1])`, `np.eye(self.k)`, a filter built
/// by a function of the file from a parameter's default: `k = _setup_kernel(k) * gain`), which the
/// device could make itself or the module keep: not data (a batch, a replay buffer's samples, an
/// array read back from the device or handed in by the caller).
fn numpy_constant(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    // (A budget of nodes: names bound to lists of names would otherwise be walked once per path.)
    cx.kind_of(e) == Kind::Numpy && constant_within(cx, e, 0, &std::cell::Cell::new(512))
}

/// Is `e` made only from constants, sizes and options ([`numpy_constant`]), `depth` steps in,
/// within `budget` nodes looked at?
fn constant_within(cx: &Checker<'_, '_>, e: &Expr, depth: u32, budget: &std::cell::Cell<u32>) -> bool {
    if depth > 8 || budget.get() == 0 {
        return false;
    }
    budget.set(budget.get() - 1);
    let next = |e: &Expr| constant_within(cx, e, depth + 1, budget);
    match e {
        Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::NoneLiteral(_) | Expr::StringLiteral(_) => true,
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
            elts.len() <= 64 && elts.iter().all(next)
        }
        Expr::UnaryOp(u) => next(&u.operand),
        Expr::BinOp(b) => next(&b.left) && next(&b.right),
        // A parameter with a default is an option (`k=None`, `factor=2`); one without is the
        // caller's data. A name bound once here to a constant is one.
        // An array made (`np.zeros(..)`) and then filled with data is data. Python's types as a
        // dtype (`dtype=bool`) are settings.
        Expr::Name(n) => match cx.model.binding_of(n) {
            Some(b) => match cx.model.binding(b).kind {
                BindingKind::Parameter { default, variadic: false, .. } => default.is_some(),
                // Also every write into it after: `k[1, 1] = -4 * alpha` keeps it a constant,
                // `out[i] = row` or `onehot[np.arange(n), labels] = 1` makes it data.
                BindingKind::Assignment { value, part: Part::Whole, .. } => next(value) && fills_keep_constant(cx, b),
                _ => cx.kind_of(e) == Kind::Scalar,
            },
            None => matches!(n.id.as_str(), "bool" | "int" | "float" | "complex"),
        },
        // A setting of the object (`self.k`, `self.N`), not an array it keeps; a dtype
        // (`np.float32`, `torch.float32`).
        Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
            !matches!(cx.kind_of(e), Kind::Numpy | Kind::Tensor)
        }
        Expr::Attribute(_) => {
            cx.model.canonical_name(e).is_some_and(|q| q.starts_with("numpy.") || names_a_dtype(cx, e))
        }
        Expr::Subscript(sub) => next(&sub.value) && next(&sub.slice),
        Expr::Slice(sl) => [&sl.lower, &sl.upper, &sl.step].iter().all(|p| p.as_deref().is_none_or(next)),
        Expr::Call(c) => {
            let args_constant = || c.arguments.args.iter().all(next) && c.arguments.keywords.iter().all(|k| next(&k.value));
            // Sizes: `x.shape[1]`, `x.size(0)`, `len(xs)`.
            if is_shape(e) || host_number(cx, e, 0) {
                return true;
            }
            // Methods that keep a constant one (`.astype(np.float32)`, `.flatten()`).
            if let Expr::Attribute(a) = &*c.func
                && matches!(a.attr.as_str(), "astype" | "flatten" | "ravel" | "reshape" | "copy" | "transpose" | "squeeze")
                && cx.kind_of(&a.value) == Kind::Numpy
            {
                return next(&a.value) && args_constant();
            }
            match cx.callee_name(c).as_deref() {
                // NumPy's functions and random draws of given sizes; Python's `list(range(n))`.
                Some(q) if q.starts_with("numpy.") => args_constant(),
                Some("builtins.list" | "builtins.range" | "builtins.int" | "builtins.float" | "builtins.min" | "builtins.max") => {
                    args_constant()
                }
                _ => {
                    // A function of this file given constants (`_setup_kernel(k)`).
                    matches!(cx.model.callee(c, cx.function), Some(crate::python::model::Callee::Function(_)))
                        && args_constant()
                }
            }
        }
        _ => false,
    }
}

/// What is written into the array bound by `b` after it is made: each write's index and value
/// (`k[1, 1] = -4 * alpha`), or `None` for a write whose index or value is not known (`np.copyto(a,
/// src)`, `a.fill(v)`, `np.add.at(a, idx, v)`, `np.exp(x, out=a)`, a slice assigned through
/// another array). Looked for in the function being checked, or the module's statements outside
/// one; once per function.
fn fills_of<'a>(cx: &Checker<'_, 'a>, b: BindingId) -> Vec<Option<(&'a Expr, &'a Expr)>> {
    use ruff_python_ast::visitor::{self, Visitor};
    type Fills<'a> = rustc_hash::FxHashMap<BindingId, Vec<Option<(&'a Expr, &'a Expr)>>>;
    struct Walk<'c, 'm, 'a> {
        cx: &'c Checker<'m, 'a>,
        fills: Fills<'a>,
    }
    impl<'a> Walk<'_, '_, 'a> {
        /// The array a target or argument writes into (`a`, `a[i]`, `a[:, 0][mask]`, `a.real`),
        /// noted with what is written when the target is `a[index]` itself.
        fn written(&mut self, target: &'a Expr, value: Option<&'a Expr>) {
            let mut e = target;
            loop {
                match e {
                    Expr::Subscript(s) => e = &s.value,
                    Expr::Attribute(a) => e = &a.value,
                    Expr::Name(n) => {
                        if let Some(b) = self.cx.model.binding_of(n) {
                            let what = match (target, value) {
                                (Expr::Subscript(s), Some(v)) if matches!(&*s.value, Expr::Name(_)) => Some((&*s.slice, v)),
                                _ => None,
                            };
                            self.fills.entry(b).or_default().push(what);
                        }
                        return;
                    }
                    _ => return,
                }
            }
        }
    }
    impl<'a> Visitor<'a> for Walk<'_, '_, 'a> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            match s {
                Stmt::Assign(a) => {
                    for t in a.targets.iter().filter(|t| matches!(t, Expr::Subscript(_))) {
                        self.written(t, Some(&a.value));
                    }
                }
                // `a[i] += v`: what it was and more.
                Stmt::AugAssign(a) if matches!(&*a.target, Expr::Subscript(_)) => self.written(&a.target, None),
                Stmt::AnnAssign(ast::StmtAnnAssign { target, value: Some(v), .. }) if matches!(&**target, Expr::Subscript(_)) => {
                    self.written(target, Some(v));
                }
                _ => {}
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                match &*c.func {
                    // `a.fill(v)`, `a.put(idx, v)`, `a.itemset(i, v)`
                    Expr::Attribute(f)
                        if matches!(f.attr.as_str(), "fill" | "put" | "itemset")
                            && !c.arguments.args.iter().all(literal_numbers) =>
                    {
                        self.written(&f.value, None);
                    }
                    // `np.copyto(a, src)`, `np.put(a, idx, v)`, `np.fill_diagonal(a, v)`,
                    // `np.add.at(a, idx, v)`
                    _ if self.cx.callee_name(c).is_some_and(|q| {
                        matches!(
                            q.as_ref(),
                            "numpy.copyto" | "numpy.put" | "numpy.place" | "numpy.putmask" | "numpy.fill_diagonal"
                        ) || (q.starts_with("numpy.") && q.ends_with(".at"))
                    }) =>
                    {
                        if let Some(a) = c.arguments.args.first() {
                            self.written(a, None);
                        }
                    }
                    _ => {}
                }
                // `np.exp(x, out=a)`
                if let Some(out) = c.arguments.find_keyword("out") {
                    self.written(&out.value, None);
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut walk = Walk { cx, fills: Fills::default() };
    match cx.function {
        Some(f) => walk.visit_body(&cx.model.function(f).def.body),
        None => walk.visit_body(cx.module_body),
    }
    cx.filled_arrays.borrow_mut().entry(cx.function).or_insert_with(|| walk.fills.keys().copied().collect());
    walk.fills.remove(&b).unwrap_or_default()
}

/// Does every write into the array bound by `b` after it is made ([`fills_of`]) keep it a constant
/// ([`constant_within`]: `k[1, 1] = -4 * alpha`), not data (`out[i] = row`, `onehot[np.arange(n),
/// labels] = 1`)? Most arrays are never written into: the function is walked once to know which
/// are, and each one that is judged once.
fn fills_keep_constant(cx: &Checker<'_, '_>, b: BindingId) -> bool {
    let known_filled = cx.filled_arrays.borrow().get(&cx.function).map(|filled| filled.contains(&b));
    if known_filled == Some(false) {
        return true;
    }
    if let Some(&known) = cx.constant_fills.borrow().get(&b) {
        return known;
    }
    let fills = fills_of(cx, b);
    let budget = std::cell::Cell::new(512);
    let constant = fills.iter().all(|f| f.is_some_and(|(at, v)| constant_within(cx, at, 0, &budget) && constant_within(cx, v, 0, &budget)));
    cx.constant_fills.borrow_mut().insert(b, constant);
    constant
}

/// Numbers the host holds: literal ones, a tensor's shape (`x.shape[2:]`, `x.size()`), or a list
/// of numbers, sizes and names of numbers (`[w, h, w, h]` where `h, w = x.shape[-2:]`); also
/// lengths of Python containers (`[len(t["labels"]) for t in targets]`, and a name bound to
/// `sum(len(t["labels"]) for t in targets)`), and a NumPy array of constants ([`numpy_constant`]).
fn host_numbers(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    match e {
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
            !elts.is_empty() && elts.iter().all(|e| host_number(cx, e, 0))
        }
        Expr::ListComp(l) => host_number(cx, &l.elt, 0),
        // A NumPy array of constants (`torch.tensor(k, device=x.device)` of a filter made with NumPy).
        e => literal_numbers(e) || is_shape(e) || numpy_constant(cx, e),
    }
}

/// A tensor's shape or one of its sizes (`x.shape[2:]`, `x.size(0)`).
fn is_shape(e: &Expr) -> bool {
    match e {
        Expr::Attribute(a) => a.attr.as_str() == "shape",
        Expr::Subscript(s) => is_shape(&s.value),
        Expr::Call(c) => matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "size"),
        _ => false,
    }
}

/// One number the host holds ([`host_numbers`]): a literal, a size, a container's length, a name
/// of a number (or bound once to one of these), or arithmetic and sums of them.
fn host_number(cx: &Checker<'_, '_>, e: &Expr, depth: usize) -> bool {
    if depth > 4 {
        return false;
    }
    match e {
        Expr::Name(_) if cx.kind_of(e) == Kind::Scalar => true,
        Expr::Name(n) => cx.model.binding_of(n).is_some_and(|b| {
            matches!(cx.model.binding(b).kind,
                BindingKind::Assignment { value, part: Part::Whole, .. } if !matches!(value, Expr::Name(_)) && host_number(cx, value, depth + 1))
        }),
        Expr::BinOp(b) => host_number(cx, &b.left, depth + 1) && host_number(cx, &b.right, depth + 1),
        Expr::Call(c) => match (cx.callee_name(c).as_deref(), &c.arguments.args[..]) {
            (Some("builtins.len"), [_]) => true,
            (Some("builtins.sum"), [Expr::Generator(g)]) => host_number(cx, &g.elt, depth + 1),
            (Some("builtins.sum"), [Expr::ListComp(l)]) => host_number(cx, &l.elt, depth + 1),
            _ => is_shape(e),
        },
        e => literal_numbers(e) || is_shape(e),
    }
}

/// The host read the call `e` is, if it is one: the innermost one of a chain (`x.cpu().numpy()`
/// is read once, at `.cpu()`).
fn call_read<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Read<'a> {
    if let Some((call, receiver, method)) = method_call(e) {
        let reads = match method {
            "item" | "tolist" | "numpy" | "cpu" => true,
            "to" => call
                .arguments
                .args
                .first()
                .or_else(|| call.arguments.find_keyword("device").map(|k| &k.value))
                .and_then(|t| super::helpers::literal_device(cx, t))
                .is_some_and(|d| d == "cpu"),
            _ => false,
        };
        if reads {
            // A chain is read once, at its first read: `x.cpu().numpy()` at `.cpu()`.
            if super::helpers::chain_methods(receiver)
                .iter()
                .any(|m| matches!(*m, "item" | "tolist" | "numpy" | "cpu"))
            {
                return Read::Passed;
            }
            let what =
                if call.arguments.is_empty() { format!(".{method}()") } else { format!(".{method}(..)") };
            // A whole tensor copied only to be reduced on the host (`pred.eq(y).cpu().sum()`) is a
            // statistic, not the data.
            let bulk = method != "item" && !reduced_after(cx, e) && !one_value(cx, receiver);
            return Read::Found(Sync::read(bulk, what, receiver, outermost_chain(cx, e), call.range()));
        }
    }
    if let Some(sync) = sized_by_data(cx, e) {
        return Read::Found(sync);
    }
    if let Expr::Call(call) = e
        && let Some(q) = cx.callee_name(call)
        && matches!(q.as_ref(), "builtins.float" | "builtins.int" | "builtins.bool")
        && call.arguments.args.len() == 1
    {
        let name = q.trim_start_matches("builtins.");
        let tensor = &call.arguments.args[0];
        if !cx.kind_of(tensor).may_be_tensor() {
            return Read::Passed;
        }
        // `assert bool(mask.all())`: the assert's own read of its test ([`test_read`]).
        if name == "bool"
            && matches!(cx.parent(), Some(Node::Stmt(Stmt::Assert(a))) if std::ptr::eq(&*a.test, e))
        {
            return Read::Undecided;
        }
        return Read::Found(Sync::read(false, format!("{name}(..)"), tensor, e, call.range()));
    }
    if let Expr::Call(call) = e
        && let Some(q) = cx.callee_name(call)
    {
        match q.as_ref() {
            // `math.isnan(loss)`, `math.exp(loss)`: Python converts the tensor with `float(..)`
            // first. (Only a value known for a tensor: these take numbers far more often; not an
            // entry of a dict, `math.sqrt(state["step"])`, which is most often a count.)
            "math.isnan" | "math.isinf" | "math.isfinite" | "math.exp" | "math.log" | "math.log2" | "math.log10"
            | "math.sqrt" | "math.floor" | "math.ceil"
                if call.arguments.args.len() == 1 && call.arguments.keywords.is_empty() =>
            {
                let tensor = &call.arguments.args[0];
                let entry = matches!(tensor, Expr::Subscript(x) if matches!(*x.slice, Expr::StringLiteral(_)));
                // A name bound to what a function of the project returns on the host (`beta =
                // kl_weight(step)`, `norm = global_grad_norm(model)` that sums `.item()`s).
                let host_result = single_assignment(cx, tensor).is_some_and(
                    |v| matches!(v, Expr::Call(c) if super::helpers::project_function(cx, c) == Some(true)),
                );
                // A forward pass's argument is where the model is only if it is a tensor: a
                // `temperature` given as a Python number is not (an annotation says which).
                let forward_input = matches!(tensor, Expr::Name(n) if cx.model.binding_of(n).is_some_and(|b| {
                    matches!(cx.model.binding(b).kind, BindingKind::Parameter { function: Some(f), .. }
                        if cx.model.function(f).name() == "forward")
                }));
                let known = cx.kind_of(tensor) == Kind::Tensor
                    || (!forward_input && provenance_in_project(cx, tensor).on_accelerator);
                // An entry of a model's output (`math.isnan(out["loss"])`) or a reduction known
                // for a tensor (`math.isnan(loss.mean())`) is one too.
                let model_output = matches!(tensor, Expr::Subscript(x) if single_assignment(cx, &x.value)
                    .is_some_and(|v| matches!(v, Expr::Call(c) if cx.kind_of(&c.func) == Kind::Module
                        || (crate::python::checker::calls_a_value(cx.model, &cx.types, c)
                            && matches!(&*c.func, Expr::Name(f) if crate::python::project::names_a_model(f.id.as_str()))))));
                let shaped = (plain_value(tensor) && (!entry || model_output))
                    || cx.kind_of(tensor) == Kind::Tensor
                    || reduced_tensor(cx, tensor);
                if shaped && !host_result && known {
                    return Read::Found(Sync::read(false, format!("{q}(..)"), tensor, e, call.range()));
                }
            }
            // Python walks the tensor and compares or tests each element on the host.
            "builtins.all" | "builtins.any" | "builtins.max" | "builtins.min" | "builtins.sorted"
                if call.arguments.args.len() == 1 && call.arguments.keywords.is_empty() =>
            {
                let tensor = &call.arguments.args[0];
                if plain_value(tensor)
                    && cx.kind_of(tensor).may_be_tensor()
                {
                    let what = format!("{}(..)", q.trim_start_matches("builtins."));
                    return Read::Found(Sync { per_element: true, ..Sync::read(false, what, tensor, e, call.range()) });
                }
            }
            // `max(scores.sum(), 1)`: Python compares the tensor with the number on the host.
            "builtins.max" | "builtins.min"
                if call.arguments.args.len() == 2 && call.arguments.keywords.is_empty() =>
            {
                let tensor = match (&call.arguments.args[0], &call.arguments.args[1]) {
                    (Expr::NumberLiteral(_), t) | (t, Expr::NumberLiteral(_)) => Some(t),
                    _ => None,
                };
                if let Some(tensor) = tensor
                    && ((plain_value(tensor) && cx.kind_of(tensor) == Kind::Tensor) || reduced_tensor(cx, tensor))
                {
                    let what = format!("{}({}, ..)", q.trim_start_matches("builtins."), cx.short(tensor.range()));
                    return Read::Found(Sync {
                        always: Some(AlwaysWaits::Compared),
                        ..Sync::read(false, what, tensor, e, call.range())
                    });
                }
            }
            // `torch.allclose(x_next, x)`, `torch.equal(a, b)`: compared on the device, the answer
            // is a Python bool read on the host.
            "torch.allclose" | "torch.equal" if call.arguments.args.len() == 2 => {
                let tensor = &call.arguments.args[0];
                if plain_value(tensor) && cx.kind_of(tensor).may_be_tensor() {
                    let what = format!("{}(..)", cx.short(call.func.range()));
                    return Read::Found(Sync {
                        always: Some(AlwaysWaits::Answered),
                        ..Sync::read(false, what, tensor, e, call.range())
                    });
                }
            }
            // `torch.full((b, 1, 1, 1), alphas[index], device=d)`: the fill value is a number;
            // an element of a tensor is read on the host to give it (DDIM samplers' schedules).
            "torch.full" => {
                let fill = call.arguments.args.get(1).or_else(|| call.arguments.find_keyword("fill_value").map(|k| &k.value));
                if let Some(fill) = fill
                    && match fill {
                        Expr::Subscript(sub) => cx.kind_of(&sub.value) == Kind::Tensor,
                        Expr::Name(_) | Expr::Attribute(_) => cx.kind_of(fill) == Kind::Tensor,
                        _ => false,
                    }
                {
                    let what = format!("torch.full(.., {}, ..)", cx.short(fill.range()));
                    return Read::Found(Sync { always: Some(AlwaysWaits::Fill), ..Sync::read(false, what, fill, e, fill.range()) });
                }
            }
            // `torch.tensor([t] * b, device=d)`: a list holding a tensor is read element by
            // element on the host, then built there and copied back (diffusion pipelines' timestep
            // at every denoising step).
            "torch.tensor" | "torch.as_tensor" | "torch.LongTensor" | "torch.FloatTensor" => {
                let list = match call.arguments.args.first() {
                    Some(Expr::BinOp(b)) if b.op == ast::Operator::Mult => match (&*b.left, &*b.right) {
                        (l @ Expr::List(_), _) | (_, l @ Expr::List(_)) => Some(l),
                        _ => None,
                    },
                    Some(l @ Expr::List(_)) => Some(l),
                    _ => None,
                };
                // The variable of a loop over a tensor on the device (`for t in timesteps`); a
                // number given as it is (`[num_boxes]`, a count) is an upload, below.
                // (Only a loop's variable: a name bound elsewhere is as often a number the
                // function was given, `elif np.isscalar(obs): torch.FloatTensor([obs])`.)
                let listed = |x: &&Expr| {
                    super::helpers::name_binding(cx, x)
                        .is_some_and(|b| matches!(cx.model.binding(b).kind, BindingKind::LoopVar { .. }))
                        && cx.kind_of(x).may_be_tensor()
                        && provenance_in_project(cx, x).on_accelerator
                };
                if let Some(Expr::List(l)) = list
                    && let Some(tensor) = l.elts.iter().find(listed)
                {
                    let what = format!("{}([{}, ..])", q, cx.short(tensor.range()));
                    return Read::Found(Sync { always: Some(AlwaysWaits::Listed), ..Sync::read(false, what, tensor, e, call.range()) });
                }
            }
            // `print(loss)` prints the tensor's values.
            "builtins.print" => {
                for a in &call.arguments.args {
                    if let Some(sync) = implicit(cx, a, e, format!("print({})", cx.short(a.range()))) {
                        return Read::Found(sync);
                    }
                }
            }
            _ => {}
        }
    }
    // TensorBoard's `add_scalar(tag, value, step)` reads `value` with `.item()`.
    if let Some((call, _, "add_scalar")) = method_call(e)
        && let Some(value) =
            call.arguments.args.get(1).or_else(|| call.arguments.find_keyword("scalar_value").map(|k| &k.value))
        && let Some(sync) = implicit(cx, value, e, format!("add_scalar(.., {}, ..)", cx.short(value.range())))
    {
        return Read::Found(sync);
    }
    // `"{:.3f}".format(loss)`.
    if let Some((call, receiver, "format")) = method_call(e)
        && matches!(receiver, Expr::StringLiteral(_))
    {
        for a in call.arguments.args.iter().chain(call.arguments.keywords.iter().map(|k| &k.value)) {
            if let Some(sync) = implicit(cx, a, e, format!("\"..\".format({})", cx.short(a.range()))) {
                return Read::Found(sync);
            }
        }
    }
    Read::Undecided
}

/// `torch.distributions`' distributions whose arguments have constraints to check.
/// (`Independent`, `MixtureSameFamily` and `TransformedDistribution` check none of their own.)
const VALIDATED_DISTRIBUTIONS: &[&str] = &[
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ContinuousBernoulli",
    "Dirichlet",
    "Exponential",
    "FisherSnedecor",
    "Gamma",
    "GeneralizedPareto",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "InverseGamma",
    "Kumaraswamy",
    "LKJCholesky",
    "Laplace",
    "LogNormal",
    "LogisticNormal",
    "LowRankMultivariateNormal",
    "Multinomial",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "Poisson",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "StudentT",
    "Uniform",
    "VonMises",
    "Weibull",
    "Wishart",
];

/// `Normal(mu, std)`, `torch.distributions.Categorical(logits=logits)` given a tensor: unless told
/// `validate_args=False` (or the project turns validation off,
/// `Distribution.set_default_validate_args(False)`), PyTorch checks each argument against its
/// constraint as it builds the distribution and tests the answer on the host
/// (`if not valid.all(): raise ValueError(..)`).
fn validated_distribution<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let Expr::Call(call) = e else { return None };
    // `torch.distributions.Normal`, or the class from its own module (`..normal.Normal`).
    let validated = |name: &str| -> Option<String> {
        let rest = name.strip_prefix("torch.distributions.")?;
        let class = match rest.split_once('.') {
            None => rest,
            Some((module, class))
                if !class.contains('.') && module.chars().all(|c| c.is_ascii_lowercase() || c == '_') =>
            {
                class
            }
            Some(_) => return None,
        };
        VALIDATED_DISTRIBUTIONS.contains(&class).then(|| class.to_string())
    };
    let class = match cx.callee_name(call) {
        Some(name) if name.starts_with("torch.") => validated(&name)?,
        // A class of this file deriving from one (`class FixedCategorical(Categorical)`, whose
        // `__init__` is the base's): named as written.
        _ => match cx.model.callee(call, cx.function) {
            Some(crate::python::model::Callee::Class(c)) => {
                let def = cx.model.class(c).def;
                def.bases().iter().find_map(|b| cx.model.canonical_name(b).and_then(|q| validated(&q)))?;
                def.name.as_str().to_string()
            }
            _ => return None,
        },
    };
    // `validate_args=True` checks whatever the default; `None` (or nothing) takes the default;
    // anything else may turn the checks off. (Given by position, it comes after the parameters:
    // `Normal(mu, std, False)`.)
    let given = super::helpers::keyword(call, "validate_args")
        .or_else(|| call.arguments.args.last().filter(|a| matches!(a, Expr::BooleanLiteral(_))));
    let checks = match given {
        Some(v) if super::helpers::is_true(v) => true,
        Some(Expr::NoneLiteral(_)) | None => !cx.types.project().validation_off() && !super::helpers::has_splat(call),
        Some(_) => false,
    };
    if !checks {
        return None;
    }
    let tensor = call
        .arguments
        .args
        .iter()
        .chain(call.arguments.keywords.iter().map(|k| &k.value))
        .find(|a| cx.kind_of(a).may_be_tensor() && provenance_in_project(cx, a).on_accelerator)?;
    let what = format!("{class}(..)");
    Some(Sync { always: Some(AlwaysWaits::Validated), ..Sync::read(false, what, tensor, e, call.range()) })
}

/// An op whose result's size depends on the data (`x.nonzero()`, `torch.nonzero(x)`,
/// `torch.argwhere(x)`, `torch.where(mask)` with one argument, `x.masked_select(m)`): the host
/// waits for the device to know how much to allocate. (`unique` and `bincount` wait too, but their
/// result is most often what the host needs next — classes to loop over, counts to size a batch —
/// and on the sample trees 15 of 46 such places were true: not reported.)
fn sized_by_data<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> Option<Sync<'a>> {
    let Expr::Call(call) = e else { return None };
    if let Some(sync) = repeated_by_data(cx, e, call) {
        return Some(sync);
    }
    let args = if call.arguments.is_empty() { "" } else { ".." };
    // `torch.where(m)`, `th.nonzero(x)`, `where(m)` imported from torch: shown as `torch.<op>`.
    let (tensor, what) = match cx.callee_name(call).as_deref().and_then(|q| q.strip_prefix("torch.")) {
        Some(op @ ("nonzero" | "argwhere" | "masked_select")) => (call.arguments.args.first()?, format!("torch.{op}(..)")),
        Some("where") if call.arguments.args.len() == 1 && call.arguments.keywords.is_empty() => {
            (&call.arguments.args[0], "torch.where(..)".to_string())
        }
        Some(_) => return None,
        // `x.nonzero()`: a method of a tensor.
        None => match method_call(e) {
            Some((_, receiver, method @ ("nonzero" | "argwhere" | "masked_select")))
                if cx.kind_of(receiver).may_be_tensor() =>
            {
                (receiver, format!(".{method}({args})"))
            }
            _ => return None,
        },
    };
    Some(Sync { always: Some(AlwaysWaits::SizedByData), ..Sync::read(false, what, tensor, e, call.range()) })
}

/// `torch.repeat_interleave(x, counts)`, `x.repeat_interleave(counts, dim=0)` or
/// `torch.repeat_interleave(counts)` with a tensor of counts and no `output_size=`: PyTorch reads
/// the counts on the host to size the result. Counts are a tensor when the types say so or when
/// they are the differences of a pointer tensor's neighbours (`ptr[1:] - ptr[:-1]`), never a
/// number.
fn repeated_by_data<'a>(cx: &Checker<'_, 'a>, e: &'a Expr, call: &'a ast::ExprCall) -> Option<Sync<'a>> {
    if call.arguments.find_keyword("output_size").is_some() || super::helpers::has_splat(call) {
        return None;
    }
    let args = &call.arguments.args;
    let repeats = call.arguments.find_keyword("repeats").map(|k| &k.value);
    let (counts, what) = match cx.callee_name(call).as_deref() {
        // `torch.repeat_interleave(x, counts)`, `(x, repeats=counts)`, or `(counts)` alone.
        Some("torch.repeat_interleave") => match (&args[..], repeats) {
            (_, Some(counts)) | ([_, counts, ..], None) => (counts, "torch.repeat_interleave(..)"),
            ([counts], None) if call.arguments.keywords.is_empty() => (counts, "torch.repeat_interleave(..)"),
            _ => return None,
        },
        Some(_) => return None,
        None => match method_call(e) {
            Some((_, receiver, "repeat_interleave")) if cx.kind_of(receiver).may_be_tensor() => {
                (repeats.or_else(|| args.first())?, ".repeat_interleave(..)")
            }
            _ => return None,
        },
    };
    if !counts_tensor(cx, counts, 0) {
        return None;
    }
    Some(Sync { always: Some(AlwaysWaits::Repeats), ..Sync::read(false, what.to_string(), counts, e, call.range()) })
}

/// Are the counts given to `repeat_interleave` a tensor: so typed, the differences of a pointer
/// tensor's neighbours (`ptr[1:] - ptr[:-1]`), either converted (`counts.long()`) or a name bound
/// once to one of those?
fn counts_tensor(cx: &Checker<'_, '_>, e: &Expr, depth: usize) -> bool {
    if depth > 4 {
        return false;
    }
    // Counts made here from the host's data (`torch.tensor(lengths)`, `device="cpu"`) are on the
    // host: PyTorch reads them there without waiting. Made on a device, they are read back.
    if let Expr::Call(c) = e
        && cx.callee_name(c).is_some_and(|q| api::is_creation(&q))
    {
        return c.arguments.find_keyword("device").is_some_and(|d| !super::helpers::is_cpu_device(cx, &d.value));
    }
    if cx.kind_of(e) == Kind::Tensor {
        return true;
    }
    match e {
        Expr::BinOp(b) if b.op == ast::Operator::Sub => matches!((&*b.left, &*b.right), (Expr::Subscript(l), Expr::Subscript(r))
            if matches!(&*l.slice, Expr::Slice(_)) && matches!(&*r.slice, Expr::Slice(_))
                && cx.short(l.value.range()) == cx.short(r.value.range())),
        Expr::Call(_) => matches!(method_call(e), Some((c, receiver, method))
            if c.arguments.is_empty() && matches!(method, "long" | "int" | "flatten" | "squeeze")
                && counts_tensor(cx, receiver, depth + 1)),
        Expr::Name(n) => cx.model.binding_of(n).is_some_and(|b| {
            matches!(cx.model.binding(b).kind, BindingKind::Assignment { value, part: Part::Whole, .. }
                if counts_tensor(cx, value, depth + 1))
        }),
        _ => false,
    }
}

/// Is the read at `at` part of the test of a check for a value gone bad (`if torch.isnan(loss):`,
/// `if not math.isfinite(loss.item()):`, an `elif` or `while` of the kind)?
fn in_bad_value_check(cx: &Checker<'_, '_>, at: TextRange) -> bool {
    let Some(stmt) = cx.parents.iter().rev().find_map(|p| match p {
        Node::Stmt(s) => Some(*s),
        Node::Expr(_) => None,
    }) else {
        return false;
    };
    let tests: Vec<&Expr> = match stmt {
        Stmt::If(i) => std::iter::once(&*i.test).chain(i.elif_else_clauses.iter().filter_map(|c| c.test.as_ref())).collect(),
        Stmt::While(w) => vec![&*w.test],
        _ => return false,
    };
    tests.into_iter().any(|t| t.range().contains_range(at) && crate::python::checker::checks_for_bad_values(t))
}

/// `loss_value = loss.item()`, the name then checked for NaN or Inf by an `if` of the function
/// (`if not math.isfinite(loss_value):`): the check is what the read is for.
fn read_for_a_bad_value_check(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    let Some(Node::Stmt(Stmt::Assign(a))) = cx.parents.iter().rev().find(|p| matches!(p, Node::Stmt(_))) else {
        return false;
    };
    let [Expr::Name(n)] = &a.targets[..] else { return false };
    if !std::ptr::eq(&*a.value, value) {
        return false;
    }
    let Some(name) = cx.model.definition_of(n) else { return false };
    let body: &[Stmt] = match cx.function {
        Some(f) => &cx.model.function(f).def.body,
        None => cx.module_body,
    };
    let (mut found, mut budget) = (false, 256usize);
    each_stmt_after(body, a.end(), &mut |s| {
        budget = budget.saturating_sub(1);
        found = matches!(s, Stmt::If(i) if mentions(cx, &i.test, &[name]) && only_bad_value_checks(cx, &i.test, &[name]));
        !found && budget > 0
    });
    found
}

/// Does `test` look at `names` only to check for NaN or Inf (`not math.isfinite(v)`, `.. or
/// math.isnan(v)`) or for a value that has exploded (`v > 1e8`, each item of `any([..])`)? Not a
/// test that also compares them with an ordinary bound (`not math.isfinite(v) or v < 1e-3`).
fn only_bad_value_checks(cx: &Checker<'_, '_>, test: &Expr, names: &[BindingId]) -> bool {
    match test {
        Expr::BoolOp(b) => b.values.iter().all(|v| !mentions(cx, v, names) || only_bad_value_checks(cx, v, names)),
        // `any([loss_g > 1e8, math.isnan(loss_g)])`: each item a check.
        Expr::Call(c)
            if c.arguments.keywords.is_empty()
                && cx.callee_name(c).is_some_and(|q| matches!(q.as_ref(), "builtins.any" | "builtins.all")) =>
        {
            matches!(&c.arguments.args[..], [Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. })]
                if elts.iter().all(|v| !mentions(cx, v, names) || only_bad_value_checks(cx, v, names)))
        }
        // `loss_g > 1e8`: a value that has exploded, beside a check for NaN (a million or more;
        // `if logs["l1"] > 1e4:` may be a decision of the run's).
        Expr::Compare(c) if c.comparators.len() == 1 => {
            let huge = |e: &Expr| {
                matches!(e, Expr::NumberLiteral(n) if match &n.value {
                    ast::Number::Float(f) => f.abs() >= 1e6,
                    ast::Number::Int(i) => i.as_u64().is_none_or(|v| v >= 1_000_000),
                    _ => false,
                })
            };
            (huge(&c.comparators[0]) || huge(&c.left))
                && matches!(c.ops[0], ast::CmpOp::Gt | ast::CmpOp::GtE | ast::CmpOp::Lt | ast::CmpOp::LtE)
        }
        _ => crate::python::checker::checks_for_bad_values(test),
    }
}

/// `if t:`, `while t:` and `assert t` read the tensor's truth on the host (`test` is the test
/// of the statement the walk is in; an `elif`'s test is left alone).
fn test_read<'a>(cx: &Checker<'_, 'a>, test: &'a Expr) -> Option<Sync<'a>> {
    // `assert t.all()` and `assert not torch.isnan(t).any()` read it too.
    // `if torch.isnan(x).any() or ..:`: the first operand is always read.
    let first = |t: &'a Expr| match t {
        Expr::BoolOp(b) => b.values.first().unwrap_or(t),
        t => t,
    };
    if let Some(Node::Stmt(Stmt::Assert(a))) = cx.parent()
        && std::ptr::eq(&*a.test, test)
    {
        let test = first(test);
        let checked = match test {
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => &*u.operand,
            _ => test,
        };
        // `assert bool((grid[:, 0] == 1).all())`: as the value it converts.
        let checked = match checked {
            Expr::Call(c)
                if c.arguments.args.len() == 1
                    && cx.callee_name(c).is_some_and(|q| q == "builtins.bool") =>
            {
                &c.arguments.args[0]
            }
            checked => checked,
        };
        // `assert (shapes[:, 0] * shapes[:, 1]).sum() == n`: a reduced tensor compared is a tensor.
        let compared = matches!(checked, Expr::Compare(c)
            if c.ops.iter().all(|op| !matches!(op, ast::CmpOp::In | ast::CmpOp::NotIn | ast::CmpOp::Is | ast::CmpOp::IsNot))
                && ((plain_value(&c.left) && cx.kind_of(&c.left) == Kind::Tensor) || reduced_tensor(cx, &c.left)));
        if compared
            || (matches!(checked, Expr::Name(_) | Expr::Call(_) | Expr::Attribute(_))
                && (cx.kind_of(checked) == Kind::Tensor || truth_of_tensor(cx, checked)))
        {
            let what = format!("assert {}", cx.short(test.range()));
            return Some(Sync { always: Some(AlwaysWaits::Assert), ..Sync::read(false, what, checked, test, test.range()) });
        }
        return None;
    }
    let tested = match cx.parent() {
        Some(Node::Stmt(Stmt::If(ast::StmtIf { test: t, .. }) | Stmt::While(ast::StmtWhile { test: t, .. }))) => {
            std::ptr::eq(&**t, test)
        }
        // `x = mask if pads.any() else None`.
        Some(Node::Expr(Expr::If(i))) => std::ptr::eq(&*i.test, test),
        _ => false,
    };
    if tested {
        // `if self.cross_self_attention or tokens.eq(pad).any():`: a later operand of `or` is
        // read whenever the settings before it are off, as flags most often are (after `and`,
        // only when they are on); not after `self.training`, which tells training from
        // evaluation.
        // After `and`, an operand is read whenever the ones before it only ask whether the value
        // it reads is there (`p.grad is not None and p.grad.norm() > 0`); not after a check of
        // something else, which may be a setting (`self.hook is not None and x.isnan().any()`).
        let or = matches!(test, Expr::BoolOp(b) if b.op == ast::BoolOp::Or);
        let operands: Vec<&'a Expr> = match test {
            Expr::BoolOp(b) if or => b.values.iter().collect(),
            Expr::BoolOp(b) => {
                let mut taken: Vec<&'a Expr> = b.values.iter().take(1).collect();
                for pair in b.values.windows(2) {
                    match presence_of(cx, &pair[0]) {
                        Some(subject) if reads_subject(cx, &pair[1], subject) => taken.push(&pair[1]),
                        _ => break,
                    }
                }
                taken
            }
            t => vec![t],
        };
        for (i, &operand) in operands.iter().enumerate() {
            // (`if mask is None or not mask.any():`: the check of the value's absence is false
            // whenever it is there.)
            if or
                && i > 0
                && !operands[..i].iter().all(|o| {
                    is_flag(cx, o) || absence_of(o).is_some_and(|subject| reads_subject(cx, operand, subject))
                })
            {
                break;
            }
            if let Some((tensor, read)) = tensor_test(cx, operand) {
                let shown = cx.short(if i == 0 { operand } else { test }.range());
                let what = match cx.parent() {
                    Some(Node::Stmt(Stmt::While(_))) => format!("while {shown}:"),
                    Some(Node::Expr(_)) => format!(".. if {shown} else .."),
                    _ => format!("if {shown}:"),
                };
                return Some(Sync::read(false, what, tensor, read, read.range()));
            }
        }
    }
    None
}

/// The truth an `if` or `while` test's operand (`mask.any()`, `not done.all()`, `loss == 0`)
/// reads of a tensor: the tensor and the expression read.
fn tensor_test<'a>(cx: &Checker<'_, 'a>, operand: &'a Expr) -> Option<(&'a Expr, &'a Expr)> {
    // `if not mask.any():` reads it as well.
    let test = match operand {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => &*u.operand,
        t => t,
    };
    if !matches!(test, Expr::Name(_) | Expr::Call(_) | Expr::Attribute(_) | Expr::Compare(_)) {
        return None;
    }
    // `if loss == 0:`: a tensor compared with a number is a tensor too. Only a value known to
    // be a tensor: a value of unknown kind compared with a number is most often a number
    // (`if drop_prob > 0:`).
    let tensor = match test {
        Expr::Compare(c)
            if c.comparators.iter().all(|r| matches!(r, Expr::NumberLiteral(_)))
                && ((plain_value(&c.left) && cx.kind_of(&c.left) == Kind::Tensor) || reduced_tensor(cx, &c.left)) =>
        {
            &*c.left
        }
        // `torch.any(mask)`: where `mask` is decides.
        Expr::Call(c)
            if truth_of_tensor(cx, test)
                && cx.callee_name(c).is_some_and(|q| matches!(q.as_ref(), "torch.any" | "torch.all")) =>
        {
            &c.arguments.args[0]
        }
        _ if cx.kind_of(test) == Kind::Tensor || truth_of_tensor(cx, test) || reduced_tensor(cx, test) => test,
        _ => return None,
    };
    Some((tensor, test))
}

/// If a test's operand only asks whether a value is there (`x is not None`, `isinstance(x, T)`,
/// `torch.is_tensor(x)`, `hasattr(x, "w")`), the value it asks about.
fn presence_of<'e>(cx: &Checker<'_, '_>, e: &'e Expr) -> Option<&'e Expr> {
    match e {
        Expr::Compare(c)
            if matches!(&c.ops[..], [ast::CmpOp::IsNot]) && matches!(&c.comparators[..], [Expr::NoneLiteral(_)]) =>
        {
            Some(&c.left)
        }
        Expr::Call(c)
            if cx.callee_name(c).is_some_and(|q| {
                matches!(q.as_ref(), "builtins.isinstance" | "builtins.hasattr" | "torch.is_tensor")
            }) =>
        {
            c.arguments.args.first()
        }
        _ => None,
    }
}

/// If a test's operand asks whether a value is absent (`x is None`), the value it asks about.
fn absence_of(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Compare(c)
            if matches!(&c.ops[..], [ast::CmpOp::Is]) && matches!(&c.comparators[..], [Expr::NoneLiteral(_)]) =>
        {
            Some(&c.left)
        }
        _ => None,
    }
}

/// Does `e` read `subject` (the same name or attribute, as written)?
fn reads_subject(cx: &Checker<'_, '_>, e: &Expr, subject: &Expr) -> bool {
    let text = cx.text(subject.range());
    any_subexpr_is(e, |sub| matches!(sub, Expr::Name(_) | Expr::Attribute(_)) && cx.text(sub.range()) == text)
}

/// A flag in a test (`self.cross_self_attention`, `not args.fast`): a name or attribute, or its
/// negation, that is not a tensor and does not name the training mode. (Not the checker's
/// `is_setting`, which asks whether a loss's factor is a number.)
fn is_flag(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let e = match e {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => &*u.operand,
        e => e,
    };
    let name = match e {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.as_str(),
        _ => return false,
    };
    cx.kind_of(e) != Kind::Tensor
        && !super::helpers::name_words(name).any(|w| w.eq_ignore_ascii_case("training") || w.eq_ignore_ascii_case("train"))
}

/// `(x >= 0).all()`, `mask.any()`, `torch.any(mask)`: the truth of a value that may be a tensor
/// (a forward pass's input, whose kind is not known), reduced by a tensor's own method; where it
/// is decides.
fn truth_of_tensor(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    reduced_by(cx, e, &["all", "any"], &["torch.any", "torch.all"])
}

/// `mask.sum()`, `counts.max()`: a value that may be a tensor reduced to one number by a
/// tensor's own reduction, or a name bound to one (`n = matches.sum()`, then `if n:`). Its truth,
/// or its comparison with a number, is read on the host. (Where the tensor is decides: the read
/// is reported only on the accelerator.)
fn reduced_tensor(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    reduced_by(
        cx,
        e,
        &["sum", "max", "min", "mean", "prod", "norm"],
        &["torch.sum", "torch.max", "torch.min", "torch.mean", "torch.prod", "torch.norm", "torch.linalg.norm"],
    )
}

/// Is `e` one value, not a tensor's data: a tensor reduced whole (`(pred == y).sum()`), or a loss
/// `.backward()` is called on, through methods that keep it one value (`loss.detach()`,
/// `acc.float()`, `loss.data`)? Copied to the host, it is a statistic, as `.item()` would read.
fn one_value(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    one_value_at(cx, e, 0)
}

/// [`one_value`], `depth` names or operators in: also arithmetic of one value with a number of the
/// host's or another value (`correct.float() / n`, `acc = ..` then `acc.cpu()`).
fn one_value_at(cx: &Checker<'_, '_>, e: &Expr, depth: usize) -> bool {
    if depth > 4 {
        return false;
    }
    let mut at = e;
    for _ in 0..6 {
        match at {
            Expr::Attribute(a) if a.attr.as_str() == "data" => at = &a.value,
            Expr::Call(c)
                if let Some((_, receiver, method)) = method_call(at)
                    && c.arguments.is_empty()
                    && matches!(method, "detach" | "float" | "double" | "half" | "clone" | "squeeze") =>
            {
                at = receiver
            }
            _ => break,
        }
    }
    match at {
        Expr::Name(n) => {
            let Some(b) = cx.model.binding_of(n) else { return false };
            if cx.facts.backward.contains(&b) {
                return true;
            }
            if let BindingKind::Assignment { value, part: Part::Whole, .. } = cx.model.binding(b).kind
                && !matches!(value, Expr::Name(_))
            {
                return one_value_at(cx, value, depth + 1);
            }
            false
        }
        Expr::BinOp(b) => {
            let one = |x: &Expr| one_value_at(cx, x, depth + 1);
            let number = |x: &Expr| host_number(cx, x, depth + 1);
            (one(&b.left) && (one(&b.right) || number(&b.right))) || (number(&b.left) && one(&b.right))
        }
        _ => reduced_tensor(cx, at),
    }
}

/// Is `e` a value that may be a tensor reduced by one of `methods` with no arguments
/// (`mask.all()`), or by one of `functions` given it alone (`torch.any(mask)`), or a name bound
/// to one (`ok = mask.all()`, then `if ok:`)?
fn reduced_by(cx: &Checker<'_, '_>, e: &Expr, methods: &[&str], functions: &[&str]) -> bool {
    if let Expr::Name(n) = e
        && let Some(b) = cx.model.binding_of(n)
        && let BindingKind::Assignment { value, part: Part::Whole, .. } = cx.model.binding(b).kind
    {
        return !matches!(value, Expr::Name(_)) && reduced_by(cx, value, methods, functions);
    }
    if let Expr::Call(c) = e
        && let [receiver] = &c.arguments.args[..]
        && c.arguments.keywords.is_empty()
        && cx.callee_name(c).is_some_and(|q| functions.contains(&q.as_ref()))
    {
        return cx.kind_of(receiver).may_be_tensor();
    }
    matches!(method_call(e), Some((c, receiver, method))
        if methods.contains(&method)
            && c.arguments.is_empty()
            && cx.kind_of(receiver).may_be_tensor()
            && !matches!(receiver, Expr::List(_) | Expr::Tuple(_)))
}

/// Is the value of the read `e` reduced to a number as soon as it is on the host: a reduction
/// later in its chain (`x.cpu().sum()`, `x.cpu().numpy().mean()`), or a NumPy or builtin
/// reduction around it (`np.sum(x.cpu().numpy())`)?
fn reduced_after(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    const REDUCTIONS: [&str; 8] = ["sum", "mean", "item", "max", "min", "all", "any", "count_nonzero"];
    let mut value = e;
    for parent in cx.parents.iter().rev() {
        match parent {
            Node::Expr(p @ Expr::Attribute(a)) if std::ptr::eq(&*a.value, value) => {
                if REDUCTIONS.contains(&a.attr.as_str()) {
                    return true;
                }
                value = p;
            }
            Node::Expr(p @ Expr::Subscript(s)) if std::ptr::eq(&*s.value, value) => value = p,
            Node::Expr(p @ Expr::Call(c)) if std::ptr::eq(&*c.func, value) => value = p,
            Node::Expr(Expr::Call(c)) => {
                return c.arguments.args.first().is_some_and(|a| std::ptr::eq(a, value))
                    && cx.callee_name(c).is_some_and(|q| {
                        matches!(q.as_ref(), "numpy.sum" | "numpy.mean" | "numpy.count_nonzero" | "builtins.sum")
                    });
            }
            _ => return false,
        }
    }
    false
}

/// The outermost expression of the chain `e` is part of: `x.cpu()` in `x.cpu().numpy()[0]`.
fn outermost_chain<'a>(cx: &Checker<'_, 'a>, e: &'a Expr) -> &'a Expr {
    let mut value = e;
    for parent in cx.parents.iter().rev() {
        match parent {
            Node::Expr(p @ Expr::Attribute(_)) => value = p,
            // `x.item()[0]` goes on; `table[x.item()]` uses the value as an index.
            Node::Expr(p @ Expr::Subscript(s)) if std::ptr::eq(&*s.value, value) => value = p,
            Node::Expr(p @ Expr::Call(c)) if std::ptr::eq(&*c.func, value) => value = p,
            _ => break,
        }
    }
    value
}

/// How a value read on the host is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// Printed, logged, accumulated, collected, or sent back to the device: the read could be
    /// batched or kept on the device.
    Deferrable,
    /// The host needs it to go on: a condition that leaves the loop or the function, an action
    /// for an environment, an index into a Python container.
    Needed,
}

/// Does the caller need the value a call returns on the host at once (`call` is the call being
/// checked, not yet among the parents)? What another file is told about a call at every step to
/// one of its functions.
pub(crate) fn result_needed_on_host(cx: &Checker<'_, '_>, call: &Expr) -> bool {
    // `loss, logs = loss_fn(preds, targets)`: the host needs what it reads only through the names
    // that are not a loss on the device (`loss` backpropagated, or returned by a training step).
    if let Some(Node::Stmt(Stmt::Assign(a))) = cx.parents.last()
        && std::ptr::eq(&*a.value, call)
        && let [Expr::Tuple(t)] = a.targets.as_slice()
    {
        // Names only (`(a, b), c = ..` or `self.x, y = ..` are judged as a whole, below).
        let names: Option<Vec<BindingId>> = t
            .elts
            .iter()
            .map(|e| match e {
                Expr::Name(n) => cx.model.definition_of(n),
                _ => None,
            })
            .collect();
        if let Some(names) = names {
            let kept: Vec<BindingId> =
                names.into_iter().filter(|&b| !super::helpers::binding_is_device_loss(cx, b)).collect();
            return names_use(cx, &kept, a.end(), false) == Use::Needed;
        }
    }
    needed_on_host(cx, call, false)
}

/// For a function that another file calls at every step: does some such caller need what it
/// returns on the host at once (`Some(true)`), or does every one only log or accumulate it
/// (`Some(false)`)? A function that takes one training step returns its statistics to a trainer
/// that logs them (`Some(false)`). `None` for any other function.
fn elsewhere_needs_result(cx: &Checker<'_, '_>) -> Option<bool> {
    match cx.hot_of(cx.function?)? {
        Hot::CalledElsewhere(i) => cx.facts.elsewhere.get(i).map(|c| c.result_needed),
        Hot::Step(_) => Some(false),
        _ => None,
    }
}

/// For a function of this file that runs at every step because a loop of this file calls it
/// (directly, through other functions, or handed to a call: `gpu_timer(train_step)`): does one of
/// its calls in the file need what it returns on the host at once (`Some(true)`), or does each
/// drop it or keep it in names that are only logged or accumulated (`Some(false)`)? `None` for any
/// other function, or one called in many places.
fn callers_need_result(cx: &Checker<'_, '_>) -> Option<bool> {
    let f = cx.function?;
    if !matches!(cx.hot_of(f)?, Hot::CalledInLoop(_)) {
        return None;
    }
    if let Some(&known) = cx.callers_need_result.borrow().get(&f) {
        return known;
    }
    let answer = callers_need_result_of(cx, f);
    cx.callers_need_result.borrow_mut().insert(f, answer);
    answer
}

fn callers_need_result_of(cx: &Checker<'_, '_>, f: FunctionId) -> Option<bool> {
    let sites = &cx.facts.calls_to[f.index()];
    if sites.is_empty() || sites.len() > 8 {
        return None;
    }
    for &i in sites {
        let site = cx.model.calls.get(i)?;
        let body: &[Stmt] = match site.function {
            Some(g) => &cx.model.function(g).def.body,
            None => cx.module_body,
        };
        let at = site.call.range();
        // The simple statement that holds the call.
        let mut holder: Option<&Stmt> = None;
        super::helpers::each_stmt(body, &mut |s| {
            let compound = matches!(
                s,
                Stmt::For(_)
                    | Stmt::While(_)
                    | Stmt::If(_)
                    | Stmt::With(_)
                    | Stmt::Try(_)
                    | Stmt::Match(_)
                    | Stmt::FunctionDef(_)
                    | Stmt::ClassDef(_)
            );
            if !compound && s.range().contains_range(at) {
                holder = Some(s);
            }
        });
        let holder = holder?;
        // Handed straight to a call that logs or accumulates it (`meter.update(step(..))`).
        let mut outer: Option<&ast::ExprCall> = None;
        for e in statement_exprs(holder) {
            any_subexpr(e, &mut |sub| {
                if let Expr::Call(c) = sub
                    && c.arguments.args.iter().chain(c.arguments.keywords.iter().map(|k| &k.value)).any(|a| a.range() == at)
                {
                    outer = Some(c);
                }
                outer.is_none()
            });
        }
        if let Some(c) = outer {
            if classify_call(cx, c, false) == Use::Needed || !matches!(holder, Stmt::Expr(e) if e.value.range() == c.range()) {
                return Some(true);
            }
            continue;
        }
        match holder {
            Stmt::Expr(e) if e.value.range() == at => {}
            Stmt::Assign(a) if a.value.range() == at => {
                // Names only, unpacked as deep as they go (`(loss, stats), ms = gpu_timer(step)`).
                let mut names = Vec::new();
                let mut plain = true;
                for t in &a.targets {
                    any_subexpr(t, &mut |sub| {
                        match sub {
                            Expr::Name(n) => match cx.model.definition_of(n) {
                                Some(b) => names.push(b),
                                None => plain = false,
                            },
                            Expr::Tuple(_) | Expr::List(_) | Expr::Starred(_) => {}
                            _ => plain = false,
                        }
                        plain
                    });
                }
                if !plain || names_use_in(cx, body, &names, a.end(), false, true) == Use::Needed {
                    return Some(true);
                }
            }
            _ => return Some(true),
        }
    }
    Some(false)
}

/// Does the host need this value at this step (an inherent decision, or the data itself)?
fn needed_on_host(cx: &Checker<'_, '_>, value: &Expr, bulk: bool) -> bool {
    use_from_parents(cx, value, bulk) == Use::Needed
}

/// Classifies the use of `value` by walking up from it to its statement.
fn use_from_parents(cx: &Checker<'_, '_>, value: &Expr, bulk: bool) -> Use {
    let mut child: &Expr = value;
    // Put into a dict literal (`{"loss": loss.item()}`): statistics, kept or returned for a log.
    let mut in_dict = false;
    for parent in cx.parents.iter().rev() {
        in_dict |= matches!(parent, Node::Expr(Expr::Dict(_)));
        match *parent {
            Node::Stmt(Stmt::Return(_)) if in_dict && !bulk => {
                // Returned to a caller as statistics (`return {"loss": loss.item()}`), as a dict
                // filled item by item and returned is: needed only where a caller of another
                // file is seen to need it at once.
                return if elsewhere_needs_result(cx) == Some(true) { Use::Needed } else { Use::Deferrable };
            }
            Node::Expr(p) => match p {
                Expr::Call(call) if !std::ptr::eq(&*call.func, child) => {
                    return classify_call(cx, call, bulk);
                }
                // An index into a Python container needs the number; one into a tensor
                // (`embeds[torch.multinomial(w[b], 1).item()]`) can take the index tensor itself.
                Expr::Subscript(s) if std::ptr::eq(&*s.slice, child) => {
                    return if indexes_a_tensor(cx, &s.value) { Use::Deferrable } else { Use::Needed };
                }
                Expr::FString(_) => return Use::Deferrable,
                // Combined at once with a tensor (`self.gamma.item() - torch.norm(score)`): the
                // value goes straight back to the device; the host never needed it.
                Expr::BinOp(b)
                    if {
                        let other = if std::ptr::eq(&*b.left, child) { &*b.right } else { &*b.left };
                        cx.kind_of(other) == Kind::Tensor
                    } =>
                {
                    return Use::Deferrable;
                }
                Expr::BinOp(_)
                | Expr::UnaryOp(_)
                | Expr::Compare(_)
                | Expr::BoolOp(_)
                | Expr::If(_)
                | Expr::Tuple(_)
                | Expr::List(_)
                | Expr::Dict(_)
                | Expr::Attribute(_)
                | Expr::Subscript(_)
                | Expr::Call(_)
                | Expr::Named(_) => child = p,
                // The element of a comprehension: as the comprehension is used.
                Expr::ListComp(ast::ExprListComp { elt, .. })
                | Expr::SetComp(ast::ExprSetComp { elt, .. })
                | Expr::Generator(ast::ExprGenerator { elt, .. })
                    if std::ptr::eq(&**elt, child) =>
                {
                    child = p
                }
                Expr::DictComp(d) if std::ptr::eq(&*d.value, child) => child = p,
                _ => return Use::Needed,
            },
            Node::Stmt(s) => return classify_statement(cx, s, child, bulk),
        }
    }
    Use::Deferrable
}

fn classify_statement(cx: &Checker<'_, '_>, s: &Stmt, child: &Expr, bulk: bool) -> Use {
    let targets: Vec<&Expr> = match s {
        // Either branch leaving the loop or the function makes it a decision (`if done.item():
        // ... else: break`).
        Stmt::If(i) if std::ptr::eq(&*i.test, child) => {
            let branches = std::iter::once(&i.body[..]).chain(i.elif_else_clauses.iter().map(|c| &c.body[..]));
            let mut result = Use::Deferrable;
            for b in branches {
                if decision(cx, b) == Use::Needed {
                    result = Use::Needed;
                }
            }
            return result;
        }
        // An `elif`'s test: its own branch, or one after it, leaving decides as an `if`'s does.
        Stmt::If(i)
            if let Some(at) =
                i.elif_else_clauses.iter().position(|c| c.test.as_ref().is_some_and(|t| std::ptr::eq(t, child))) =>
        {
            let leaves = i.elif_else_clauses[at..].iter().any(|c| decision(cx, &c.body) == Use::Needed);
            return if leaves { Use::Needed } else { Use::Deferrable };
        }
        Stmt::While(w) if std::ptr::eq(&*w.test, child) => return Use::Needed,
        // Returned to a caller of another file, or (a value, not a whole tensor's data) to the
        // calls of this file that make it run at every step, that only log or accumulate it.
        Stmt::Return(_)
            if elsewhere_needs_result(cx) == Some(false) || (!bulk && callers_need_result(cx) == Some(false)) =>
        {
            return Use::Deferrable;
        }
        // An assert's test (`assert lengths.max().item() <= slen`) reads only to check, as
        // `assert t.all()` does: the check can wait, or run on the device.
        Stmt::Assert(a) if std::ptr::eq(&*a.test, child) => return Use::Deferrable,
        // Returned to a caller, which may need it (an all-to-all's split sizes) or not.
        Stmt::Assert(_) | Stmt::Raise(_) | Stmt::Return(_) => return Use::Needed,
        Stmt::Assign(a) => a.targets.iter().collect(),
        Stmt::AnnAssign(a) => vec![&*a.target],
        _ => return Use::Deferrable,
    };
    let mut names: Vec<BindingId> = Vec::new();
    for t in targets {
        any_subexpr(t, &mut |sub| {
            if let Expr::Name(n) = sub
                && let Some(b) = cx.model.definition_of(n)
            {
                names.push(b);
            }
            true
        });
    }
    // A whole tensor kept on the host (a list of ids, an array of predictions) is the data the
    // code is after; a value kept (`self.best = loss.item()`, `stats["loss"] = ..`) is
    // bookkeeping unless what follows needs it. A whole tensor unpacked into names
    // (`n, pad = stats.tolist()`) is a few values, kept as values are.
    let unpacked = |t: &Expr| match t {
        Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
            elts.iter().all(|e| matches!(e, Expr::Name(_)))
        }
        _ => false,
    };
    let unpacked = match s {
        Stmt::Assign(a) => a.targets.len() == 1 && unpacked(&a.targets[0]),
        _ => false,
    };
    if bulk && !unpacked {
        return Use::Needed;
    }
    if names.is_empty() {
        return Use::Deferrable;
    }
    names_use(cx, &names, s.end(), bulk)
}

/// A condition whose branch leaves the loop or the function, or checks with an `assert`
/// (`if n_valid == 0: assert ..`), decides the control flow. Not a branch that only
/// returns a tensor early from a function run at every step, outside any loop of its own (a
/// loss's `if num_pos == 0: return loss`, or the loss and its logs, `return loss, {"l1": loss}`):
/// the step goes on either way, and the same tensor can be had on the device (`loss /
/// num_pos.clamp(min=1)`, `torch.where`). A flag, a tuple holding one, or nothing returned is a
/// decision the caller acts on, and so is a return that skips a loop of the function.
fn decision(cx: &Checker<'_, '_>, body: &[Stmt]) -> Use {
    let leaves = |s: &Stmt| matches!(s, Stmt::Continue(_) | Stmt::Assert(_)) || leaves_for_good(cx.model, s);
    let per_step = std::cell::OnceCell::new();
    let shortcut = |s: &Stmt| {
        matches!(s, Stmt::Return(r) if r.value.as_deref().is_some_and(|v| {
            cx.kind_of(v).may_be_tensor() || tensors_and_logs(cx, v)
        })) && *per_step.get_or_init(|| cx.loops.is_empty() && cx.hot().is_some() && !skips_a_loop(cx, s))
    };
    if body.iter().any(|s| leaves(s) && !shortcut(s)) { Use::Needed } else { Use::Deferrable }
}

/// Does the function have a loop after the statement (a generation's `if done.all(): return
/// tokens, logits` before its loop over tokens)? Returning early then saves the loop's work: the
/// read decides. (Past 512 statements, taken to: a read is left alone rather than reported.)
fn skips_a_loop(cx: &Checker<'_, '_>, s: &Stmt) -> bool {
    let Some(f) = cx.function else { return false };
    let mut budget = 512usize;
    let mut found = false;
    each_stmt_after(&cx.model.function(f).def.body, s.end(), &mut |st| {
        budget = budget.saturating_sub(1);
        found = matches!(st, Stmt::For(_) | Stmt::While(_)) || budget == 0;
        !found
    });
    found
}

/// Does a returned tuple hold tensors and dictionaries of them only, a tensor first (`loss,
/// dict(l1_loss=loss)`)? Not one holding a literal (a flag, a number, `None`) or a value known
/// not to be a tensor; a value of unknown kind may be one.
fn tensors_and_logs(cx: &Checker<'_, '_>, v: &Expr) -> bool {
    fn walk(cx: &Checker<'_, '_>, v: &Expr, depth: usize) -> bool {
        if depth > 3 {
            return false;
        }
        match v {
            Expr::Tuple(t) => !t.elts.is_empty() && t.elts.iter().all(|e| walk(cx, e, depth + 1)),
            Expr::Dict(d) => d.items.iter().all(|i| i.key.is_some() && walk(cx, &i.value, depth + 1)),
            Expr::Call(c) if cx.callee_name(c).is_some_and(|q| q == "builtins.dict") => {
                c.arguments.args.is_empty()
                    && c.arguments.keywords.iter().all(|k| k.arg.is_some() && walk(cx, &k.value, depth + 1))
            }
            e => !e.is_literal_expr() && cx.kind_of(e).may_be_tensor(),
        }
    }
    let Expr::Tuple(t) = v else { return false };
    let logs = |e: &Expr| match e {
        Expr::Tuple(_) | Expr::Dict(_) => true,
        Expr::Call(c) => cx.callee_name(c).is_some_and(|q| q == "builtins.dict"),
        _ => false,
    };
    t.elts.first().is_some_and(|first| !logs(first)) && walk(cx, v, 0)
}

/// Is the value read used to index a tensor (`embeds[t.item()]`, or through the one name it is
/// bound to: `i = torch.multinomial(w[b], 1).item()`, then `embeds[i]`)?
fn picks_from_a_tensor(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    if let Some(Node::Expr(Expr::Subscript(s))) = cx.parents.last() {
        return std::ptr::eq(&*s.slice, value) && indexes_a_tensor(cx, &s.value);
    }
    let Some(Node::Stmt(Stmt::Assign(a))) = cx.parents.last() else { return false };
    let ([Expr::Name(n)], true) = (a.targets.as_slice(), std::ptr::eq(&*a.value, value)) else { return false };
    let Some(b) = cx.model.definition_of(n) else { return false };
    let body: &[Stmt] = match cx.function {
        Some(f) => &cx.model.function(f).def.body,
        None => cx.module_body,
    };
    let mut found = false;
    let mut budget = 512usize;
    each_stmt_after(body, a.end(), &mut |s| {
        budget = budget.saturating_sub(1);
        for e in statement_exprs(s) {
            any_subexpr(e, &mut |sub| {
                if let Expr::Subscript(x) = sub
                    && is_one_of(cx, &x.slice, &[b])
                    && indexes_a_tensor(cx, &x.value)
                {
                    found = true;
                }
                !found
            });
        }
        !found && budget > 0
    });
    found
}

/// Is `value`, indexed by a number read on the host, a tensor (not a Python container): known to
/// be one, or maybe one and on the device (`all_gather_with_grad(embeds)`)?
fn indexes_a_tensor(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    match cx.kind_of(value) {
        Kind::Tensor => true,
        Kind::Unknown => provenance_in_project(cx, value).on_accelerator,
        _ => false,
    }
}

/// What a call does with a value read on the host.
fn classify_call(cx: &Checker<'_, '_>, call: &ast::ExprCall, bulk: bool) -> Use {
    // `accuracy(output.detach().cpu().numpy(), target.cpu().numpy())` in a loop that steps the
    // training: a whole batch copied at every step for a statistic, which can be had on the
    // device, or every N steps.
    if bulk && computes_a_metric(&call.func) && cx.in_training_step() && statistic_only_kept(cx, call) {
        return Use::Deferrable;
    }
    if let Some(q) = cx.callee_name(call) {
        // Back to the device as data (`torch.tensor(v)`): a round trip. As a size or an index
        // (`F.interpolate(x, size=(h, w))`), the host needs it.
        if api::creation_takes_data(&q) {
            return Use::Deferrable;
        }
        if api::returns_tensor(&q) {
            return Use::Needed;
        }
        if matches!(
            q.as_ref(),
            "builtins.print"
                | "builtins.float"
                | "builtins.int"
                | "builtins.round"
                | "builtins.str"
                | "builtins.abs"
                | "builtins.sum"
                | "builtins.max"
                | "builtins.min"
        ) || q.starts_with("logging.")
            || q.starts_with("wandb.")
            || q.starts_with("mlflow.")
        {
            return Use::Deferrable;
        }
        if matches!(q.as_ref(), "builtins.range" | "builtins.len") {
            return Use::Needed;
        }
    }
    if let Expr::Attribute(a) = &*call.func {
        let method = a.attr.as_str();
        let logging = [
            "append",
            "extend",
            "add",
            "update",
            "log",
            "info",
            "debug",
            "warning",
            "write",
            "format",
            "add_scalar",
            "add_scalars",
            "add_histogram",
            "log_metrics",
            "log_dict",
            "set_postfix",
            "set_postfix_str",
            "set_description",
            "record",
            "push",
            "put",
            "setdefault",
        ];
        // Collected or stored, a whole tensor's data is what the host is after — unless the loop
        // takes it back to the device (`xs.append(x.cpu())`, then `xs[-1].cuda()`): a round trip.
        let collects = ["append", "extend", "add", "update", "push", "put", "setdefault", "write", "record"];
        if bulk && collects.contains(&method) {
            return if sent_back_in_loop(cx, &a.value) || collected_at_each_step(cx, call) {
                Use::Deferrable
            } else {
                Use::Needed
            };
        }
        // `self.store_metrics({..})`, `tracker.record_stats(..)`, `self.generate_step_logs(..)`:
        // named for keeping statistics or logs.
        let keeps_statistics = || {
            super::helpers::name_words(method).any(|w| {
                ["metric", "metrics", "stats", "statistics", "store", "record", "track", "logs", "logging", "logger"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k))
            })
        };
        if logging.contains(&method) || method.starts_with("log") || keeps_statistics() {
            return Use::Deferrable;
        }
    }
    Use::Needed
}

/// Is the call a list's `append` or `extend` (not `np.append`) in a loop that steps the training
/// (`train_pred.append(preds.detach().cpu().numpy())`)? The batch is copied to the host at every
/// step for what the epoch computes after the loop; kept on the device, it is copied once.
/// The list is one the function made (`train_pred = []`), and the loop does nothing else with it:
/// a list read in the loop (`np.mean(losses[-10:])`) is needed there, and a container of another
/// kind (a `deque` memory bank kept on the host) may be kept there on purpose.
fn collected_at_each_step(cx: &Checker<'_, '_>, call: &ast::ExprCall) -> bool {
    let Expr::Attribute(a) = &*call.func else { return false };
    let Expr::Name(list) = &*a.value else { return false };
    if !matches!(a.attr.as_str(), "append" | "extend") || !cx.in_training_step() {
        return false;
    }
    let a_list = |value: &Expr| {
        matches!(value, Expr::List(_) | Expr::ListComp(_))
            || matches!(value, Expr::Call(c) if matches!(&*c.func, Expr::Name(n) if n.id.as_str() == "list"))
    };
    // `preds = []`, or `records, flat = [], []`.
    let made_a_list = cx.model.binding_of(list).is_some_and(|b| match cx.model.binding(b).kind {
        BindingKind::Assignment { value, part: Part::Whole, .. } => a_list(value),
        BindingKind::Assignment { value: Expr::Tuple(t), part: Part::Element(i), .. } => t.elts.get(i).is_some_and(a_list),
        _ => false,
    });
    let Some(&l) = cx.loops.last() else { return false };
    made_a_list && only_collected_in(cx.model.loop_(l).stmt, cx.model.source, list.id.as_str())
}

/// Is every mention of `name` in the loop's text the list of an `.append(` or `.extend(`?
fn only_collected_in(stmt: &Stmt, source: &str, name: &str) -> bool {
    let Some(text) = source.get(stmt.range().start().to_usize()..stmt.range().end().to_usize()) else {
        return false;
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    memchr::memmem::find_iter(text.as_bytes(), name.as_bytes()).all(|at| {
        let before = text[..at].chars().next_back();
        let after = &text[at + name.len()..];
        if before.is_some_and(|c| word(c) || c == '.') || after.starts_with(word) {
            return true;
        }
        after.starts_with(".append(") || after.starts_with(".extend(")
    })
}

/// Is the value copied an argument of a call named for a statistic (`accuracy(out.cpu().numpy(),
/// ..)`), through the conversions around it (`.detach().cpu().numpy()`)?
fn copied_for_a_metric(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    argument_of(cx, value, |c| computes_a_metric(&c.func))
}

/// Is the value, through the conversions around it (`.detach().cpu().numpy()`), an argument of a
/// call that `is_call` accepts?
fn argument_of(cx: &Checker<'_, '_>, value: &Expr, is_call: impl Fn(&ast::ExprCall) -> bool) -> bool {
    let mut child = value.range();
    for parent in cx.parents.iter().rev() {
        match parent {
            Node::Expr(Expr::Call(c)) if c.func.range().contains_range(child) => child = c.range(),
            Node::Expr(Expr::Attribute(a)) => child = a.range(),
            // `records.append((out.cpu().numpy(), y))`: an item of what is handed over.
            Node::Expr(Expr::Tuple(t)) => child = t.range(),
            Node::Expr(Expr::Call(c)) => return is_call(c),
            _ => return false,
        }
    }
    false
}

/// Is the statistic only kept (`acc, n = accuracy(..)` whose names the function then neither
/// tests nor returns, or the call handed straight to a logger or a meter)? Not when this step
/// decides with it (`if accuracy(..) >= target: break`, or a name tested after).
fn statistic_only_kept(cx: &Checker<'_, '_>, call: &ast::ExprCall) -> bool {
    let Some(stmt) = cx.parents.iter().rev().find_map(|p| match p {
        Node::Stmt(s) => Some(*s),
        Node::Expr(_) => None,
    }) else {
        return false;
    };
    match stmt {
        Stmt::Expr(_) => true,
        Stmt::Assign(a) if a.value.range() == call.range() => {
            let mut names: Vec<BindingId> = Vec::new();
            for t in &a.targets {
                any_subexpr(t, &mut |sub| {
                    if let Expr::Name(n) = sub
                        && let Some(b) = cx.model.definition_of(n)
                    {
                        names.push(b);
                    }
                    true
                });
            }
            !names.is_empty() && !decides_with(cx, &names, stmt.end())
        }
        _ => false,
    }
}

/// Does the function, after `after`, test one of the names (`if acc >= target: break`) or return
/// it? Uses in the branches of a gate (`if i % print_freq == 0: save_debug_images(.., pred, ..)`)
/// and in calls (a meter's `update`, a print) do not count. (Past 2048 statements, taken to.)
fn decides_with(cx: &Checker<'_, '_>, names: &[BindingId], after: ruff_text_size::TextSize) -> bool {
    let Some(f) = cx.function else { return true };
    let mut gated: Vec<TextRange> = Vec::new();
    let mut budget = 2048usize;
    let mut decides = false;
    each_stmt_after(&cx.model.function(f).def.body, after, &mut |s| {
        budget = budget.saturating_sub(1);
        if budget == 0 {
            decides = true;
            return false;
        }
        if gated.iter().any(|g| g.contains_range(s.range())) {
            return true;
        }
        match s {
            Stmt::If(i) if crate::python::checker::is_gate(&i.test) => gated.push(i.range()),
            Stmt::If(ast::StmtIf { test, .. }) | Stmt::While(ast::StmtWhile { test, .. }) => {
                decides |= mentions(cx, test, names);
            }
            Stmt::Return(ast::StmtReturn { value: Some(v), .. }) => decides |= mentions(cx, v, names),
            _ => {}
        }
        !decides
    });
    decides
}

/// Is the function called named for a statistic of predictions (`accuracy`, `compute_iou`,
/// `metrics.f1_score`)?
fn computes_a_metric(func: &Expr) -> bool {
    let name = match func {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.as_str(),
        _ => return false,
    };
    super::helpers::name_words(name).any(|w| {
        ["accuracy", "acc", "metric", "metrics", "iou", "miou", "pck", "psnr", "ssim", "f1", "auc", "precision", "recall"]
            .iter()
            .any(|k| w.eq_ignore_ascii_case(k))
    })
}

/// Is the read value put into a container that the loop takes back to the device
/// (`xs.append(x.cpu())`, then `xs[-1].cuda()`)?
fn round_trip(cx: &Checker<'_, '_>, value: &Expr) -> bool {
    matches!(cx.parents.last(), Some(Node::Expr(Expr::Call(c)))
        if c.arguments.args.first().is_some_and(|a| std::ptr::eq(a, value))
            && matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "append" && sent_back_in_loop(cx, &a.value)))
}

/// Does the innermost loop move an item of the container `collection` (a name) to the device
/// (`xs[-1].to(device)`, `xs[i].cuda()`)?
fn sent_back_in_loop(cx: &Checker<'_, '_>, collection: &Expr) -> bool {
    let Expr::Name(name) = collection else { return false };
    let Some(&l) = cx.loops.last() else { return false };
    let mut found = false;
    // The statements looked at: any real loop's, few enough that thousands of collected reads
    // in one loop do not make the rule quadratic (beyond them: not sent back, no finding).
    let mut budget = 2048usize;
    for block in super::helpers::blocks(cx.model.loop_(l).stmt) {
        super::helpers::each_stmt(block, &mut |s| {
            if found || budget == 0 {
                return;
            }
            budget -= 1;
            for e in statement_exprs(s) {
                any_subexpr(e, &mut |sub| {
                    if let Some((call, Expr::Subscript(item), "to" | "cuda")) = method_call(sub)
                        && matches!(&*item.value, Expr::Name(n) if n.id == name.id)
                        && (call.arguments.args.first().is_none_or(|t| {
                            super::helpers::literal_device(cx, t).is_none_or(|d| d != "cpu")
                        }))
                    {
                        found = true;
                    }
                    !found
                });
            }
        });
    }
    found
}

/// How the names a value was assigned to are used afterwards in the same function.
fn names_use(cx: &Checker<'_, '_>, names: &[BindingId], after: ruff_text_size::TextSize, bulk: bool) -> Use {
    let body: &[Stmt] = match cx.function {
        Some(f) => &cx.model.function(f).def.body,
        None => cx.module_body,
    };
    names_use_in(cx, body, names, after, bulk, false)
}

/// [`names_use`] in `body`, which is the body of a caller of the function being checked when
/// `in_caller` (there, a name returned again goes to a caller not looked at: needed).
fn names_use_in(
    cx: &Checker<'_, '_>,
    body: &[Stmt],
    names: &[BindingId],
    after: ruff_text_size::TextSize,
    bulk: bool,
    in_caller: bool,
) -> Use {
    let mut result = Use::Deferrable;
    // The statements after the read that are looked at: enough for any real function, few
    // enough that thousands of reads in one function do not make the rule quadratic. Beyond
    // them, the value is taken as needed (no finding).
    let mut budget = 2048usize;
    each_stmt_after(body, after, &mut |s| {
        if result == Use::Needed {
            return false;
        }
        if budget == 0 {
            result = Use::Needed;
            return false;
        }
        budget -= 1;
        // Returned to a caller of another file that needs the result at once (`if logs["l1"] >
        // 1e4: break` after `loss, logs = crit(..)`).
        if let Stmt::Return(ast::StmtReturn { value: Some(v), .. }) = s
            && mentions(cx, v, names)
            && (in_caller || elsewhere_needs_result(cx) == Some(true))
        {
            result = Use::Needed;
            return false;
        }
        // A name that decides a branch leaving the loop, or the loop's own condition. Not a
        // check for NaN or Inf (`loss_value = loss.item()`, then `if not
        // math.isfinite(loss_value): sys.exit(1)`): it reads the value at every step for a case
        // that rarely comes, as the same check on the read itself does ([`in_bad_value_check`]).
        let (test, branch): (Option<&Expr>, Option<&[Stmt]>) = match s {
            Stmt::If(i) => (Some(&i.test), Some(&i.body)),
            Stmt::While(w) => (Some(&w.test), None),
            _ => (None, None),
        };
        if let Some(test) = test
            && mentions(cx, test, names)
            && !only_bad_value_checks(cx, test, names)
        {
            let needed = branch.is_none_or(|b| decision(cx, b) == Use::Needed);
            if needed {
                result = Use::Needed;
            }
        }
        // A name handed to a call that is not logging or bookkeeping, or used as an index.
        let exprs = statement_exprs(s);
        for e in exprs {
            any_subexpr(e, &mut |sub| {
                match sub {
                    Expr::Call(c) => {
                        let args_mention = c
                            .arguments
                            .args
                            .iter()
                            .chain(c.arguments.keywords.iter().map(|k| &k.value))
                            .any(|a| mentions(cx, a, names));
                        // (Not on a branch a run leaves off: `if opts.enable_vis: vis.plot(.., v)`.)
                        if args_mention && classify_call(cx, c, bulk) == Use::Needed && !cx.on_opt_in_branch(s.start()) {
                            result = Use::Needed;
                        }
                    }
                    Expr::Subscript(s) if is_one_of(cx, &s.slice, names) && !indexes_a_tensor(cx, &s.value) => {
                        result = Use::Needed
                    }
                    _ => {}
                }
                result != Use::Needed
            });
        }
        result != Use::Needed
    });
    result
}

/// Calls `f` on each statement of `body` that ends after `after`, in order, nested blocks
/// included (not those of a nested `def` or `class`), until `f` says stop. Each block is entered
/// at its first statement ending after `after` (a binary search): a read near the end of a long
/// function looks at what follows it, not at everything before.
fn each_stmt_after<'a>(body: &'a [Stmt], after: ruff_text_size::TextSize, f: &mut dyn FnMut(&'a Stmt) -> bool) -> bool {
    fn walk<'a>(
        body: &'a [Stmt],
        after: ruff_text_size::TextSize,
        depth: usize,
        f: &mut dyn FnMut(&'a Stmt) -> bool,
    ) -> bool {
        if depth > crate::python::model::MAX_DEPTH {
            return true;
        }
        let first = body.partition_point(|s| s.end() <= after);
        for s in &body[first..] {
            if !f(s) {
                return false;
            }
            for b in super::helpers::blocks(s) {
                if !walk(b, after, depth + 1, f) {
                    return false;
                }
            }
        }
        true
    }
    walk(body, after, 0, f)
}

/// Has the device just been waited for: an explicit `torch.cuda.synchronize()` (any
/// `*.synchronize()`) among the 32 statements before in the same block, with no work queued since — no statement in
/// between, nor the read's own statement, calls a module, `backward()` or a step, and none holds
/// a block of its own? The read then waits for nothing (the wait, if any, is the explicit one).
fn synchronized_just_before(cx: &Checker<'_, '_>) -> bool {
    let Some((block, at)) = cx.block_of_statement() else { return false };
    let queues = |s: &Stmt| {
        let simple = matches!(
            s,
            Stmt::Expr(_) | Stmt::Assign(_) | Stmt::AugAssign(_) | Stmt::AnnAssign(_) | Stmt::Pass(_)
        );
        let mut work = !simple;
        for e in statement_exprs(s) {
            any_subexpr(e, &mut |sub| {
                work |= matches!(sub, Expr::Call(c) if cx.queues_device_work(c));
                !work
            });
        }
        work
    };
    let synchronize = |s: &Stmt| matches!(s, Stmt::Expr(e) if matches!(&*e.value, Expr::Call(c) if is_synchronize(cx, c)));
    // Looked for among the 32 statements before (a block of thousands of reads would make the
    // rule quadratic; an explicit wait further up is not "just before"). Nearly always there is
    // none, and nothing else is looked at: the statements in between, and the read's own, are
    // walked only when there is one.
    let before = block[..at].iter().rev().take(32).position(synchronize);
    let Some(distance) = before else { return false };
    !queues(&block[at]) && !block[at - distance..at].iter().any(queues)
}

/// The expressions a statement evaluates itself (not those of the blocks it holds).
fn statement_exprs(s: &Stmt) -> Vec<&Expr> {
    match s {
        Stmt::Expr(e) => vec![&e.value],
        Stmt::Assign(a) => vec![&a.value],
        Stmt::AugAssign(a) => vec![&a.value],
        Stmt::AnnAssign(a) => a.value.as_deref().into_iter().collect(),
        Stmt::Return(r) => r.value.as_deref().into_iter().collect(),
        Stmt::For(f) => vec![&f.iter],
        _ => Vec::new(),
    }
}

fn is_one_of(cx: &Checker<'_, '_>, e: &Expr, names: &[BindingId]) -> bool {
    matches!(e, Expr::Name(n) if cx.model.binding_of(n).is_some_and(|b| names.contains(&b)))
}

fn mentions(cx: &Checker<'_, '_>, e: &Expr, names: &[BindingId]) -> bool {
    let mut found = false;
    any_subexpr(e, &mut |sub| {
        found |= is_one_of(cx, sub, names);
        !found
    });
    found
}
