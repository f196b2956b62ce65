//! D001 for PyTorch code. What it finds, why, and its fixes: `d001_tensor_on_fixed_device.md` beside this file (what
//! `devcheck explain D001` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextSize};
use rustc_hash::FxHashSet;
use smallvec::SmallVec;

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::api;
use crate::python::checker::{Checker, Node, Reads, Rule};
use crate::python::model::{AttrHow, BindingId, BindingKind, Callee, FunctionId, LoopId, Part};
use crate::python::typing::Kind;
use crate::registry;

use super::device_evidence::{
    MAX_DEPTH, REDUCTIONS, device_evident, has_dim, may_follow, names_a_device, on_cpu_side, reduces_to_0_dim,
    tensor_indices,
};
use super::helpers::{
    Fixed, checks_for_accelerator, fixed_creation, is_batch_element, is_cpu_device, is_dtype, iterates_loader, keyword,
    literal_device, loader_of, method_call, range, whole_batch,
};

#[derive(Default)]
pub(crate) struct Check {
    reported: FxHashSet<TextSize>,
    /// Per function, once known: does the rule look at its body ([`function_active`] and
    /// [`Sources::reach`])?
    active: Vec<Option<bool>>,
    /// Where the file's tensors on a fixed device can come from; worked out when the rule first
    /// looks at a function.
    sources: Option<Sources>,
    /// Batch elements reported as left on the host (once each, at their first use): where the
    /// batch's iterable starts, and the element as written.
    left_on_host: FxHashSet<(TextSize, String)>,
    /// Per loop, once asked: does it iterate a data loader?
    loader_loops: rustc_hash::FxHashMap<LoopId, bool>,
    /// Per batch element (where its iterable starts, the element as written), once asked: the
    /// sibling its loop moves to the device ([`sibling_moved`]).
    siblings: rustc_hash::FxHashMap<(TextSize, String), Option<Sibling>>,
}


impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::CALL | Reads::OPERATOR | Reads::SUBSCRIPT
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        // Code only a non-default option reaches, or nothing in the repository names: a failure
        // there is latent in the runs the project makes.
        if cx.in_latent_code() {
            return;
        }
        if let Expr::Call(c) = e
            && !cx.kind.is_test_like()
            && let Some(found) = typed_constructor_given_a_device(cx, c)
        {
            out.push(found);
            return;
        }
        if let Expr::Call(c) = e
            && cx.device_block == 0
            && !cx.kind.is_test_like()
            && let Some(found) = layer_made_in_forward(cx, c)
        {
            out.push(found);
            return;
        }
        if !matches!(e, Expr::BinOp(_) | Expr::Compare(_) | Expr::Call(_) | Expr::Subscript(_)) {
            return;
        }
        if let Some(found) = self.batch_element_left_on_host(cx, e) {
            out.push(found);
        }
        if !self.active(cx) {
            // Elsewhere (a loss, a training script, an evaluation), only a CPU tensor indexed
            // with a tensor that is on the device by what this code does to it, or passed to a
            // model this code moved to the device.
            if let Expr::Subscript(sub) = e
                && let Some(found) = self.index_on_the_cpu(cx, sub)
            {
                out.push(found);
            }
            if let Expr::Call(c) = e {
                out.extend(self.host_input_to_moved_model(cx, c));
            }
            return;
        }
        for (fixed, other) in combined(cx, e) {
            let Some((origin, how)) = fixed_origin(cx, fixed, 0) else { continue };
            if !device_side(cx, other, 0) || self.reported.contains(&origin.start()) || in_device_branch(cx) {
                continue;
            }
            self.reported.insert(origin.start());
            out.push(finding(cx, origin, how, e));
        }
    }
}

impl Check {
    /// `cpu[index]` outside the functions [`Check::active`] reads: `cpu` made on a fixed device
    /// or moved to the CPU, `index` on the device by [`device_evident`].
    fn index_on_the_cpu(&mut self, cx: &Checker<'_, '_>, sub: &ast::ExprSubscript) -> Option<Finding> {
        if cx.default_device_set() || cx.kind.is_test_like() || in_device_branch(cx) {
            return None;
        }
        let indices = tensor_indices(cx, sub);
        if indices.is_empty() {
            return None;
        }
        let origin = cpu_origin(cx, &sub.value, 0)?;
        if self.reported.contains(&origin.call().start()) {
            return None;
        }
        let index = indices.into_iter().find(|i| device_evident(cx, i))?;
        self.reported.insert(origin.call().start());
        Some(index_finding(cx, origin, sub, index))
    }

    /// `model = Net().to(device)` (or `model.cuda()` later), then `model(torch.tensor(xs))`: the
    /// input is made on the host, the model's weights are on the device.
    fn host_input_to_moved_model(&mut self, cx: &Checker<'_, '_>, c: &ast::ExprCall) -> Option<Finding> {
        if cx.default_device_set() || cx.kind.is_test_like() || in_device_branch(cx) {
            return None;
        }
        if cx.kind_of(&c.func) != Kind::Module {
            return None;
        }
        // `model(..)` bound in this code, or `self.model(..)` kept on the object.
        let (shown, chain, moved) = match &*c.func {
            Expr::Name(n) => {
                let model = cx.model.binding_of(n)?;
                (n.id.to_string(), made_with(cx, model), moved_to_accelerator(cx, model, c)?)
            }
            Expr::Attribute(a) => {
                let class = cx.types.receiver_class(&a.value)?;
                let (chain, moved) = attribute_moved_to_accelerator(cx, class, a.attr.as_str())?;
                (cx.short(a.range()), chain, moved)
            }
            _ => return None,
        };
        // The class the chain starts from (`CTCLoss` in `nn.CTCLoss(..).to(device)`): a loss or a
        // module without weights computes where its inputs are (and `CTCLoss` takes its lengths
        // from the CPU); `DataParallel` and `DistributedDataParallel` move their inputs to the
        // model's GPUs themselves, and so does a class of this file whose `forward` moves its
        // input.
        if let Some(made) = chain.last() {
            if let Some(q) = cx.callee_name(made) {
                let moves_inputs = matches!(
                    q.as_ref(),
                    "torch.nn.DataParallel"
                        | "torch.nn.parallel.DataParallel"
                        | "torch.nn.parallel.DistributedDataParallel"
                        | "torch.nn.parallel.distributed.DistributedDataParallel"
                );
                if moves_inputs || api::is_loss_class(&q) || api::class_holds_no_tensors(&q) {
                    return None;
                }
            }
            if let Some(Callee::Class(class)) = cx.model.callee(made, cx.function)
                && forward_moves_its_input(cx, class)
            {
                return None;
            }
        }
        let args = c.arguments.args.iter().chain(c.arguments.keywords.iter().map(|k| &k.value));
        let Some((origin, how)) = args.clone().filter_map(|a| host_made_input(cx, c, a)).next() else {
            return args.filter_map(|a| self.host_batch_input(cx, c, a, &shown, moved)).next();
        };
        if !self.reported.insert(origin.start()) {
            return None;
        }
        let q = cx.model.canonical_name(&origin.func);
        let callee = q.as_deref().map_or_else(|| cx.short(origin.func.range()), str::to_string);
        let place = made_on(cx, origin, how);
        Some(
            Finding::new(
                &registry::D001,
                range(origin.range()),
                format!("`{callee}` makes an input of `{shown}` on {place}, but this code moved `{shown}` to the device"),
            )
            .label("made on the host")
            .related(range(moved), "the model moved to the device here")
            .related(range(c.range()), "called with it here: on a GPU run its weights and this input are on different devices")
            .help("move the input where the model is (`.to(device)`), or make it there (`device=device`)"),
        )
    }

    /// `model(x)` with `x` an element of a batch that a DataLoader of this file makes on the host
    /// ([`loader_yields_host_tensors`]) and that nothing moved: the model was moved to the device
    /// (at `moved`), its input was not.
    fn host_batch_input(
        &mut self,
        cx: &Checker<'_, '_>,
        c: &ast::ExprCall,
        a: &Expr,
        shown: &str,
        moved: ruff_text_size::TextRange,
    ) -> Option<Finding> {
        let element = unmoved_root(a);
        let from = batch_element(cx, element)?;
        let y = cx.short(element.range());
        if self.left_on_host.contains(&(from.start(), y.clone())) || !loader_yields_host_tensors(cx, from) {
            return None;
        }
        // An element left on the host beside one the loop moves is left there on purpose (the
        // lengths a model packs its input with).
        if self.sibling(cx, element, from, &y).is_some() {
            return None;
        }
        self.left_on_host.insert((from.start(), y.clone()));
        let source = cx.short(super::helpers::unwrap_iteration(cx.model, from).range());
        Some(
            Finding::new(
                &registry::D001,
                range(element.range()),
                format!("`{y}` comes from `{source}` on the host and is passed to `{shown}`, which this code moved to the device"),
            )
            .label("left on the host")
            .related(range(moved), "the model moved to the device here")
            .related(range(c.range()), "called with it here: on a GPU run its weights and this input are on different devices")
            .help(format!("move the batch where the model is (`{y} = {y}.to(device)`, and the labels with it) before the call")),
        )
    }

