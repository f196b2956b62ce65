//! D004 for PyTorch code. What it finds, why, and its fixes: `d004_unmoved_tensor_field.md` beside this file (what
//! `devcheck explain D004` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::name::Name;
use ruff_python_ast::{self as ast, Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::api;
use crate::python::checker::{Checker, Node, Reads, Rule};
use crate::python::fields::{
    Field, Holds, conversion, may_be_container, module_fields_where, nothing_to_move, registered_elsewhere,
    registered_item_by_item,
};
use crate::python::model::{AttrAssign, AttrHow, BindingId, BindingKind, ClassId, Model, Part, ScopeId};
use crate::python::typing::{Kind, Truth};
use crate::registry;

use super::device_evidence::{device_evident, tensor_indices};
use super::helpers::{Fixed, fixed_creation, keyword, name_binding, provenance, range};


#[derive(Default)]
pub(crate) struct Check {
    /// Reads of `self.name` in forward passes, per class and name: where, and how.
    /// (Names of up to 24 bytes are held inline: a key costs no allocation.)
    uses: FxHashMap<(ClassId, Name), Vec<(TextRange, Read)>>,
    /// Names that are moved somewhere (`criterion.to(device)`, `criterion.cuda()`).
    moved: FxHashSet<BindingId>,
    /// Loss modules built with a CPU tensor: the binding, and the argument.
    criteria: Vec<(BindingId, TextRange, String)>,
    /// `self.table[index]` in a method of a class that is not a module, `index` on the device:
    /// the class, the attribute, the subscript and the index.
    indexed: Vec<(ClassId, Name, TextRange, TextRange)>,
    /// What the file moves, once it is asked ([`FileMoves`]).
    moves: std::cell::OnceCell<FileMoves>,
}

/// How `forward` reads an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// In a computation that needs it on the inputs' device.
    Computes,
    /// Moved where it is read (`self.pe.to(x.device)`), or only its metadata
    /// (`self.pe.shape`), or as an index or mask (`x[self.idx]`): fine on the CPU.
    Harmless,
    /// Walked by a loop (`for freq in self.freq_bands:`) or indexed by a number
    /// (`self.loss_weights[i]`): the elements of a 1-dim tensor are 0-dim, which a computation on
    /// the device takes from the CPU.
    Iterated,
}

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::CALL | Reads::ATTRIBUTE
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, _out: &mut Vec<Finding>) {
        match e {
            Expr::Attribute(a) => self.attribute(cx, e, a),
            Expr::Call(c) => self.call(cx, c),
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        let applied = crate::python::project::applied_in(cx.module_body);
        for (class, _) in cx.model.classes() {
            if cx.types.is_module_class(class) != Truth::Yes || overrides_apply(cx.model, class) {
                continue;
            }
            // Only fields that can be reported are worked out: one assigned a moved parameter
            // (`nn.Parameter(x).to(device)`), and one a forward pass reads that is assigned a
            // tensor made on the host or a plain container.
            let wanted = |name: &str, assigns: &mut dyn Iterator<Item = &AttrAssign<'_>>| {
                let read = self.uses.contains_key(&(class, Name::new(name)));
                for a in assigns {
                    let Some(v) = a.value else { continue };
                    if conversion(v).is_some() || (read && (may_be_container(v) || made_on_host(cx, v))) {
                        return true;
                    }
                }
                false
            };
            for field in module_fields_where(cx, class, wanted) {
                // Another module's `_apply` moves it (YOLO's `Model._apply` moves its head's
                // `stride` and `grid`).
                let class_name = cx.model.class(class).def.name.as_str();
                if matches!(field.holds, Holds::PlainTensor)
                    && (crate::python::project::moved_by(&applied, field.name, class_name)
                        || cx.types.project().moved_by_apply(field.name, class_name))
                {
                    continue;
                }
                let finding = match field.holds {
                    Holds::PlainTensor => self.plain_tensor(cx, class, &field),
                    Holds::UnregisteredParameter => Some(unregistered(&field)),
                    // Read in a forward pass (or what it calls): a container only `__init__`
                    // reads (a factory table whose pick is registered) breaks nothing.
                    Holds::ModulesInPlain { container, parameters }
                        if self.uses.contains_key(&(class, Name::new(field.name))) =>
                    {
                        plain_container(cx, &field, container, parameters)
                    }
                    _ => None,
                };
                out.extend(finding);
            }
        }
        for (class, name, at, index) in &self.indexed {
            let moves = self.moves.get_or_init(|| FileMoves::of(cx));
            out.extend(table_indexed_on_the_device(cx, moves, *class, name, *at, *index));
        }
        if cx.facts.uses_accelerator {
            for (binding, at, class) in &self.criteria {
                if !self.moved.contains(binding) {
                    let name = cx.model.binding(*binding).name;
                    out.push(
                        Finding::new(
                            &registry::D004,
                            range(*at),
                            format!("`{class}` keeps this tensor on the CPU, and `{name}` is never moved to the device"),
                        )
                        .label("made on the CPU")
                        .help(format!(
                            "move the criterion with the model (`{name} = {name}.to(device)`), or make the tensor on the device"
                        )),
                    );
                }
            }
        }
    }
}