    /// [`sibling_moved`], asked once per element (`y`, as written) and loop: a loop that uses an
    /// element thousands of times walks its body once.
    fn sibling(&mut self, cx: &Checker<'_, '_>, element: &Expr, from: &Expr, y: &str) -> Option<Sibling> {
        let key = (from.start(), y.to_string());
        if let Some(known) = self.siblings.get(&key) {
            return known.clone();
        }
        let found = sibling_moved(cx, element, from);
        self.siblings.insert(key, found.clone());
        found
    }

    /// `for x, y in loader:` that moves `x` to the device in the loop (`x = x.to(device)`) and
    /// combines `y`, not moved, with a tensor on the device (`loss = criterion(model(x), y)`,
    /// `(out.argmax(1) == y)`): the loader makes its batches on the host, so on a GPU run the
    /// label left there meets the model's output on another device. The finding is at the use
    /// of `y`; the move of its sibling is the evidence that the batch starts on the host.
    fn batch_element_left_on_host(&mut self, cx: &Checker<'_, '_>, e: &Expr) -> Option<Finding> {
        if !self.in_loader_loop(cx)
            || cx.default_device_set()
            || cx.kind.is_test_like()
            || in_device_branch(cx)
        {
            return None;
        }
        let pairs = match e {
            Expr::Call(c) if calls_a_loss(cx, c) => {
                // `criterion(out, y)`, `F.nll_loss(out, target=y)`, `criterion(input=out, target=y)`.
                let named = c.arguments.keywords.iter().filter(|k| k.arg.is_some()).map(|k| &k.value);
                let args: Few<&Expr> = c.arguments.args.iter().chain(named).collect();
                let mut pairs = Few::new();
                for (i, &a) in args.iter().enumerate() {
                    for (j, &b) in args.iter().enumerate() {
                        if i != j {
                            pairs.push((a, b));
                        }
                    }
                }
                pairs
            }
            // CTC takes its targets and lengths from the host.
            Expr::Call(c) if cx.callee_name(c).is_some_and(|q| q.contains("ctc")) => return None,
            Expr::Subscript(_) => return None,
            // A model may take some inputs from the host by design (lengths for packing).
            Expr::Call(c) if cx.kind_of(&c.func) == Kind::Module => return None,
            _ => combined(cx, e),
        };
        for (left, other) in pairs {
            let element = unmoved_root(left);
            let Some(from) = batch_element(cx, element) else { continue };
            let y = cx.short(element.range());
            if self.left_on_host.contains(&(from.start(), y.clone())) {
                continue;
            }
            let Some(sibling) = self.sibling(cx, element, from, &y) else { continue };
            if loader_yields_device_tensors(cx, from) {
                continue;
            }
            if !device_evident(cx, other) && !from_the_move(cx, other, sibling.1, 0, &std::cell::Cell::new(256)) {
                continue;
            }
            self.left_on_host.insert((from.start(), y.clone()));
            let x = &sibling.0;
            // The sibling's move, its device only (not a dtype or memory format meant for the
            // sibling): `.to(device)`, `.cuda()`.
            let move_ = sibling.2.as_str();
            let source = cx.short(super::helpers::unwrap_iteration(cx.model, from).range());
            let moved_y = match element {
                Expr::Name(_) => format!("`{y} = {y}{move_}`"),
                _ => format!("`{y}{move_}`"),
            };
            return Some(
                Finding::new(
                    &registry::D001,
                    range(element.range()),
                    format!(
                        "`{y}` comes from `{source}` on the host and is used here with `{}`, on the device: `{x}` of the same batch is moved to the device, `{y}` is not",
                        cx.short(other.range())
                    ),
                )
                .label("left on the host")
                .related(range(sibling.1), format!("`{x}` is moved to the device here"))
                .related(range(e.range()), "combined here: on a GPU run PyTorch raises \"Expected all tensors to be on the same device\"")
                .help(format!("move `{y}` with `{x}` ({moved_y}) before it is used"))
                .fix(Some(Fix::new(
                    Applicability::Unsafe,
                    format!("move `{y}` here (`{y}{move_}`)"),
                    vec![Edit { range: element.end().to_usize()..element.end().to_usize(), replacement: move_.to_string() }],
                ))),
            );
        }
        None
    }

    /// Inside a loop over a data loader's batches (known per loop once asked).
    fn in_loader_loop(&mut self, cx: &Checker<'_, '_>) -> bool {
        cx.loops.iter().any(|&l| {
            *self.loader_loops.entry(l).or_insert_with(|| {
                cx.model.loop_(l).for_parts().is_some_and(|(_, iter)| iterates_loader(cx, iter))
            })
        })
    }

    /// In a function the rule reads, outside a `with torch.device(..)` block.
    fn active(&mut self, cx: &Checker<'_, '_>) -> bool {
        let Some(f) = cx.function else { return false };
        if cx.device_block > 0 {
            return false;
        }
        if self.active.len() <= f.index() {
            self.active.resize(f.index() + 1, None);
        }
        if let Some(known) = self.active[f.index()] {
            return known;
        }
        let active =
            function_active(cx, f) && self.sources.get_or_insert_with(|| Sources::of(cx)).reach(cx, f);
        self.active[f.index()] = Some(active);
        active
    }
}

/// The scopes of a file that hold a call [`fixed_origin`] can end at or pass through: a creation
/// call, or a call that may name a function of this file (whose returns it follows). It follows
/// nothing else — names to their bindings, calls to their arguments or receivers — so an operand
/// of a function can come from a creation call only when one of these lies in the function, in a
/// function enclosing it, or at the top level (where its globals are bound). Most functions that
/// take tensors have none: the rule then asks nothing of their operators, the largest part of its
/// cost on real code.
struct Sources {
    /// Per function.
    functions: Vec<bool>,
    /// At the top level (or in a class body there); also set, to keep every function, when some
    /// scope declares `global`/`nonlocal` names (their values are written in one scope and bound
    /// in another).
    top: bool,
}

impl Sources {
    fn of(cx: &Checker<'_, '_>) -> Sources {
        let names: FxHashSet<&str> = cx.model.functions().map(|(_, f)| f.name()).collect();
        let mut sources = Sources {
            functions: vec![false; cx.model.functions().count()],
            top: cx.model.declares_outer_names(),
        };
        for site in &cx.model.calls {
            let helper = match &*site.call.func {
                Expr::Name(n) => names.contains(n.id.as_str()),
                Expr::Attribute(a) => names.contains(a.attr.as_str()),
                _ => false,
            };
            let source =
                helper || cx.model.canonical_name(&site.call.func).is_some_and(|q| api::is_creation(&q));
            if !source {
                continue;
            }
            match site.function {
                Some(f) => {
                    if let Some(slot) = sources.functions.get_mut(f.index()) {
                        *slot = true;
                    }
                }
                None => sources.top = true,
            }
        }
        sources
    }

    /// Can an operand in `f` come from a creation call?
    fn reach(&self, cx: &Checker<'_, '_>, f: FunctionId) -> bool {
        let mut scope = Some(f);
        while let Some(g) = scope {
            if self.functions.get(g.index()).copied().unwrap_or(true) {
                return true;
            }
            scope = cx.model.function(g).parent;
        }
        self.top
    }
}

/// A forward pass (or a module method taking tensors), where the default device is not set.
fn function_active(cx: &Checker<'_, '_>, f: FunctionId) -> bool {
    if cx.kind.is_test_like() || cx.facts.sets_default_device {
        return false;
    }
    let fun = cx.model.function(f);
    // Methods of a module that take tensors; other functions only when a forward pass calls them.
    let takes_tensors = cx.in_module_method()
        && fun.def.parameters.iter_non_variadic_params().any(|p| {
            p.parameter.annotation.as_deref().is_some_and(|a| cx.types.annotation_kind(a) == Kind::Tensor)
        });
    cx.in_forward() || (takes_tensors && !fun.name().starts_with("__"))
}

/// Inside a branch that checks for an accelerator: the device is chosen there.
fn in_device_branch(cx: &Checker<'_, '_>) -> bool {
    cx.parents.iter().any(|n| match n {
        Node::Stmt(Stmt::If(i)) => checks_for_accelerator(cx, &i.test),
        Node::Expr(Expr::If(i)) => checks_for_accelerator(cx, &i.test),
        _ => false,
    })
}

/// Pairs (a, b) that an expression combines so that both must be on one device.
/// Up to this many pairs or arguments stay off the heap (one per operator in nearly every case).
type Few<T> = SmallVec<[T; 8]>;

fn combined<'e>(cx: &Checker<'_, '_>, e: &'e Expr) -> Few<(&'e Expr, &'e Expr)> {
    let mut pairs = Few::new();
    let both = |pairs: &mut Few<(&'e Expr, &'e Expr)>, a: &'e Expr, b: &'e Expr| {
        pairs.push((a, b));
        pairs.push((b, a));
    };
    match e {
        Expr::BinOp(b) => both(&mut pairs, &b.left, &b.right),
        Expr::Compare(c) => {
            for r in c.comparators.iter() {
                both(&mut pairs, &c.left, r);
            }
        }
        // A CUDA index into a CPU tensor fails (the reverse is allowed).
        Expr::Subscript(s) => pairs.push((&*s.value, &*s.slice)),
        Expr::Call(call) => {
            let mut args: Few<&Expr> = Few::new();
            let named = call.arguments.keywords.iter().filter(|k| k.arg.is_some()).map(|k| &k.value);
            for a in call.arguments.args.iter().chain(named) {
                match a {
                    Expr::List(l) => args.extend(l.elts.iter()),
                    Expr::Tuple(t) => args.extend(t.elts.iter()),
                    Expr::Starred(s) => args.push(&s.value),
                    other => args.push(other),
                }
            }
            if let Some(q) = cx.callee_name(call) {
                if api::returns_tensor(&q) && !api::is_creation(&q) && !q.ends_with("_like") {
                    for (i, a) in args.iter().enumerate() {
                        for b in &args[i + 1..] {
                            both(&mut pairs, a, b);
                        }
                    }
                }
                return pairs;
            }
            if let Expr::Attribute(a) = &*call.func {
                let allowed = matches!(
                    a.attr.as_str(),
                    "to" | "copy_"
                        | "type_as"
                        | "expand_as"
                        | "view_as"
                        | "reshape_as"
                        | "new_zeros"
                        | "new_ones"
                        | "new_full"
                        | "new_empty"
                        | "new_tensor"
                        | "size"
                        | "index_put_"
                        | "__setitem__"
                );
                if !allowed && cx.kind_of(&a.value) == Kind::Tensor {
                    for arg in &args {
                        both(&mut pairs, arg, &a.value);
                    }
                }
            }
            // A module's weights are on the model's device.
            if cx.kind_of(&call.func) == Kind::Module {
                for arg in args {
                    pairs.push((arg, &*call.func));
                }
            }
        }
        _ => {}
    }
    pairs
}

/// Is `c` a loss: `criterion(out, y)` of a `torch.nn` loss class, or a functional loss
/// (`F.cross_entropy(out, y)`)? Its arguments meet on one device.
fn calls_a_loss(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    if let Some(q) = cx.callee_name(c) {
        return q.strip_prefix("torch.nn.functional.").is_some_and(|f| {
            !f.contains("ctc") && (f.contains("loss") || f.contains("entropy") || f.ends_with("divergence") || f == "kl_div")
        });
    }
    let made = match &*c.func {
        Expr::Name(n) => cx.model.binding_of(n).and_then(|b| match cx.model.binding(b).kind {
            BindingKind::Assignment { value, part: Part::Whole, .. } => Some(value),
            _ => None,
        }),
        Expr::Attribute(a) => {
            let class = cx.types.receiver_class(&a.value);
            class.and_then(|class| {
                let mut values = cx.model.class(class).attr(a.attr.as_str()).map(|at| at.value);
                match (values.next(), values.next()) {
                    (Some(Some(v)), None) => Some(v),
                    _ => None,
                }
            })
        }
        _ => None,
    };
    made.is_some_and(|v| {
        call_chain(v)
            .last()
            .and_then(|made| cx.callee_name(made))
            .is_some_and(|q| api::is_loss_class(&q) && !q.contains("CTC"))
    })
}

/// Is `e` computed on the device from the moved batch element (the move at `moved`): the model's
/// output for it (`out = model(x)`), or arithmetic on either? Not after a copy to the host
/// (`.cpu()`, `.item()`) or a size (`x.size(0)`, `len(x)`).
fn from_the_move(
    cx: &Checker<'_, '_>,
    e: &Expr,
    moved: ruff_text_size::TextRange,
    depth: usize,
    steps: &std::cell::Cell<usize>,
) -> bool {
    if !may_follow(cx, e, depth, steps) {
        return false;
    }
    let next = |e: &Expr| from_the_move(cx, e, moved, depth + 1, steps);
    match e {
        Expr::Call(c) if c.range() == moved => true,
        Expr::Call(c) => {
            if let Expr::Attribute(a) = &*c.func {
                if matches!(
                    a.attr.as_str(),
                    "cpu" | "numpy" | "item" | "tolist" | "size" | "dim" | "numel" | "to" | "type" | "__len__"
                ) {
                    return false;
                }
                if next(&a.value) {
                    return true;
                }
            }
            if cx.callee_name(c).is_some_and(|q| q.starts_with("builtins.")) || returns_on_host(cx, &c.func) {
                return false;
            }
            c.arguments.args.iter().chain(c.arguments.keywords.iter().map(|k| &k.value)).any(next)
        }
        Expr::Name(n) => {
            let Some(b) = cx.model.binding_of(n) else { return false };
            match cx.model.binding(b).kind {
                BindingKind::Assignment { value, .. } | BindingKind::AugAssignment { value, .. } => next(value),
                _ => false,
            }
        }
        Expr::BinOp(b) => next(&b.left) || next(&b.right),
        Expr::UnaryOp(u) => next(&u.operand),
        Expr::Subscript(s) => next(&s.value),
        Expr::Attribute(a) => next(&a.value),
        _ => false,
    }
}

/// Is `func` a function of this file every `return` of which copies its value to the host
/// (`def to_labels(logits): return logits.argmax(1).cpu()`)?
fn returns_on_host(cx: &Checker<'_, '_>, func: &Expr) -> bool {
    let Some(Callee::Function(f)) = cx.model.callee_of(func, cx.function) else { return false };
    let returns = &cx.model.function(f).returns;
    !returns.is_empty()
        && returns.iter().all(|r| {
            method_call(r).is_some_and(|(_, _, name)| matches!(name, "cpu" | "numpy" | "tolist" | "item"))
        })
}

/// `y`, `y.long()`, `y.view(-1).float()`: the name a chain of methods that keep the device
/// starts from (not a move: `y.to(device)`, `y.cuda()`).
fn unmoved_root(e: &Expr) -> &Expr {
    let mut at = e;
    for _ in 0..8 {
        match at {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a)
                    if api::tensor_method_returns_tensor(a.attr.as_str())
                        && !matches!(a.attr.as_str(), "to" | "cuda" | "cpu" | "type" | "type_as" | "pin_memory") =>
                {
                    at = &a.value
                }
                _ => return at,
            },
            _ => return at,
        }
    }
    at
}

/// The iterable of data-loader batches that `e` is an element of: `y` in `for x, y in loader:`
/// or in `for i, (x, y) in enumerate(loader):`; `y` bound in the loop by `x, y = batch` or
/// `y = batch[1]`; `batch["labels"]` itself; any of those rebound through methods that keep the
/// device (`y = y.squeeze(1)`, `labels = batch[1].long()`). Not the whole batch (an object whose
/// `.to()` may move it in place, as a tokenizer's `BatchEncoding` does).
fn batch_element<'e>(cx: &Checker<'_, 'e>, e: &Expr) -> Option<&'e Expr> {
    batch_element_at(cx, e, 0)
}

/// [`batch_element`], `depth` rebindings in.
fn batch_element_at<'e>(cx: &Checker<'_, 'e>, e: &Expr, depth: usize) -> Option<&'e Expr> {
    if depth > 4 {
        return None;
    }
    match e {
        Expr::Name(n) => {
            let b = cx.model.binding_of(n)?;
            match cx.model.binding(b).kind {
                BindingKind::LoopVar { iter, part } if part != Part::Whole => {
                    is_batch_element(cx, e).then_some(iter)
                }
                BindingKind::Assignment { value, part: Part::Element(_), .. } if matches!(value, Expr::Name(_)) => {
                    whole_batch(cx, value)
                }
                BindingKind::Assignment { value: Expr::Subscript(s), part: Part::Whole, .. } => {
                    whole_batch(cx, &s.value)
                }
                BindingKind::Assignment { value: value @ Expr::Call(_), part: Part::Whole, .. } => {
                    let root = unmoved_root(value);
                    (!std::ptr::eq(root, value)).then(|| batch_element_at(cx, root, depth + 1)).flatten()
                }
                _ => None,
            }
        }
        Expr::Subscript(s) => whole_batch(cx, &s.value),
        _ => None,
    }
}


/// Does the loader behind `iter` make its batches on the host, whatever the rest of the code
/// does: a `DataLoader(..)` of this file that pins memory (only host tensors can be pinned), or
/// whose dataset is one of torchvision's (decoded images and labels, on the host) or a
/// `TensorDataset` of tensors made on the host?
fn loader_yields_host_tensors(cx: &Checker<'_, '_>, iter: &Expr) -> bool {
    let Some(loader) = loader_of(cx, iter) else { return false };
    if keyword(loader, "pin_memory").is_some_and(super::helpers::is_true) {
        return true;
    }
    let Some(made) = dataset_call(cx, loader) else { return false };
    let Some(q) = cx.callee_name(made) else { return false };
    if q.starts_with("torchvision.datasets.") {
        return true;
    }
    q == "torch.utils.data.TensorDataset"
        && !made.arguments.args.is_empty()
        && made.arguments.args.iter().all(|t| fixed_origin(cx, t, 0).is_some_and(|(_, how)| matches!(how, Fixed::Cpu | Fixed::Default)))
}