impl Check {
    fn attribute(&mut self, cx: &Checker<'_, '_>, e: &Expr, a: &ast::ExprAttribute) {
        if a.ctx != ExprContext::Load {
            return;
        }
        let Some(class) = cx.types.receiver_class(&a.value) else { return };
        let module = cx.types.is_module_class(class) == Truth::Yes;
        if module && !cx.in_forward() {
            return;
        }
        // `self.table[t]` with `t` on the device: PyTorch raises before any later `.to(..)`.
        let index = match cx.parent() {
            Some(Node::Expr(Expr::Subscript(sub))) if std::ptr::eq(&*sub.value, e) => {
                indexed_on_the_device(cx, sub).map(|i| (sub.range(), i))
            }
            _ => None,
        };
        if !module {
            if let Some((at, i)) = index {
                self.indexed.push((class, a.attr.id.clone(), at, i));
            }
            return;
        }
        let read = if index.is_some() { Read::Computes } else { read_of(cx, e) };
        self.uses.entry((class, a.attr.id.clone())).or_default().push((a.range(), read));
    }

    fn call(&mut self, cx: &Checker<'_, '_>, c: &ast::ExprCall) {
        // `criterion.to(device)` / `criterion.cuda()`.
        if let Expr::Attribute(m) = &*c.func
            && matches!(m.attr.as_str(), "to" | "cuda")
            && let Some(b) = name_binding(cx, &m.value)
        {
            self.moved.insert(b);
        }
        // `criterion = nn.CrossEntropyLoss(weight=torch.tensor([..]))`
        let Some(q) = cx.callee_name(c) else { return };
        if !api::is_loss_class(&q) {
            return;
        }
        let weight = keyword(c, "weight").or_else(|| keyword(c, "pos_weight")).or_else(|| {
            c.arguments.args.first().filter(|_| q.ends_with("CrossEntropyLoss") || q.ends_with("NLLLoss"))
        });
        let Some(weight) = weight else { return };
        if cx.kind_of(weight) != Kind::Tensor
            || provenance(cx, weight).on_accelerator
            || !made_on_host(cx, weight)
        {
            return;
        }
        let Some(Node::Stmt(Stmt::Assign(assign))) = cx.parent() else { return };
        let [Expr::Name(target)] = assign.targets.as_slice() else { return };
        if let Some(b) = cx.model.definition_of(target) {
            let class = q.rsplit('.').next().unwrap_or(&q).to_string();
            self.criteria.push((b, weight.range(), format!("nn.{class}")));
        }
    }

    /// `self.name = torch.zeros(..)` made on the host, never assigned again in a forward pass,
    /// and computed with there.
    fn plain_tensor(&self, cx: &Checker<'_, '_>, class: ClassId, field: &Field<'_>) -> Option<Finding> {
        if !field.value.is_some_and(|v| made_on_host(cx, v)) {
            return None;
        }
        // Assigned again in a forward pass: re-homed there (or a cache it rebuilds).
        let reassigned = cx
            .types
            .class_attrs(class, field.name)
            .iter()
            .any(|a| matches!(a.how, AttrHow::Assign | AttrHow::SetAttr) && cx.is_forward(a.method));
        if reassigned {
            return None;
        }
        // Moved by the code itself (`if use_gpu: self.shift = self.shift.cuda()` in `__init__`,
        // `self.table = self.table.to(self.device)`): on the device in a GPU run.
        if self.moves.get_or_init(|| FileMoves::of(cx)).moves(cx, class, field.name) {
            return None;
        }
        let uses = self.uses.get(&(class, Name::new(field.name)))?;
        let flat = field.value.is_some_and(one_dim);
        let (used_at, _) = uses.iter().find(|(_, r)| *r == Read::Computes || (*r == Read::Iterated && !flat))?;
        Some(
            Finding::new(
                &registry::D004,
                range(field.at),
                format!("`self.{}` is a plain tensor attribute: `model.to(device)` does not move it", field.name),
            )
            .label("not a parameter or buffer")
            .related(range(*used_at), "used in the forward pass here")
            .help(format!(
                "register it as a buffer: `self.register_buffer(\"{}\", ..., persistent=False)` (or wrap it in `nn.Parameter` if it is trained)",
                mangled(field.name, cx.model.class(class).def.name.as_str()).unwrap_or_else(|| field.name.to_string())
            ))
            .fix(buffer_fix(cx, field)),
        )
    }
}