/// Another element of the batch `element` belongs to (drawn from `from`) that the loop moves to
/// the device (`x = x.to(device)`, `model(x.cuda())`, `batch["x"].to(device)`): the element and
/// the move. `None` too when the loop moves the whole batch (`batch.to(device)`), which some
/// batch types do in place.
fn sibling_moved<'e>(cx: &Checker<'_, 'e>, element: &Expr, from: &'e Expr) -> Option<Sibling> {
    use ruff_python_ast::visitor::{self, Visitor};
    let the_loop = cx.loops.iter().rev().find_map(|&l| {
        let l = cx.model.loop_(l);
        l.for_parts().filter(|(_, iter)| std::ptr::eq(*iter, from)).map(|_| l.stmt)
    })?;
    let Stmt::For(f) = the_loop else { return None };
    struct Moves<'c, 'm, 'e> {
        cx: &'c Checker<'m, 'e>,
        element: String,
        from: &'e Expr,
        found: Option<(&'e Expr, &'e Expr)>,
        whole_moved: bool,
        steps: usize,
    }
    impl<'e> Visitor<'e> for Moves<'_, '_, 'e> {
        fn visit_stmt(&mut self, s: &'e Stmt) {
            match s {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                // `x.to(device)` as a statement moves nothing (its result is thrown away: D003),
                // unless `x` is the whole batch, which may move in place.
                Stmt::Expr(ast::StmtExpr { value, .. })
                    if method_call(value).is_some_and(|(_, recv, _)| batch_element(self.cx, recv).is_some()) => {}
                _ => visitor::walk_stmt(self, s),
            }
        }
        fn visit_expr(&mut self, e: &'e Expr) {
            if self.whole_moved || self.steps == 0 {
                return;
            }
            self.steps -= 1;
            if let Expr::Call(c) = e
                && let Expr::Attribute(a) = &*c.func
            {
                let to_device = match a.attr.as_str() {
                    "cuda" => true,
                    "to" => c
                        .arguments
                        .args
                        .first()
                        .or_else(|| keyword(c, "device"))
                        .is_some_and(|d| names_a_device(self.cx, d)),
                    _ => false,
                };
                if to_device {
                    if whole_batch(self.cx, &a.value).is_some_and(|it| std::ptr::eq(it, self.from)) {
                        self.whole_moved = true;
                        return;
                    }
                    // `x.to(device)`, also after a conversion (`x.float().to(device)`).
                    let sibling = unmoved_root(&a.value);
                    if self.found.is_none()
                        && batch_element(self.cx, sibling).is_some_and(|it| std::ptr::eq(it, self.from))
                        && self.cx.short(sibling.range()) != self.element
                    {
                        self.found = Some((sibling, e));
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut moves =
        Moves { cx, element: cx.short(element.range()), from, found: None, whole_moved: false, steps: 20_000 };
    moves.visit_body(&f.body);
    if moves.whole_moved {
        return None;
    }
    let (sibling, call) = moves.found?;
    let Expr::Call(c) = call else { return None };
    let Expr::Attribute(a) = &*c.func else { return None };
    let to = match a.attr.as_str() {
        "cuda" => ".cuda()".to_string(),
        _ => {
            let device = c.arguments.args.first().filter(|d| names_a_device(cx, d)).or_else(|| keyword(c, "device"))?;
            format!(".to({})", cx.text(device.range()))
        }
    };
    Some(Sibling(cx.short(sibling.range()), c.range(), to))
}

/// The sibling of a batch element that its loop moves to the device: the sibling as written, the
/// move, and the move of its device alone (`.to(device)`, `.cuda()`).
#[derive(Clone)]
struct Sibling(String, ruff_text_size::TextRange, String);

/// The call that makes a `DataLoader(..)`'s dataset: `TensorDataset(..)` in
/// `DataLoader(TensorDataset(..))` or through a name bound to it.
fn dataset_call<'e>(cx: &Checker<'_, 'e>, loader: &'e ast::ExprCall) -> Option<&'e ast::ExprCall> {
    match loader.arguments.args.first().or_else(|| keyword(loader, "dataset"))? {
        Expr::Call(c) => Some(c),
        Expr::Name(n) => match cx.model.binding(cx.model.binding_of(n)?).kind {
            BindingKind::Assignment { value: Expr::Call(c), part: Part::Whole, .. } => Some(c),
            _ => None,
        },
        _ => None,
    }
}

/// Does the loader behind `iter` make its batches on the device already: a `TensorDataset` of
/// tensors on the device, a `collate_fn` of the file that moves or makes its batch there, or a
/// file whose loaders a library places (`accelerator.prepare(..)`, Fabric's
/// `setup_dataloaders(..)`)? A defensive move of one element then says nothing of the others.
fn loader_yields_device_tensors(cx: &Checker<'_, '_>, iter: &Expr) -> bool {
    let source = cx.model.source;
    if source.contains(".prepare(") || source.contains("setup_dataloaders(") {
        return true;
    }
    let Some(loader) = loader_of(cx, iter) else { return false };
    if let Some(Expr::Name(collate)) = keyword(loader, "collate_fn")
        && let Some(Callee::Function(f)) = cx.model.callee_of(&Expr::Name(collate.clone()), cx.function)
    {
        let text = cx.text(cx.model.function(f).def.range());
        if text.contains("device") || text.contains(".cuda(") {
            return true;
        }
    }
    let Some(made) = dataset_call(cx, loader) else { return false };
    cx.callee_name(made).is_some_and(|q| q == "torch.utils.data.TensorDataset")
        && made.arguments.args.iter().any(|t| device_evident(cx, t))
}

/// Where a reported tensor was made, seen from the function that uses it.
#[derive(Clone, Copy)]
enum Made<'a> {
    /// In this function: the creation call can take `device=`.
    Here,
    /// In a same-file function this one calls, which returns it.
    Helper(&'a str),
    /// In a function whose body holds this one, read from there.
    Enclosing(&'a str),
    /// In a same-file function this one does not call itself: its result reaches this one
    /// through a name bound elsewhere (at the top level) or through another helper.
    Returned(&'a str),
    /// At the top level of the file (or in a class body).
    TopLevel,
}

fn made<'a>(cx: &Checker<'_, 'a>, origin: &ast::ExprCall) -> Made<'a> {
    let holds = |f: FunctionId, range: ruff_text_size::TextRange| {
        cx.model.function(f).def.range().contains_range(range)
    };
    let Some(current) = cx.function else { return Made::TopLevel };
    if holds(current, origin.range()) {
        return Made::Here;
    }
    let Some((h, fun)) = cx
        .model
        .functions()
        .filter(|(id, _)| holds(*id, origin.range()))
        .min_by_key(|(_, f)| f.def.range().len())
    else {
        return Made::TopLevel;
    };
    let name = fun.def.name.as_str();
    if holds(h, cx.model.function(current).def.range()) {
        return Made::Enclosing(name);
    }
    let called_here = cx.model.calls.iter().any(|site| {
        site.function == Some(current)
            && matches!(cx.model.callee(site.call, Some(current)), Some(Callee::Function(f)) if f == h)
    });
    if called_here { Made::Helper(name) } else { Made::Returned(name) }
}

/// The creation call a tensor comes from, when it was made on a fixed device and not moved
/// since.
fn fixed_origin<'e>(cx: &Checker<'_, 'e>, e: &'e Expr, depth: usize) -> Option<(&'e ast::ExprCall, Fixed)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let next = |e: &'e Expr| fixed_origin(cx, e, depth + 1);
    match e {
        Expr::Call(c) => {
            if let Some(q) = cx.callee_name(c) {
                if api::is_creation(&q) {
                    if on_cpu_side(cx, c.range()) {
                        return None;
                    }
                    return fixed_creation(cx, c, &q).map(|how| (c, how));
                }
                // `torch.sum(t)` of every element: 0-dim, which CUDA ops take from the CPU.
                if q.strip_prefix("torch.").is_some_and(|n| REDUCTIONS.contains(&n))
                    && c.arguments.args.len() <= 1
                    && !has_dim(c)
                {
                    return None;
                }
                // `repeat(f, 'f -> b f d', ..)`: the same tensor, rearranged.
                if api::keeps_its_input(&q) {
                    return next(c.arguments.args.first()?);
                }
                if api::returns_tensor(&q) && !q.ends_with("_like") {
                    // The origin first: most operands have none, and asking whether an argument
                    // is on the inputs' device follows its whole chain of bindings.
                    let args = &c.arguments.args;
                    let origin = args.iter().find_map(next)?;
                    return (!args.iter().any(|a| device_side(cx, a, depth + 1))).then_some(origin);
                }
                return None;
            }
            // A helper of this file whose every return value was made on a fixed device
            // (`def causal_mask(n): return torch.ones(n, n).tril()`): the tensor comes from there.
            // Or a method of a model of this file's class called from outside
            // (`h = rnn.init_hidden(n)` with `rnn = RNN().to(device)`).
            let helper = match cx.model.callee(c, cx.function) {
                Some(Callee::Function(f)) => Some(f),
                _ => match &*c.func {
                    Expr::Attribute(a) => instance_class(cx, &a.value).and_then(|k| cx.model.method(k, a.attr.as_str())),
                    _ => None,
                },
            };
            if let Some(f) = helper {
                let mut origin = None;
                for r in &cx.model.function(f).returns {
                    let found = next(r)?;
                    origin.get_or_insert(found);
                }
                return origin;
            }
            let Expr::Attribute(a) = &*c.func else { return None };
            match a.attr.as_str() {
                "to" => {
                    let target = c.arguments.args.first().or_else(|| keyword(c, "device"));
                    match target {
                        None => next(&a.value),
                        Some(t) if is_dtype(cx, t) || is_cpu_device(cx, t) => {
                            next(&a.value)
                        }
                        Some(_) => None,
                    }
                }
                // `type_as(x)` takes `x`'s type, which includes its device.
                "cuda" | "type_as" | "new_zeros" | "new_ones" | "new_full" | "new_empty" | "new_tensor" => {
                    None
                }
                // `t.sum()` of every element is 0-dim: CUDA ops take it from the CPU.
                m if reduces_to_0_dim(m, c) => None,
                m if api::tensor_method_returns_tensor(m) => next(&a.value),
                _ => None,
            }
        }
        Expr::Name(n) => {
            let b = cx.model.binding(cx.model.binding_of(n)?);
            match b.kind {
                BindingKind::Assignment { value, part: Part::Whole, .. } => next(value),
                _ => None,
            }
        }
        Expr::BinOp(b) => {
            if b.op == ast::Operator::Mod {
                return None;
            }
            let (l, r) = (&*b.left, &*b.right);
            let origin = next(l).or_else(|| next(r))?;
            (!device_side(cx, l, depth + 1) && !device_side(cx, r, depth + 1)).then_some(origin)
        }
        Expr::Compare(c) => {
            let origin = next(&c.left)?;
            (!c.comparators.iter().any(|r| device_side(cx, r, depth + 1))).then_some(origin)
        }
        Expr::UnaryOp(u) => next(&u.operand),
        Expr::Subscript(s) => next(&s.value),
        _ => None,
    }
}

/// The class of this file that a name holds an instance of: `rnn` bound to `RNN(..)`, also
/// moved or switched on the way (`RNN(..).to(device).eval()`).
fn instance_class(cx: &Checker<'_, '_>, e: &Expr) -> Option<crate::python::model::ClassId> {
    let Expr::Name(n) = e else { return None };
    let BindingKind::Assignment { value, part: Part::Whole, .. } = cx.model.binding(cx.model.binding_of(n)?).kind
    else {
        return None;
    };
    let chain = call_chain(value);
    let (made, moves) = chain.split_last()?;
    let moves_only = moves.iter().all(|m| {
        matches!(&*m.func, Expr::Attribute(a) if api::module_method_returns_self(a.attr.as_str()))
    });
    match cx.model.callee(made, cx.function) {
        Some(Callee::Class(class)) if moves_only => Some(class),
        _ => None,
    }
}

/// Where a CPU tensor that is indexed comes from.
#[derive(Clone, Copy)]
enum CpuOrigin<'e> {
    /// A creation call with no device, or the CPU.
    Made(&'e ast::ExprCall, Fixed),
    /// `x.cpu()` or `x.to("cpu")`.
    Moved(&'e ast::ExprCall),
}

impl<'e> CpuOrigin<'e> {
    fn call(self) -> &'e ast::ExprCall {
        match self {
            CpuOrigin::Made(c, _) | CpuOrigin::Moved(c) => c,
        }
    }
}

/// The CPU tensor `e` is (followed through names, views and in-place updates), and where it
/// came from.
fn cpu_origin<'e>(cx: &Checker<'_, 'e>, e: &'e Expr, depth: usize) -> Option<CpuOrigin<'e>> {
    if depth > MAX_DEPTH {
        return None;
    }
    match e {
        Expr::Call(c) => {
            if let Expr::Attribute(a) = &*c.func {
                let target = c.arguments.args.first().or_else(|| keyword(c, "device"));
                let to_cpu = match a.attr.as_str() {
                    "cpu" => c.arguments.args.is_empty(),
                    "to" => target.is_some_and(|t| is_cpu_device(cx, t)),
                    _ => false,
                };
                if to_cpu {
                    return Some(CpuOrigin::Moved(c));
                }
                // `.cpu().to(torch.float32)`: a new dtype, the same place.
                if a.attr.as_str() == "to" && target.is_some_and(|t| is_dtype(cx, t)) {
                    return cpu_origin(cx, &a.value, depth + 1);
                }
                if cx.callee_name(c).is_none()
                    && api::tensor_method_returns_tensor(a.attr.as_str())
                    && !reduces_to_0_dim(a.attr.as_str(), c)
                    && !matches!(a.attr.as_str(), "to" | "cuda" | "type_as" | "type")
                    && !a.attr.starts_with("new_")
                {
                    return cpu_origin(cx, &a.value, depth + 1);
                }
            }
            fixed_origin(cx, e, depth + 1).map(|(c, how)| CpuOrigin::Made(c, how))
        }
        Expr::Name(n) => {
            let b = cx.model.binding(cx.model.binding_of(n)?);
            match b.kind {
                BindingKind::Assignment { value, part: Part::Whole, .. } => cpu_origin(cx, value, depth + 1),
                // `x /= x.norm(..)`: still where `x` was, unless the update brings the device in.
                BindingKind::AugAssignment { value, .. } if !device_evident(cx, value) => {
                    match cx.model.binding(b.shadowed?).kind {
                        BindingKind::Assignment { value, part: Part::Whole, .. } => cpu_origin(cx, value, depth + 1),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The finding for `sub`, a CPU tensor from `origin` indexed with `index` (the whole index, or
/// the part of it that is on the device).
fn index_finding(cx: &Checker<'_, '_>, origin: CpuOrigin<'_>, sub: &ast::ExprSubscript, index: &Expr) -> Finding {
    let tensor = cx.short(sub.value.range());
    let index_expr = index;
    let index = cx.short(index_expr.range());
    let (message, label) = match origin {
        CpuOrigin::Made(c, how) => {
            let callee = cx
                .model
                .canonical_name(&c.func)
                .map(|q| q.into_owned())
                .unwrap_or_else(|| cx.short(c.func.range()));
            let place = made_on(cx, c, how);
            (
                format!("`{callee}` makes `{tensor}` on {place}, and it is indexed with `{index}`, a tensor on the device"),
                "made on the CPU",
            )
        }
        CpuOrigin::Moved(_) => (
            format!("`{tensor}` is moved to the CPU here, and then indexed with `{index}`, a tensor on the device"),
            "moved to the CPU",
        ),
    };
    Finding::new(&registry::D001, range(origin.call().range()), message)
        .label(label)
        .related(
            range(sub.range()),
            "indexed here: on a GPU run PyTorch raises \"indices should be either on cpu or on the same device as the indexed tensor\"",
        )
        .help({
            let keep = match origin {
                CpuOrigin::Made(..) => "make it on the index's device (`device=`)",
                CpuOrigin::Moved(_) => "leave out the move to the CPU",
            };
            let text = cx.text(index_expr.range());
            // The index as written, when it is short enough to quote whole.
            let moved_index = if text.len() > 40 || text.contains('\n') {
                "the index moved to the CPU (`.cpu()`)".to_string()
            } else if matches!(index_expr, Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_) | Expr::Call(_)) {
                format!("`{text}.cpu()`")
            } else {
                format!("`({text}).cpu()`")
            };
            format!("{keep}, or index with {moved_index}")
        })
}

/// Is `e` a tensor on the inputs' device: an input, a module's output, a parameter or buffer of
/// the module, or computed from those?
fn device_side(cx: &Checker<'_, '_>, e: &Expr, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let next = |e: &Expr| device_side(cx, e, depth + 1);
    // `index_tuple = (rows.to(i.device), i, cols.to(i.device))`: a tuple of indices.
    if let Some(elts) = tuple_literal(cx, e) {
        return elts.iter().any(next);
    }
    if matches!(cx.kind_of(e), Kind::Scalar | Kind::Other | Kind::Device | Kind::Numpy) {
        return false;
    }
    match e {
        Expr::Name(n) => {
            let Some(id) = cx.model.binding_of(n) else { return false };
            let b = cx.model.binding(id);
            match b.kind {
                BindingKind::Parameter { function: Some(f), position, variadic: false, default, .. } => {
                    let fun = cx.model.function(f);
                    let is_receiver = position == 0 && fun.receiver == Some(b.name);
                    let scalar_default =
                        matches!(default, Some(Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::StringLiteral(_)));
                    !is_receiver && !scalar_default && callers_pass_device_tensors(cx, f, position, b.name, depth)
                }
                BindingKind::Assignment { value: Expr::Call(c), part: Part::Element(i), .. }
                    if cx.model.callee(c, cx.function).is_some() =>
                {
                    helper_element_follows(cx, &c.func, i, depth)
                }
                BindingKind::Assignment { value, .. } => next(value),
                BindingKind::AugAssignment { value, .. } => {
                    next(value) || b.shadowed.is_some_and(|s| matches!(cx.model.binding(s).kind, BindingKind::Assignment { value, .. } if next(value)))
                }
                _ => false,
            }
        }
        Expr::Attribute(a) => {
            if let Some(class) = cx.types.receiver_class(&a.value) {
                return cx.types.class_attrs(class, a.attr.as_str()).iter().any(|x| match x.how {
                    AttrHow::Buffer { .. } | AttrHow::Parameter | AttrHow::Module => true,
                    AttrHow::Assign => x.value.is_some_and(|v| match v {
                        Expr::Call(c) => cx
                            .callee_name(c)
                            .is_some_and(|q| api::is_parameter_class(&q) || api::is_module_class(&q)),
                        _ => false,
                    }),
                    _ => false,
                });
            }
            matches!(a.attr.as_str(), "T" | "mT" | "data" | "real" | "imag") && next(&a.value)
        }
        Expr::Call(c) => {
            if cx.kind_of(&c.func) == Kind::Module {
                return true;
            }
            if let Some(q) = cx.callee_name(c) {
                if api::is_creation(&q) {
                    return keyword(c, "device").is_some_and(|d| literal_device(cx, d).is_none());
                }
                // `qs, ks, vs = map(self.split_heads, qkv)`: a helper of this file applied to each
                // element follows them when its result follows its input.
                if q == "builtins.map" {
                    let [f, iterables @ ..] = &c.arguments.args[..] else { return false };
                    return helper_follows(cx, f, depth) && iterables.iter().any(next);
                }
                if api::keeps_its_input(&q) {
                    return c.arguments.args.first().is_some_and(next);
                }
                if api::returns_tensor(&q) {
                    return c.arguments.args.iter().any(|a| match a {
                        Expr::List(l) => l.elts.iter().any(next),
                        Expr::Tuple(t) => t.elts.iter().any(next),
                        other => next(other),
                    });
                }
                return false;
            }
            if cx.model.callee(c, cx.function).is_some() {
                return helper_follows(cx, &c.func, depth);
            }
            let Expr::Attribute(a) = &*c.func else { return false };
            match a.attr.as_str() {
                "cpu" | "numpy" | "item" | "tolist" => false,
                "cuda" => true,
                "type_as" => c.arguments.args.first().is_some_and(next),
                "to" => match c.arguments.args.first().or_else(|| keyword(c, "device")) {
                    Some(t) if is_dtype(cx, t) => next(&a.value),
                    Some(t) => !is_cpu_device(cx, t),
                    None => next(&a.value),
                },
                m if api::tensor_method_returns_tensor(m) => next(&a.value),
                _ => false,
            }
        }
        Expr::BinOp(b) => next(&b.left) || next(&b.right),
        Expr::Compare(c) => next(&c.left) || c.comparators.iter().any(next),
        Expr::UnaryOp(u) => next(&u.operand),
        Expr::Subscript(s) => next(&s.value),
        Expr::If(i) => next(&i.body) || next(&i.orelse),
        _ => false,
    }
}

/// The elements of a tuple written out (`(a, b)`), or of a name bound once to one.
fn tuple_literal<'e>(cx: &Checker<'_, 'e>, e: &'e Expr) -> Option<&'e [Expr]> {
    match e {
        Expr::Tuple(t) => Some(&t.elts),
        Expr::Name(n) => match cx.model.binding(cx.model.binding_of(n)?).kind {
            BindingKind::Assignment { value: Expr::Tuple(t), part: Part::Whole, .. } => Some(&t.elts),
            _ => None,
        },
        _ => None,
    }
}

/// The creation an argument `a` of the model call `c` comes from, when it is made on the host.
/// The model's main input, `torch.tensor(xs)` of data of unknown kind, counts too: it is a batch
/// (a 0-dim tensor from a Python scalar, which CUDA ops take from the CPU, is no model input).
fn host_made_input<'e>(cx: &Checker<'_, 'e>, c: &'e ast::ExprCall, a: &'e Expr) -> Option<(&'e ast::ExprCall, Fixed)> {
    // The main input: the first positional argument, or the first keyword when there is none.
    let main = c.arguments.args.first().or_else(|| c.arguments.keywords.first().map(|k| &k.value));
    if main.is_some_and(|m| std::ptr::eq(m, a)) {
        // `torch.tensor(img).unsqueeze(0)`: through the views and conversions after it.
        let mut at = a;
        while let Expr::Call(call) = at
            && let Expr::Attribute(m) = &*call.func
            && cx.callee_name(call).is_none()
            && api::tensor_method_returns_tensor(m.attr.as_str())
            && !matches!(m.attr.as_str(), "to" | "cuda" | "type_as")
        {
            at = &m.value;
        }
        if let Expr::Call(t) = at
            && keyword(t, "device").is_none()
            && t.arguments.args.first().is_some_and(|d| {
                matches!(d, Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_))
                    && cx.kind_of(d) != Kind::Tensor
                    && !device_evident(cx, d)
            })
            && cx.callee_name(t).is_some_and(|q| q == "torch.tensor")
        {
            return Some((t, Fixed::Default));
        }
    }
    fixed_origin(cx, a, 0)
}

/// The calls of the chain the module bound to `model` was made with, outermost first:
/// `.eval()`, `.to(device)`, `Net(..)` for `model = Net(..).to(device).eval()`.
fn made_with<'a>(cx: &Checker<'_, 'a>, model: BindingId) -> Vec<&'a ast::ExprCall> {
    match cx.model.binding(model).kind {
        BindingKind::Assignment { value, part: Part::Whole, .. } => call_chain(value),
        _ => Vec::new(),
    }
}

/// The calls of the method chain `e` is, outermost first: `.eval()`, `.to(d)`, `Net()` for
/// `Net().to(d).eval()`.
fn call_chain(e: &Expr) -> Vec<&ast::ExprCall> {
    let mut chain = Vec::new();
    let mut at = e;
    while let Expr::Call(call) = at {
        chain.push(call);
        let Expr::Attribute(a) = &*call.func else { break };
        at = &a.value;
    }
    chain
}

/// `self.model = Net().to(device)`, assigned once in the class and never moved back in place
/// (`self.model.cpu()`): the calls of its chain, outermost first, and where it is moved.
fn attribute_moved_to_accelerator<'a>(
    cx: &Checker<'_, 'a>,
    class: crate::python::model::ClassId,
    name: &str,
) -> Option<(Vec<&'a ast::ExprCall>, ruff_text_size::TextRange)> {
    let [assign] = cx.types.class_attrs(class, name)[..] else { return None };
    if assign.how != AttrHow::Assign {
        return None;
    }
    let chain = call_chain(assign.value?);
    // The outermost move of the chain decides.
    let moved = chain.iter().find_map(|call| move_target(cx, call).map(|to| (to, call.range())))?;
    if !moved.0 {
        return None;
    }
    let moved_back = cx.model.calls.iter().any(|site| {
        move_target(cx, site.call) == Some(false)
            && matches!(&*site.call.func, Expr::Attribute(m)
                if matches!(&*m.value, Expr::Attribute(field) if field.attr.as_str() == name && cx.types.receiver_class(&field.value) == Some(class)))
    });
    (!moved_back).then_some((chain, moved.1))
}

/// Where a move sends a module: `Some(true)` to an accelerator (`.cuda()`, `.to(device)`),
/// `Some(false)` to the CPU (`.cpu()`, `.to("cpu")`), `None` for other calls.
fn move_target(cx: &Checker<'_, '_>, mv: &ast::ExprCall) -> Option<bool> {
    let Expr::Attribute(a) = &*mv.func else { return None };
    let target = || mv.arguments.args.first().or_else(|| keyword(mv, "device"));
    match a.attr.as_str() {
        "cuda" => Some(true),
        "cpu" => Some(false),
        "to" if target().is_some_and(|d| is_cpu_device(cx, d)) => Some(false),
        "to" if target().is_some_and(|d| names_a_device(cx, d)) => Some(true),
        _ => None,
    }
}

/// Where the module bound to `model` is moved to an accelerator before the call `c`, with no move
/// back to the CPU since: made and moved at once (`model = Net().to(device)`, `.cuda()`), or
/// moved in place in the same function (`model.to(device)`: a module's `to` moves it and returns
/// it) in a block that holds the call (not in the other branch of an `if`).
fn moved_to_accelerator(cx: &Checker<'_, '_>, model: BindingId, c: &ast::ExprCall) -> Option<ruff_text_size::TextRange> {
    let body = cx.function.map_or(cx.module_body, |f| &cx.model.function(f).def.body[..]);
    let call_path = branch_path(body, c.start());
    let holds_call = |at: TextSize| {
        let path = branch_path(body, at);
        call_path.starts_with(&path)
    };
    let mut latest: Option<(TextSize, bool, ruff_text_size::TextRange)> = made_with(cx, model)
        .into_iter()
        .find_map(|call| move_target(cx, call).map(|to| (call.start(), to, call.range())))
        .filter(|&(at, _, _)| holds_call(at));
    for site in cx.model.calls.iter().filter(|site| site.function == cx.function && site.call.start() < c.start()) {
        let on_model = matches!(&*site.call.func, Expr::Attribute(a) if matches!(&*a.value, Expr::Name(m) if cx.model.binding_of(m) == Some(model)));
        if !on_model {
            continue;
        }
        if let Some(to) = move_target(cx, site.call)
            && holds_call(site.call.start())
            && latest.is_none_or(|(at, _, _)| at < site.call.start())
        {
            latest = Some((site.call.start(), to, site.call.range()));
        }
    }
    latest.filter(|&(_, to, _)| to).map(|(_, _, range)| range)
}

/// The branches of compound statements that hold `at`, outermost first: the statement and which
/// of its blocks (`if` body, `else`, ..).
fn branch_path(body: &[Stmt], at: TextSize) -> Vec<(TextSize, usize)> {
    let mut path = Vec::new();
    let mut body = body;
    'down: for _ in 0..crate::python::model::MAX_DEPTH {
        for stmt in body {
            if !stmt.range().contains(at) {
                continue;
            }
            for (i, block) in super::helpers::blocks(stmt).into_iter().enumerate() {
                if block.first().is_some_and(|first| first.start() <= at)
                    && block.last().is_some_and(|last| at < last.end())
                {
                    path.push((stmt.start(), i));
                    body = block;
                    continue 'down;
                }
            }
            break 'down;
        }
        break;
    }
    path
}

/// Does the class's `forward` (of this file) move its first input itself
/// (`x = x.to(self.fc.weight.device)`)?
fn forward_moves_its_input(cx: &Checker<'_, '_>, class: crate::python::model::ClassId) -> bool {
    let Some(forward) = cx.model.method(class, "forward") else { return false };
    let fun = cx.model.function(forward);
    let Some(input) = fun.def.parameters.args.get(1).map(|p| p.parameter.name.as_str()) else { return false };
    cx.model.calls.iter().filter(|site| site.function == Some(forward)).any(|site| {
        matches!(&*site.call.func, Expr::Attribute(a)
            if matches!(a.attr.as_str(), "to" | "cuda") && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == input))
    })
}

/// `v, indices = self.topk(x)`: is element `i` of a tuple that a function of this file returns
/// (`return values, indices`) on the input's device?
fn helper_element_follows(cx: &Checker<'_, '_>, func: &Expr, i: usize, depth: usize) -> bool {
    match cx.model.callee_of(func, cx.function) {
        // `return values, indices`, or `out = (x, idx); return out`.
        Some(Callee::Function(f)) => cx
            .model
            .function(f)
            .returns
            .iter()
            .any(|r| tuple_literal(cx, r).and_then(|elts| elts.get(i)).is_some_and(|e| device_side(cx, e, depth + 1))),
        _ => false,
    }
}