/// The part of `sub`'s index that is a tensor on the device by what the code does, outside tests
/// and `with torch.device(..)` blocks.
fn indexed_on_the_device(cx: &Checker<'_, '_>, sub: &ast::ExprSubscript) -> Option<TextRange> {
    if cx.kind.is_test_like() || cx.default_device_set() {
        return None;
    }
    tensor_indices(cx, sub).into_iter().find(|i| device_evident(cx, i)).map(|i| i.range())
}

/// `self.sigmas[t]` in a class that is not a module: every value the class assigns to
/// `self.sigmas` is made on the host, nothing moves it, and `t` is on the device.
fn table_indexed_on_the_device(
    cx: &Checker<'_, '_>,
    moves: &FileMoves,
    class: ClassId,
    name: &str,
    at: TextRange,
    index: TextRange,
) -> Option<Finding> {
    if overrides_apply(cx.model, class) {
        return None;
    }
    let assigns = cx.types.class_attrs(class, name);
    let mut made = None;
    for a in &assigns {
        match (a.how, a.value) {
            (AttrHow::Update, _) | (AttrHow::Assign, Some(Expr::NoneLiteral(_))) => {}
            (AttrHow::Assign, Some(v)) if made_on_host(cx, v) => {
                made.get_or_insert(*a);
            }
            _ => return None,
        }
    }
    let made = made?;
    // Moved from outside the class (`sched.sigmas = sched.sigmas.to(device)`), or by a loop of
    // `setattr(self, name, getattr(self, name).to(device))`.
    if moves.moves(cx, class, name) {
        return None;
    }
    let method = cx.model.function(made.method).name();
    let tensor = cx.short(made.range);
    let index_text = cx.short(index);
    Some(
        Finding::new(
            &registry::D004,
            range(at),
            format!("`{tensor}` is made on the host in `{method}`, and it is indexed here with `{index_text}`, a tensor on the device"),
        )
        .label("a host tensor indexed with a device tensor")
        .related(range(made.range), "made on the host here: nothing moves it to the device")
        .help(format!(
            "move it to the index's device before indexing (`{tensor}.to(device)[..]`), make it on the device the object is used with, or index with the index moved to the CPU (`.cpu()`)"
        )),
    )
}

/// What the file moves to a device, worked out once per file: the attributes assigned a moved
/// value (`x.name = <.. .to(..) ..>` on any receiver), and the classes whose own methods call
/// `setattr(self, .., <.. .to(..) ..>)` (whose name may be a loop's variable).
#[derive(Default)]
struct FileMoves {
    names: FxHashSet<String>,
    setattr_in: Vec<TextRange>,
}

impl FileMoves {
    fn of(cx: &Checker<'_, '_>) -> FileMoves {
        use ruff_python_ast::statement_visitor::{StatementVisitor, walk_stmt};
        struct Walk {
            found: FileMoves,
            depth: usize,
        }
        fn moves(e: &Expr) -> bool {
            super::helpers::any_subexpr_is(e, |x| {
                matches!(x, Expr::Call(c) if matches!(&*c.func, Expr::Attribute(a) if matches!(a.attr.as_str(), "to" | "cuda")))
            })
        }
        impl<'a> StatementVisitor<'a> for Walk {
            fn visit_stmt(&mut self, s: &'a Stmt) {
                if self.depth > crate::python::model::MAX_DEPTH {
                    return;
                }
                match s {
                    Stmt::Assign(a) if moves(&a.value) => {
                        for t in &a.targets {
                            if let Expr::Attribute(at) = t {
                                self.found.names.insert(at.attr.to_string());
                            }
                        }
                    }
                    Stmt::Expr(e)
                        if matches!(&*e.value, Expr::Call(c)
                            if matches!(&*c.func, Expr::Name(n) if n.id.as_str() == "setattr")
                                && c.arguments.args.get(2).is_some_and(moves)) =>
                    {
                        self.found.setattr_in.push(e.range());
                    }
                    _ => {}
                }
                self.depth += 1;
                walk_stmt(self, s);
                self.depth -= 1;
            }
        }
        let mut walk = Walk { found: FileMoves::default(), depth: 0 };
        walk.visit_body(cx.module_body);
        walk.found
    }