/// Is `func` a function of this file one of whose `return`s is on the input's device
/// (`def split_heads(self, x): return x.view(..).permute(..)`)? Its parameters count as the
/// input's when its callers pass device tensors, as everywhere in this rule.
fn helper_follows(cx: &Checker<'_, '_>, func: &Expr, depth: usize) -> bool {
    match cx.model.callee_of(func, cx.function) {
        Some(Callee::Function(f)) => {
            cx.model.function(f).returns.iter().any(|r| device_side(cx, r, depth + 1))
        }
        _ => false,
    }
}

const DEFAULT_DEVICE: &str = "the default device (no `device=`)";

/// Where a creation makes its tensor, as the messages say it: the default device for a factory
/// given no `device=`, the CPU for one given the CPU and for `from_numpy` and the typed
/// constructors, which make CPU tensors whatever the default device.
fn made_on(cx: &Checker<'_, '_>, origin: &ast::ExprCall, how: Fixed) -> &'static str {
    match how {
        Fixed::Default if cx.model.canonical_name(&origin.func).is_some_and(|q| api::creation_takes_device(&q)) => {
            DEFAULT_DEVICE
        }
        _ => "the CPU",
    }
}

fn finding(cx: &Checker<'_, '_>, origin: &ast::ExprCall, how: Fixed, used: &Expr) -> Finding {
    let callee = cx
        .model
        .canonical_name(&origin.func)
        .map(|q| q.into_owned())
        .unwrap_or_else(|| cx.short(origin.func.range()));
    let function = cx.function_name().unwrap_or("forward");
    let place = made_on(cx, origin, how);
    let label = if place == DEFAULT_DEVICE { "made on the default device" } else { "made on the CPU" };
    let input = first_tensor_parameter(cx);
    let x = input.as_ref().map_or("x", |(x, _)| x.as_str());
    let made = made(cx, origin);
    let help = match made {
        // Made in a helper this function calls: the fix is a device argument of the helper,
        // which no edit at the creation can supply.
        Made::Helper(h) if input.is_some() => {
            format!(
                "give `{h}` a `device` argument, make the tensor with `device=device`, and pass `{x}.device`"
            )
        }
        Made::Helper(h) => format!(
            "give `{h}` a `device` argument, make the tensor with `device=device`, and pass the device of the tensor it is used with"
        ),
        Made::Enclosing(h) | Made::Returned(h) => format!(
            "give `{h}` a `device` argument and make the tensor with `device=device`, or move it where `{function}` uses it (`.to({x}.device)`)"
        ),
        Made::TopLevel => format!(
            "keep it on the module as a buffer (`self.register_buffer(..)` in `__init__`), which `model.to(device)` moves, or move it where `{function}` uses it (`.to({x}.device)`)"
        ),
        Made::Here if input.is_some() => {
            format!(
                "pass `device={x}.device`, or build it from the input (`{x}.new_zeros(..)`, `torch.zeros_like({x})`)"
            )
        }
        Made::Here => "pass the device of the tensor it is used with (`device=x.device`)".to_string(),
    };
    let tail = format!("makes a tensor on {place}, not on the device of its inputs");
    let message = match made {
        Made::Here => format!("`{callee}` in `{function}` {tail}"),
        Made::Helper(h) => format!("`{callee}` in `{h}` (called by `{function}`) {tail}"),
        Made::Enclosing(h) => format!("`{callee}` in `{h}` (read by `{function}`, defined inside it) {tail}"),
        Made::Returned(h) => format!("`{callee}` in `{h}` (whose result `{function}` uses) {tail}"),
        Made::TopLevel => format!("`{callee}` at the top level of the file (used by `{function}`) {tail}"),
    };
    // Only a creation in this function can take its input's device.
    let takes_device = cx.model.canonical_name(&origin.func).is_some_and(|q| api::creation_takes_device(&q));
    let fix = input.filter(|_| matches!(made, Made::Here)).map(|(x, annotated)| {
        let edit = match keyword(origin, "device") {
            // `torch.from_numpy(a)` takes no `device` (a typed constructor only the CPU): the
            // tensor is moved once made.
            _ if !takes_device => {
                let end = origin.end().to_usize();
                Edit { range: end..end, replacement: format!(".to({x}.device)") }
            }
            Some(d) => Edit { range: range(d.range()), replacement: format!("{x}.device") },
            None => {
                let close = origin.arguments.end().to_usize().saturating_sub(1);
                let between = cx.model.source.get(origin.arguments.start().to_usize()..close).unwrap_or("");
                let separator = if between.trim_end().ends_with([',', '(']) { " " } else { ", " };
                let separator = if between.trim() == "(" { "" } else { separator };
                Edit { range: close..close, replacement: format!("{separator}device={x}.device") }
            }
        };
        let applicability = if annotated { Applicability::Safe } else { Applicability::Unsafe };
        Fix::new(applicability, format!("make it on `{x}.device`"), vec![edit])
    });
    Finding::new(&registry::D001, range(origin.range()), message)
        .label(label)
        .related(range(used.range()), "used with a tensor on the inputs' device here")
        .help(help)
        .fix(fix)
}

/// `nn.BatchNorm2d(c)(x)` in `forward`: a layer made at every call has fresh parameters on the
/// CPU, which no optimizer trains and `model.to(device)` never moved. Not reported for layers
/// that hold no tensors (`nn.ReLU()`), a layer moved where it is made (`.to(x.device)`), or one
/// kept on the module (`self.proj = nn.Linear(..)`, built lazily at the first call).
fn layer_made_in_forward(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> Option<Finding> {
    if !cx.in_forward() || !cx.in_module_method() {
        return None;
    }
    let q = cx.callee_name(c)?;
    let class = q.strip_prefix("torch.nn.")?;
    if !has_parameters(class, c) || keyword(c, "device").is_some() {
        return None;
    }
    // `nn.Linear(..).to(x.device)` (the call is the receiver of the move), or kept on the module
    // or anywhere else than a plain local (`self.proj = nn.Linear(..)`, built lazily).
    let moved = cx.parents.iter().rev().take(2).any(|n| {
        matches!(n, Node::Expr(Expr::Attribute(a)) if api::is_move_or_convert(a.attr.as_str()) && a.value.range() == c.range())
    });
    // Kept anywhere but in a plain local, or handed to the caller (`return nn.Linear(..)` in a
    // helper that builds a lazily made layer): where it lives is decided there.
    let kept = match cx.statement() {
        Some(Stmt::Assign(a)) => a.targets.iter().any(|t| !matches!(t, Expr::Name(_))),
        Some(Stmt::AnnAssign(a)) => !matches!(&*a.target, Expr::Name(_)),
        Some(Stmt::Return(_)) => true,
        _ => false,
    };
    // `proj = nn.Linear(..)` then `proj.to(x.device)`: moved in place.
    let moved_later = match cx.statement() {
        Some(Stmt::Assign(a)) => a.targets.iter().any(|t| {
            let Expr::Name(n) = t else { return false };
            cx.model.calls.iter().any(|site| {
                site.function == cx.function
                    && matches!(&*site.call.func, Expr::Attribute(m)
                        if api::is_move_or_convert(m.attr.as_str())
                            && matches!(&*m.value, Expr::Name(r) if r.id == n.id))
            })
        }),
        _ => false,
    };
    if moved || kept || moved_later {
        return None;
    }
    let function = cx.function_name().unwrap_or("forward");
    let field = class.to_ascii_lowercase();
    Some(
        Finding::new(
            &registry::D001,
            range(c.range()),
            format!(
                "`{q}` made in `{function}` has new parameters on the CPU at every call: `model.to(device)` never moved them and no optimizer trains them"
            ),
        )
        .label("a layer with parameters, made at every call")
        .help(format!(
            "make it once in `__init__` (`self.{field} = nn.{class}(..)`) and call `self.{field}(x)` here: it is then moved with the model and trained"
        )),
    )
}

/// Does a `torch.nn` layer made by this call hold parameters: a layer with weights, unless told
/// not to have them (`affine=False`, `elementwise_affine=False`)? Containers of other modules,
/// activations, pooling and losses hold none of their own.
fn has_parameters(class: &str, c: &ast::ExprCall) -> bool {
    let off = |name: &str| keyword(c, name).is_some_and(|v| matches!(v, Expr::BooleanLiteral(b) if !b.value));
    match class {
        "BatchNorm1d" | "BatchNorm2d" | "BatchNorm3d" | "GroupNorm" | "SyncBatchNorm" => !off("affine"),
        // Instance norms have no weights unless asked (`affine=True`).
        "InstanceNorm1d" | "InstanceNorm2d" | "InstanceNorm3d" => {
            keyword(c, "affine").is_some_and(|v| matches!(v, Expr::BooleanLiteral(b) if b.value))
        }
        "LayerNorm" | "RMSNorm" => !off("elementwise_affine"),
        "Linear" | "Bilinear" | "Conv1d" | "Conv2d" | "Conv3d" | "ConvTranspose1d" | "ConvTranspose2d"
        | "ConvTranspose3d" | "Embedding" | "EmbeddingBag" | "PReLU" | "LSTM" | "GRU" | "RNN" | "LSTMCell"
        | "GRUCell" | "RNNCell" | "MultiheadAttention" | "Transformer" | "TransformerEncoderLayer"
        | "TransformerDecoderLayer" => true,
        _ => false,
    }
}

/// `torch.LongTensor([ids], device=device)`: a legacy typed constructor makes CPU tensors only
/// and raises ("legacy constructor expects device type: cpu") when the device is anything else,
/// wherever the call is. Not reported for a literal CPU device.
fn typed_constructor_given_a_device(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> Option<Finding> {
    let q = cx.callee_name(c)?;
    if !api::is_typed_constructor(&q) {
        return None;
    }
    let device = keyword(c, "device")?;
    if is_cpu_device(cx, device) || in_device_branch(cx) || on_cpu_side(cx, c.range()) {
        return None;
    }
    let class = q.rsplit('.').next()?;
    // The dtype each constructor makes; `torch.Tensor` makes the default one.
    let dtype = match class {
        "Tensor" => "get_default_dtype()",
        "FloatTensor" => "float32",
        "LongTensor" => "long",
        "IntTensor" => "int32",
        "ShortTensor" => "int16",
        "CharTensor" => "int8",
        "BoolTensor" => "bool",
        "ByteTensor" => "uint8",
        "DoubleTensor" => "float64",
        "HalfTensor" => "float16",
        "BFloat16Tensor" => "bfloat16",
        _ => return None,
    };
    // How the file names torch (`torch.LongTensor`, `th.LongTensor`); `torch` otherwise.
    let module = match &*c.func {
        Expr::Attribute(a) => match &*a.value {
            Expr::Name(m) => Some(m.id.as_str()),
            _ => None,
        },
        _ => None,
    };
    let shown = module.unwrap_or("torch");
    let shown_device = cx.short(device.range());
    // `torch.tensor(data, dtype=.., device=..)` makes the same values on the device; only for
    // data given as a list (`torch.LongTensor(3, 4)` is a shape: `torch.empty` then), and where
    // the file's name for torch is known.
    let data = c.arguments.args.len() == 1 && matches!(c.arguments.args.first(), Some(Expr::List(_) | Expr::ListComp(_)));
    let fix = module.filter(|_| data).map(|module| {
        let at = device.range().start().to_usize();
        let keyword_start = c
            .arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|n| n.as_str() == "device"))
            .map_or(at, |k| k.start().to_usize());
        // Unsafe: a list of tensors on another device, which the constructor took, may not
        // convert the same way.
        Fix::new(
            Applicability::Unsafe,
            format!("make it with `{module}.tensor(.., dtype={module}.{dtype})`"),
            vec![
                Edit { range: range(c.func.range()), replacement: format!("{module}.tensor") },
                Edit { range: keyword_start..keyword_start, replacement: format!("dtype={module}.{dtype}, ") },
            ],
        )
    });
    let help = if data {
        format!("make it with `{shown}.tensor(data, dtype={shown}.{dtype}, device={shown_device})`")
    } else {
        format!("make it with `{shown}.empty(shape, dtype={shown}.{dtype}, device={shown_device})`, or `{shown}.tensor(data, ..)` for data")
    };
    Some(
        Finding::new(
            &registry::D001,
            range(c.range()),
            format!("`{q}` makes tensors on the CPU only: given `device={shown_device}` it raises on a GPU run"),
        )
        .label("a legacy constructor, which takes no device but the CPU")
        .help(help)
        .fix(fix),
    )
}