    /// Does the file move an attribute called `name` somewhere, or does a method of `class`
    /// move its attributes by `setattr`?
    fn moves(&self, cx: &Checker<'_, '_>, class: ClassId, name: &str) -> bool {
        let body = cx.model.class(class).def.range();
        self.names.contains(name) || self.setattr_in.iter().any(|r| body.contains_range(*r))
    }
}

/// How `forward` reads `self.name` (the attribute expression `e`).
fn read_of(cx: &Checker<'_, '_>, e: &Expr) -> Read {
    // `for freq in self.freq_bands:`, `[f(x * s) for s in self.scales]`: its elements.
    let walked = match cx.parent() {
        Some(Node::Stmt(Stmt::For(f))) => std::ptr::eq(&*f.iter, e),
        Some(Node::Expr(Expr::ListComp(ast::ExprListComp { generators, .. })))
        | Some(Node::Expr(Expr::Generator(ast::ExprGenerator { generators, .. }))) => {
            generators.iter().any(|g| std::ptr::eq(&g.iter, e))
        }
        _ => false,
    };
    if walked {
        return Read::Iterated;
    }
    // `x[:, self.idx]`: the attribute is (part of) an index.
    let mut child = e;
    for p in cx.parents.iter().rev() {
        match p {
            Node::Expr(t @ (Expr::Tuple(_) | Expr::Slice(_))) => child = t,
            Node::Expr(Expr::Subscript(s)) if std::ptr::eq(&*s.slice, child) => return Read::Harmless,
            _ => break,
        }
    }
    // `self.table[idx].to(x.device)`, `self.w.type_as(x)`: moved where it is read.
    let mut value = e;
    for p in cx.parents.iter().rev() {
        match p {
            Node::Expr(Expr::Attribute(m)) if matches!(m.attr.as_str(), "to" | "cuda" | "type_as") => {
                return Read::Harmless;
            }
            Node::Expr(s @ Expr::Subscript(sub)) if std::ptr::eq(&*sub.value, value) => value = s,
            Node::Expr(c @ Expr::Call(call)) if std::ptr::eq(&*call.func, value) => value = c,
            Node::Expr(at @ Expr::Attribute(m)) if std::ptr::eq(&*m.value, value) => value = at,
            _ => break,
        }
    }
    match cx.parent() {
        Some(Node::Expr(Expr::Attribute(p))) => match p.attr.as_str() {
            "shape" | "device" | "dtype" | "ndim" | "size" | "numel" | "dim" | "is_cuda" => Read::Harmless,
            _ => Read::Computes,
        },
        // `self.loss_weights[i]` with `i` a number: one element, as a loop would give it.
        Some(Node::Expr(Expr::Subscript(sub)))
            if std::ptr::eq(&*sub.value, e)
                && matches!(&*sub.slice, Expr::Name(_) | Expr::NumberLiteral(_))
                && matches!(cx.kind_of(&sub.slice), Kind::Scalar | Kind::Unknown) =>
        {
            Read::Iterated
        }
        Some(Node::Expr(Expr::Call(c))) if cx.callee_name(c).is_some_and(|q| q == "builtins.len") => {
            Read::Harmless
        }
        _ => Read::Computes,
    }
}

/// A 1-dim tensor by how it is made: `torch.linspace(..)`, `torch.logspace(..)`, `torch.arange(..)`,
/// a flat list of numbers, and arithmetic of one with numbers (`2 ** torch.linspace(0, n - 1, n)`).
fn one_dim(v: &Expr) -> bool {
    match v {
        Expr::BinOp(b) => {
            let number = |e: &Expr| matches!(e, Expr::NumberLiteral(_) | Expr::Name(_));
            (one_dim(&b.left) && number(&b.right)) || (number(&b.left) && one_dim(&b.right))
        }
        Expr::UnaryOp(u) => one_dim(&u.operand),
        Expr::Call(c) => {
            let Expr::Attribute(f) = &*c.func else { return false };
            let torch = matches!(&*f.value, Expr::Name(n) if n.id.as_str() == "torch");
            torch
                && match f.attr.as_str() {
                    "linspace" | "logspace" | "arange" => true,
                    "tensor" | "Tensor" | "FloatTensor" => match c.arguments.args.first() {
                        Some(Expr::List(l)) => l.elts.iter().all(|e| matches!(e, Expr::NumberLiteral(_))),
                        // `[w / 2 ** s for s in range(n)]`: one number each.
                        Some(Expr::ListComp(l)) => !matches!(&*l.elt, Expr::List(_) | Expr::Tuple(_) | Expr::ListComp(_)),
                        _ => false,
                    },
                    _ => false,
                }
        }
        _ => false,
    }
}

/// `self.w = nn.Parameter(x).to(device)`
fn unregistered(field: &Field<'_>) -> Finding {
    let (method, args) = match field.value {
        Some(Expr::Call(c)) => match &*c.func {
            Expr::Attribute(m) => (m.attr.as_str(), !c.arguments.is_empty()),
            _ => ("to", true),
        },
        _ => ("to", true),
    };
    let call = if args { format!("{method}(..)") } else { format!("{method}()") };
    let (noun, verb) =
        if matches!(method, "to" | "cuda") { ("move", "move") } else { ("conversion", "convert") };
    Finding::new(
        &registry::D004,
        range(field.at),
        format!(
            "`nn.Parameter(..).{call}` returns a plain tensor: `self.{}` is not a registered parameter, so it is neither trained nor saved",
            field.name
        ),
    )
    .label(format!("the {noun} returns a plain tensor"))
    .help(format!("{verb} the data before wrapping it (`nn.Parameter(x.{call})`), or {verb} the whole module later"))
}

/// `self.name = torch.zeros(..)` → `self.register_buffer("name", torch.zeros(..), persistent=False)`.
fn buffer_fix(cx: &Checker<'_, '_>, field: &Field<'_>) -> Option<Fix> {
    let method = cx.model.function(field.method);
    let stmt =
        method.def.body.iter().find(
            |s| matches!(s, Stmt::Assign(a) if a.targets.len() == 1 && a.targets[0].range() == field.at),
        )?;
    let Stmt::Assign(assign) = stmt else { return None };
    let Expr::Attribute(target) = &assign.targets[0] else { return None };
    let receiver = cx.text(target.value.range());
    let value = cx.text(assign.value.range());
    let after_init = method.def.body.iter().take_while(|s| s.start() < stmt.start()).any(|s| {
        let text = cx.text(s.range());
        text.contains("super(") && text.contains("__init__")
    });
    let applicability = if after_init { Applicability::Safe } else { Applicability::Unsafe };
    // `self.__scale` in class `M` is the attribute `_M__scale`: the buffer must have that name.
    let class = method.class.map(|c| cx.model.class(c).def.name.as_str());
    let name = mangled(field.name, class?)?;
    Some(Fix::new(
        applicability,
        "register it as a non-persistent buffer",
        vec![Edit {
            range: range(stmt.range()),
            replacement: format!("{receiver}.register_buffer(\"{name}\", {value}, persistent=False)"),
        }],
    ))
}

/// The attribute's real name as Python stores it: a private name (`__x`, not `__x__`) written in
/// class `C` is `_C__x` (the class name without its leading underscores). `None` where no name
/// can be given: a class whose name is all underscores does not mangle, but then the text is
/// not ordinary enough to rewrite.
fn mangled(name: &str, class: &str) -> Option<String> {
    if !name.starts_with("__") || name.ends_with("__") {
        return Some(name.to_string());
    }
    let class = class.trim_start_matches('_');
    (!class.is_empty()).then(|| format!("_{class}{name}"))
}