/// The function's first parameter that may be a tensor, and whether it is annotated as one.
fn first_tensor_parameter(cx: &Checker<'_, '_>) -> Option<(String, bool)> {
    let fun = cx.model.function(cx.function?);
    fun.def.parameters.posonlyargs.iter().chain(&fun.def.parameters.args).find_map(|p| {
        let name = p.parameter.name.as_str();
        if Some(name) == fun.receiver {
            return None;
        }
        let kind = p.parameter.annotation.as_deref().map(|a| cx.types.annotation_kind(a));
        match kind {
            Some(Kind::Tensor) => Some((name.to_string(), true)),
            None | Some(Kind::Unknown) if p.default.is_none() => Some((name.to_string(), false)),
            _ => None,
        }
    })
}

/// Does some caller pass a tensor on the inputs' device for this parameter? A forward pass's
/// inputs are; a helper's parameter is when a caller in this file passes one, or when no caller
/// in this file is known (its callers are elsewhere).
fn callers_pass_device_tensors(
    cx: &Checker<'_, '_>,
    f: crate::python::model::FunctionId,
    position: usize,
    name: &str,
    depth: usize,
) -> bool {
    let fun = cx.model.function(f);
    if fun.name() == "forward" {
        return true;
    }
    let callers = &cx.facts.calls_to[f.index()];
    for site in callers.iter().map(|&i| &cx.model.calls[i]) {
        // `self.helper(x)` passes `self` implicitly.
        let shift = usize::from(matches!(&*site.call.func, Expr::Attribute(_)) && fun.receiver.is_some());
        let arg = position
            .checked_sub(shift)
            .and_then(|p| site.call.arguments.args.get(p))
            .or_else(|| site.call.arguments.find_keyword(name).map(|k| &k.value));
        match arg {
            Some(a) if device_side(cx, a, depth + 1) => return true,
            Some(_) => {}
            // Not passed here (a default, `*args`): unknown.
            None => return true,
        }
    }
    callers.is_empty()
}