/// `self.layers = [nn.Linear(..), ..]`, or a list filled with modules later.
fn plain_container(
    cx: &Checker<'_, '_>,
    field: &Field<'_>,
    container: &str,
    parameters: bool,
) -> Option<Finding> {
    // The same modules registered another way too (`nn.Sequential(*layers)`).
    if let Some(Expr::Name(n)) = field.value
        && registered_elsewhere(cx, field.method, n.id.as_str())
    {
        return None;
    }
    // Each item registered by a loop over the container (`self.add_module(..)`).
    if registered_item_by_item(cx, field.method, field.name) {
        return None;
    }
    // Modules with nothing to move (`[nn.ReLU(), nn.GELU()]`, or this file's pooling blocks): a
    // move misses nothing.
    if nothing_to_move(cx, field) {
        return None;
    }
    let wrapper = match (container, parameters) {
        ("dict", false) => "ModuleDict",
        ("dict", true) => "ParameterDict",
        (_, false) => "ModuleList",
        (_, true) => "ParameterList",
    };
    let kind = if parameters { "parameters" } else { "modules" };
    let name = field.name;
    let mut finding = Finding::new(
        &registry::D004,
        range(field.at),
        format!("`self.{name}` keeps {kind} in a plain {container}: they are not moved by `.to(device)`, not saved and not trained"),
    )
    .label(format!("a plain {container}, not `nn.{wrapper}`"))
    .help(format!("use `nn.{wrapper}(..)`: it registers what it holds, so moves, `state_dict()` and the optimizer reach it"));
    if let Some(at) = field.filled_at {
        finding = finding.related(range(at), format!("{kind} added here"));
    }
    if let (Some(prefix), Some(value)) = (nn_prefix(cx.model), field.value)
        && !matches!(value, Expr::Name(_))
        && container != "tuple"
    {
        let r = range(value.range());
        finding = finding.fix(Some(Fix::new(
            Applicability::Unsafe,
            format!("wrap it in `{prefix}{wrapper}`"),
            vec![
                Edit { range: r.start..r.start, replacement: format!("{prefix}{wrapper}(") },
                Edit { range: r.end..r.end, replacement: ")".to_string() },
            ],
        )));
    }
    Some(finding)
}

/// A tensor made on the host in this expression: a creation call with no device (or the CPU),
/// possibly reshaped or converted (`torch.tril(torch.ones(n, n)).unsqueeze(0)`), or a name bound
/// to one.
fn made_on_host(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    made_on_host_at(cx, e, 0)
}

fn made_on_host_at(cx: &Checker<'_, '_>, e: &Expr, depth: usize) -> bool {
    if depth > 12 {
        return false;
    }
    let next = |e: &Expr| made_on_host_at(cx, e, depth + 1);
    match e {
        Expr::Call(c) => {
            if let Some(q) = cx.callee_name(c) {
                if api::is_creation(&q) {
                    return fixed_creation(cx, c, &q)
                        .is_some_and(|f| matches!(f, Fixed::Default | Fixed::Cpu));
                }
                if api::is_parameter_class(&q) {
                    return false;
                }
                return (api::returns_tensor(&q) && !q.ends_with("_like") || api::keeps_its_input(&q))
                    && c.arguments.args.first().is_some_and(next);
            }
            match &*c.func {
                Expr::Attribute(a) => match a.attr.as_str() {
                    "to" | "cuda" => false,
                    m if api::tensor_method_returns_tensor(m) => next(&a.value),
                    _ => false,
                },
                _ => false,
            }
        }
        Expr::Name(_) => match name_binding(cx, e).map(|b| cx.model.binding(b).kind) {
            Some(BindingKind::Assignment { value, part: Part::Whole, .. }) => next(value),
            _ => false,
        },
        Expr::BinOp(b) => next(&b.left) || next(&b.right),
        Expr::Subscript(s) => next(&s.value),
        Expr::UnaryOp(u) => next(&u.operand),
        _ => false,
    }
}

/// Does the class (or a base class of this file) override `_apply`, `to` or `cuda`?
fn overrides_apply(model: &Model<'_>, class: ClassId) -> bool {
    ["_apply", "to", "cuda"].iter().any(|m| model.method(class, m).is_some())
}

/// How this file spells `torch.nn.`: `nn.` after `from torch import nn`, `torch.nn.` after
/// `import torch`.
fn nn_prefix(model: &Model<'_>) -> Option<String> {
    model
        .bound_names(ScopeId::MODULE)
        .find_map(|(name, b)| match model.binding(b).kind {
            BindingKind::Import { name: i } if model.import_name(i) == "torch.nn" => Some(format!("{name}.")),
            _ => None,
        })
        .or_else(|| {
            model.bound_names(ScopeId::MODULE).find_map(|(name, b)| match model.binding(b).kind {
                BindingKind::ImportRoot if name == "torch" => Some("torch.nn.".to_string()),
                BindingKind::Import { name: i } if model.import_name(i) == "torch" => {
                    Some(format!("{name}.nn."))
                }
                _ => None,
            })
        })
}
