//! What `module.to(device)` does to each attribute of an `nn.Module` class: the one
//! classification that D004 and `devcheck inspect` both read, so they always agree.
//!
//! PyTorch moves what a module registered: parameters (`nn.Parameter` attributes,
//! `register_parameter`), buffers (`register_buffer`), submodules (any `nn.Module` attribute,
//! `nn.ModuleList`/`ModuleDict`/`Sequential`, `ParameterList`/`ParameterDict`). Anything else —
//! a plain tensor attribute, modules or tensors in a plain `list`, `tuple` or `dict` — stays where
//! it was made, and is not in `state_dict()`.

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use super::api;
use super::checker::Checker;
use super::model::{AttrAssign, AttrHow, BindingKind, ClassId, FunctionId};
use super::typing::{Kind, Truth};

/// What an attribute is, as far as a move is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Holds {
    Parameter,
    Buffer {
        persistent: bool,
    },
    Submodule,
    /// `nn.ModuleList`, `nn.ModuleDict`, `nn.Sequential`, `nn.ParameterList`, `nn.ParameterDict`.
    Container(&'static str),
    /// A tensor that is neither a parameter nor a buffer.
    PlainTensor,
    /// `nn.Parameter(x).to(device)`: the move returns a plain tensor, so nothing is registered.
    UnregisteredParameter,
    /// Modules (or parameters) kept in a plain `list`, `tuple` or `dict`.
    ModulesInPlain {
        container: &'static str,
        parameters: bool,
    },
    /// Modules kept in a plain `list` or `dict` that are each registered on their own too
    /// (`self.add_module(f"q{i}", q)` next to `self.qs.append(q)`): the container is another name
    /// for registered submodules, which move in place.
    ModulesRegisteredElsewhere {
        container: &'static str,
    },
    /// Tensors kept in a plain `list`, `tuple` or `dict`.
    TensorsInPlain {
        container: &'static str,
    },
    /// Numbers, strings, configuration: nothing to move.
    Data,
    Unknown,
}

pub(crate) use crate::fields::Fate;

/// One attribute of a module class.
pub(crate) struct Field<'a> {
    pub name: &'a str,
    pub holds: Holds,
    /// The assignment (or registration) that decides what it is.
    pub at: TextRange,
    pub method: FunctionId,
    /// The value assigned there, when there is one.
    pub value: Option<&'a Expr>,
    /// Where modules or tensors are put into a plain container later (`self.heads.append(..)`).
    pub filled_at: Option<TextRange>,
}

impl Field<'_> {
    /// The expression that makes it, shortened (`nn.Linear(..)`, `torch.zeros(..)`, `[..]`): for
    /// `devcheck inspect`, which shows it; the rules never need it.
    pub fn made_by(&self, cx: &Checker<'_, '_>) -> String {
        self.value.map(|v| shorten(cx, v)).unwrap_or_default()
    }

    pub fn fate(&self) -> Fate {
        match self.holds {
            Holds::Parameter
            | Holds::Buffer { .. }
            | Holds::Submodule
            | Holds::Container(_)
            | Holds::ModulesRegisteredElsewhere { .. } => Fate::Moves,
            Holds::PlainTensor
            | Holds::UnregisteredParameter
            | Holds::ModulesInPlain { .. }
            | Holds::TensorsInPlain { .. } => Fate::LeftBehind,
            Holds::Data => Fate::Plain,
            Holds::Unknown => Fate::Unknown,
        }
    }

    /// Is it in `state_dict()`?
    pub fn saved(&self) -> Option<bool> {
        match self.holds {
            Holds::Parameter
            | Holds::Submodule
            | Holds::Container(_)
            | Holds::ModulesRegisteredElsewhere { .. } => Some(true),
            Holds::Buffer { persistent } => Some(persistent),
            Holds::PlainTensor
            | Holds::UnregisteredParameter
            | Holds::ModulesInPlain { .. }
            | Holds::TensorsInPlain { .. } => Some(false),
            Holds::Data | Holds::Unknown => None,
        }
    }

    /// What it is, in words.
    pub fn class(&self) -> String {
        match &self.holds {
            Holds::Parameter => "parameter".to_string(),
            Holds::Buffer { persistent: true } => "buffer".to_string(),
            Holds::Buffer { persistent: false } => "buffer (non-persistent)".to_string(),
            Holds::Submodule => "submodule".to_string(),
            Holds::Container(c) => format!("{c} (registers what it holds)"),
            Holds::PlainTensor => "plain tensor attribute".to_string(),
            Holds::UnregisteredParameter => "plain tensor, not a parameter".to_string(),
            Holds::ModulesInPlain { container, parameters: false } => {
                format!("modules in a plain {container}")
            }
            Holds::ModulesInPlain { container, parameters: true } => {
                format!("parameters in a plain {container}")
            }
            Holds::ModulesRegisteredElsewhere { container } => {
                format!("modules in a plain {container}, each also registered")
            }
            Holds::TensorsInPlain { container } => format!("tensors in a plain {container}"),
            Holds::Data => "plain data".to_string(),
            Holds::Unknown => "not known here".to_string(),
        }
    }
}

/// Every attribute of a module class (and the same-file classes it derives from), once each,
/// in the order they are first assigned.
pub(crate) fn module_fields<'a>(cx: &Checker<'_, 'a>, class: ClassId) -> Vec<Field<'a>> {
    module_fields_where(cx, class, |_, _| true)
}

/// [`module_fields`], for the attributes `wanted` says yes to (called with the name and its
/// assignments in the class and its same-file bases); what a field holds is worked out for
/// those only, so a caller that needs a few fields does not pay for the rest.
pub(crate) fn module_fields_where<'a>(
    cx: &Checker<'_, 'a>,
    class: ClassId,
    mut wanted: impl FnMut(&'a str, &mut dyn Iterator<Item = &AttrAssign<'a>>) -> bool,
) -> Vec<Field<'a>> {
    let lineage = lineage(cx, class);
    let mut seen: FxHashSet<&'a str> = FxHashSet::default();
    let names: Vec<&'a str> = lineage
        .iter()
        .flat_map(|&c| cx.model.class(c).attr_names())
        .filter(|name| seen.insert(name))
        .filter(|&name| wanted(name, &mut lineage.iter().flat_map(|&c| cx.model.class(c).attr(name))))
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    let puts = puts(cx, class, &lineage);
    names.into_iter().filter_map(|name| field(cx, &lineage, &puts, name)).collect()
}

/// The class and its same-file base classes, most derived first.
fn lineage(cx: &Checker<'_, '_>, class: ClassId) -> Vec<ClassId> {
    let mut out = vec![class];
    while out.len() < 32 {
        let Some(base) = cx
            .model
            .class(*out.last().unwrap_or(&class))
            .bases()
            .iter()
            .find_map(|b| cx.model.local_class(b))
        else {
            break;
        };
        if out.contains(&base) {
            break;
        }
        out.push(base);
    }
    out
}

fn field<'a>(cx: &Checker<'_, 'a>, lineage: &[ClassId], puts: &Puts<'a>, name: &'a str) -> Option<Field<'a>> {
    let attrs: SmallVec<[AttrAssign<'a>; 2]> =
        lineage.iter().flat_map(|&c| cx.model.class(c).attr(name).copied()).collect();
    let puts_here = puts.get(name).map_or(&[][..], Vec::as_slice);
    let filled_at = puts_here.first().map(|(at, _)| *at);
    // A registration decides; otherwise the first assignment that says something.
    if let Some(r) =
        attrs.iter().find(|a| !matches!(a.how, AttrHow::Assign | AttrHow::Update | AttrHow::SetAttr))
    {
        let holds = match r.how {
            AttrHow::Buffer { persistent } => Holds::Buffer { persistent },
            AttrHow::Parameter => Holds::Parameter,
            _ => Holds::Submodule,
        };
        return Some(Field { name, holds, at: r.range, method: r.method, value: r.value, filled_at });
    }
    let assigns: SmallVec<[&AttrAssign<'a>; 4]> =
        attrs.iter().filter(|a| matches!(a.how, AttrHow::Assign | AttrHow::SetAttr)).collect();
    let first = assigns.iter().find(|a| !matches!(a.value, Some(Expr::NoneLiteral(_)))).or(assigns.first())?;
    let value = first.value;
    let mut holds = match value {
        Some(v) => holds_of(cx, v),
        None => Holds::Unknown,
    };
    // An empty list or dict filled with modules or tensors later.
    if let Some(v) = value
        && filled_at.is_some()
        && is_empty_display(v)
    {
        let container = container_name(v);
        holds = match filled_with(cx, puts_here) {
            Some(Kind::Module)
                if puts_here.iter().all(|(_, v)| registered_on_their_own(cx, first.method, v)) =>
            {
                Holds::ModulesRegisteredElsewhere { container }
            }
            Some(Kind::Module) => Holds::ModulesInPlain { container, parameters: false },
            Some(Kind::Tensor) => Holds::TensorsInPlain { container },
            // Filled with values of unknown kind: not plain data for sure.
            _ => Holds::Unknown,
        };
    }
    // A plain container turned into a registered one later (`self.blocks = []`, appended to,
    // then `self.blocks = nn.Sequential(*self.blocks)`), or a tensor wrapped later in the same
    // method (`self.w = torch.randn(..)`, then `self.w = nn.Parameter(init(self.w))`): the module
    // keeps what it was turned into.
    if matches!(holds, Holds::ModulesInPlain { .. } | Holds::TensorsInPlain { .. } | Holds::PlainTensor)
        && let Some((later, registered)) = assigns
            .iter()
            .filter(|a| a.method == first.method && a.range.start() > first.range.start())
            // A tensor wrapped only on some path (`if learn: self.w = nn.Parameter(self.w)`)
            // stays a plain tensor on the others; wrapped in the block that made it, on every
            // path that made it.
            .filter(|a| {
                !matches!(holds, Holds::PlainTensor)
                    || in_one_block(&cx.model.function(a.method).def.body, first.range, a.range, 0)
            })
            .filter_map(|a| Some((*a, holds_of(cx, a.value?))))
            .find(|(_, h)| matches!(h, Holds::Container(_) | Holds::Submodule | Holds::Parameter))
    {
        return Some(Field {
            name,
            holds: registered,
            at: later.range,
            method: later.method,
            value: later.value,
            filled_at,
        });
    }
    // Or the whole container handed to a wrapper that registers its modules in the same method
    // (`self.net = nn.ModuleList(list(self.convs.values()))`): each module is registered.
    if let Holds::ModulesInPlain { container, parameters: false } = holds
        && field_registered_whole(cx, first.method, name)
    {
        holds = Holds::ModulesRegisteredElsewhere { container };
    }
    // A value passed to the constructor and called like a module (`self.net = net` and
    // `self.net(x)`): a module the caller built (assigning one registers it), or a function, which
    // has nothing to move. Either way nothing is left behind.
    if holds == Holds::Unknown
        && let Some(Expr::Name(n)) = value
        && cx
            .model
            .binding_of(n)
            .is_some_and(|b| matches!(cx.model.binding(b).kind, BindingKind::Parameter { .. }))
        && called_on_instances(cx, lineage, name)
    {
        holds = Holds::Submodule;
    }
    Some(Field { name, holds, at: first.range, method: first.method, value, filled_at })
}

/// Is `self.<name>(..)` called on an instance of the class (or a same-file subclass's)?
fn called_on_instances(cx: &Checker<'_, '_>, lineage: &[ClassId], name: &str) -> bool {
    let calls = cx.attribute_calls.get_or_init(|| {
        let mut out = ContainerPuts::default();
        for (i, site) in cx.model.calls.iter().enumerate() {
            if let Expr::Attribute(a) = &*site.call.func
                && let Some(class) = cx.types.receiver_class(&a.value)
            {
                out.entry(class).or_default().push(i);
            }
        }
        out
    });
    lineage.iter().any(|class| {
        calls.get(class).is_some_and(|sites| {
            sites.iter().any(
                |&i| matches!(&*cx.model.calls[i].call.func, Expr::Attribute(a) if a.attr.as_str() == name),
            )
        })
    })
}

/// What a value assigned to an attribute holds.
pub(crate) fn holds_of(cx: &Checker<'_, '_>, v: &Expr) -> Holds {
    match v {
        Expr::Call(c) => {
            if let Some(m) = conversion(v)
                && is_parameter_call(cx, &m.value)
            {
                return if changes_the_tensor(cx, m.attr.as_str(), c) {
                    Holds::UnregisteredParameter
                } else {
                    Holds::Parameter
                };
            }
            if let Some(q) = cx.callee_name(c) {
                if api::is_parameter_class(&q) {
                    return Holds::Parameter;
                }
                match q.as_ref() {
                    "torch.nn.ModuleList" => return Holds::Container("nn.ModuleList"),
                    "torch.nn.ModuleDict" => return Holds::Container("nn.ModuleDict"),
                    "torch.nn.Sequential" => return Holds::Container("nn.Sequential"),
                    "torch.nn.ParameterList" => return Holds::Container("nn.ParameterList"),
                    "torch.nn.ParameterDict" => return Holds::Container("nn.ParameterDict"),
                    _ => {}
                }
            }
            kind_holds(cx, v)
        }
        Expr::List(_) | Expr::Tuple(_) | Expr::Dict(_) | Expr::ListComp(_) | Expr::DictComp(_) => {
            let container = container_name(v);
            // `[self.lin0, self.lin1]` only names attributes the module holds (and registers)
            // on their own: each is judged where it is assigned.
            let elements: Vec<&Expr> = elements(v).into_iter().filter(|e| !is_own_attribute(e)).collect();
            if elements.iter().any(|e| is_parameter_call(cx, e)) {
                Holds::ModulesInPlain { container, parameters: true }
            } else if elements.iter().any(|e| cx.kind_of(e) == Kind::Module) {
                Holds::ModulesInPlain { container, parameters: false }
            } else if elements.iter().any(|e| cx.kind_of(e) == Kind::Tensor) {
                Holds::TensorsInPlain { container }
            } else {
                Holds::Data
            }
        }
        _ => kind_holds(cx, v),
    }
}

fn kind_holds(cx: &Checker<'_, '_>, v: &Expr) -> Holds {
    match cx.kind_of(v) {
        Kind::Tensor => Holds::PlainTensor,
        Kind::Module => Holds::Submodule,
        Kind::Scalar | Kind::Other | Kind::Device | Kind::Numpy => Holds::Data,
        Kind::Unknown => match v {
            // A class of this file that is not a module: data.
            Expr::Call(c)
                if cx
                    .model
                    .local_class(&c.func)
                    .is_some_and(|k| cx.types.is_module_class(k) == Truth::No) =>
            {
                Holds::Data
            }
            _ => Holds::Unknown,
        },
    }
}

/// `<receiver>.to(..)` (or `.cuda()`, `.cpu()`, `.half()`, `.float()`, `.double()`) of a call's
/// result: the method, whose receiver may be an `nn.Parameter(..)` it unregisters
/// ([`Holds::UnregisteredParameter`]). By its syntax alone.
pub(crate) fn conversion(v: &Expr) -> Option<&ast::ExprAttribute> {
    let Expr::Call(c) = v else { return None };
    let Expr::Attribute(m) = &*c.func else { return None };
    (matches!(m.attr.as_str(), "to" | "cuda" | "cpu" | "half" | "float" | "double")
        && matches!(&*m.value, Expr::Call(_)))
    .then_some(m)
}

/// Does `.<method>(..)` (the call `c`) make a new tensor of a new parameter's data, and so drop
/// the `nn.Parameter`? A conversion to what the data already is returns the parameter itself:
/// its data is made on the CPU in the default `float32` (`nn.Parameter(torch.ones(d))`), so
/// `.float()`, `.cpu()`, `.to(torch.float32)` and `.to("cpu")` change nothing.
fn changes_the_tensor(cx: &Checker<'_, '_>, method: &str, c: &ast::ExprCall) -> bool {
    match method {
        "cuda" | "half" | "double" => true,
        "cpu" | "float" => false,
        "to" => !c.arguments.args.iter().chain(c.arguments.keywords.iter().map(|k| &k.value)).all(|a| {
            cx.model.canonical_name(a).is_some_and(|q| matches!(q.as_ref(), "torch.float32" | "torch.float"))
                || matches!(a, Expr::StringLiteral(s) if s.value.to_str() == "cpu")
        }),
        _ => true,
    }
}

fn is_parameter_call(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    matches!(e, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| api::is_parameter_class(&q)))
}

/// Modules in a plain container that hold no tensor (`[nn.ReLU(), nn.GELU()]`, this file's
/// pooling blocks): left out of a move, they miss nothing by it.
pub(crate) fn nothing_to_move(cx: &Checker<'_, '_>, field: &Field<'_>) -> bool {
    if !matches!(field.holds, Holds::ModulesInPlain { parameters: false, .. }) {
        return false;
    }
    let items = field.value.map(elements).unwrap_or_default();
    !items.is_empty() && items.iter().all(|e| holds_no_tensors(cx, e))
}

/// Does the module this expression constructs hold no tensor a move could miss: a `torch.nn`
/// module with no parameters or buffers (`nn.ReLU()`, `nn.AvgPool1d(..)`), or a module class of
/// this file whose every field is plain data or such a module (up to 64 classes looked at)?
/// `false` when it is not known.
fn holds_no_tensors(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    holds_no_tensors_at(cx, e, &mut FxHashMap::default())
}

/// `seen`: each class of the file is worked out once per question (one met again while its own
/// answer is pending, a cycle, counts as holding tensors), so classes that build each other many
/// times over cost one look each.
fn holds_no_tensors_at(cx: &Checker<'_, '_>, e: &Expr, seen: &mut FxHashMap<ClassId, bool>) -> bool {
    let Expr::Call(c) = e else { return false };
    if cx.callee_name(c).is_some_and(|q| api::class_holds_no_tensors(&q)) {
        return true;
    }
    let Some(class) = cx.model.local_class(&c.func) else { return false };
    // Handed a tensor (`Scale(torch.ones(4))`): it may keep it.
    if c.arguments
        .args
        .iter()
        .chain(c.arguments.keywords.iter().map(|k| &k.value))
        .any(|a| cx.kind_of(a) == Kind::Tensor)
    {
        return false;
    }
    if let Some(&known) = seen.get(&class) {
        return known;
    }
    if seen.len() >= 64 {
        return false;
    }
    seen.insert(class, false);
    // Every base is `nn.Module` or a class of this file (whose fields the lineage brings in).
    let lineage = lineage(cx, class);
    let known_bases = lineage.iter().all(|&k| {
        cx.model.class(k).bases().iter().all(|b| {
            cx.model.local_class(b).is_some()
                || cx.model.canonical_name(b).is_some_and(|q| q == "torch.nn.Module")
        })
    });
    let answer = known_bases
        && module_fields(cx, class).iter().all(|f| match f.holds {
            Holds::Data => true,
            Holds::Submodule => f.value.is_some_and(|v| holds_no_tensors_at(cx, v, seen)),
            // `nn.Sequential(nn.ReLU(), ..)`, or a plain list of such modules.
            Holds::Container(_) | Holds::ModulesInPlain { parameters: false, .. } => {
                let items = f.value.map(|v| match v {
                    Expr::Call(c) => c
                        .arguments
                        .args
                        .iter()
                        .flat_map(|a| match a {
                            Expr::Starred(s) => elements(&s.value),
                            Expr::List(_) | Expr::Tuple(_) | Expr::ListComp(_) => elements(a),
                            a => vec![a],
                        })
                        .collect(),
                    v => elements(v),
                });
                items.is_some_and(|items| {
                    !items.is_empty() && items.iter().all(|e| holds_no_tensors_at(cx, e, seen))
                })
            }
            // A number or setting passed to the constructor (`self.kernel_size = kernel_size`).
            Holds::Unknown => f.value.is_some_and(|v| is_plain_setting(cx, v)),
            _ => false,
        });
    seen.insert(class, answer);
    answer
}

/// A constructor's parameter kept as it is (`self.kernel_size = kernel_size`): a setting. Were it
/// a tensor, the caller passing one is where the hazard is.
fn is_plain_setting(cx: &Checker<'_, '_>, v: &Expr) -> bool {
    let Expr::Name(n) = v else { return false };
    cx.model.binding_of(n).is_some_and(|b| matches!(cx.model.binding(b).kind, BindingKind::Parameter { .. }))
}

/// The elements of a display or comprehension.
pub(crate) fn elements(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::List(l) => l.elts.iter().collect(),
        Expr::Tuple(t) => t.elts.iter().collect(),
        Expr::Dict(d) => d.items.iter().map(|i| &i.value).collect(),
        Expr::ListComp(c) => vec![&*c.elt],
        Expr::DictComp(c) => vec![&*c.value],
        _ => Vec::new(),
    }
}

/// `self.name`: another attribute of the same object.
fn is_own_attribute(e: &Expr) -> bool {
    matches!(e, Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self"))
}

fn container_name(e: &Expr) -> &'static str {
    match e {
        Expr::Dict(_) | Expr::DictComp(_) => "dict",
        Expr::Tuple(_) => "tuple",
        _ => "list",
    }
}

/// Is `v`, put into a plain container, a name the method also registers another way
/// (`self.add_module(..)`, `nn.Sequential(..)`, `nn.ModuleList(..)`, ...)?
fn registered_on_their_own(cx: &Checker<'_, '_>, method: FunctionId, v: &Expr) -> bool {
    matches!(v, Expr::Name(n) if registered_elsewhere(cx, method, n.id.as_str()))
}

/// Does a statement of `method` both name `list` and register modules (`nn.Sequential(*list)`,
/// `self.add_module(name, list)`)? By the statement's text.
pub(crate) fn registered_elsewhere(cx: &Checker<'_, '_>, method: FunctionId, list: &str) -> bool {
    let mut found = false;
    crate::python::rules::helpers::each_stmt(&cx.model.function(method).def.body, &mut |s| {
        let text = cx.text(s.range());
        if text.contains(list)
            && ["Sequential(", "ModuleList(", "ModuleDict(", "add_module(", "ParameterList("]
                .iter()
                .any(|w| text.contains(w))
        {
            found = true;
        }
    });
    found
}

/// Does `method` hand the field itself to a wrapper that registers its modules
/// (`self.net = nn.ModuleList(list(self.convs.values()))`, `nn.Sequential(*self.layers)`), or
/// register its items by name (`self.add_module(name, self.scale_heads[-1])` after each append)?
fn field_registered_whole(cx: &Checker<'_, '_>, method: FunctionId, field: &str) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    /// Does the expression name `self.<field>` anywhere inside?
    struct Names<'f> {
        field: &'f str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Names<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Attribute(a) = e
                && a.attr.as_str() == self.field
                && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self")
            {
                self.found = true;
            }
            if !self.found {
                visitor::walk_expr(self, e);
            }
        }
    }
    struct Calls<'f> {
        field: &'f str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Calls<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                let callee = match &*c.func {
                    Expr::Attribute(a) => a.attr.as_str(),
                    Expr::Name(n) => n.id.as_str(),
                    _ => "",
                };
                let handed: &[Expr] = match callee {
                    "Sequential" | "ModuleList" | "ModuleDict" => &c.arguments.args,
                    "add_module" | "register_module" => c.arguments.args.get(1..).unwrap_or_default(),
                    _ => &[],
                };
                for arg in handed {
                    let mut names = Names { field: self.field, found: false };
                    names.visit_expr(arg);
                    self.found |= names.found;
                }
            }
            if !self.found {
                visitor::walk_expr(self, e);
            }
        }
    }
    let mut calls = Calls { field, found: false };
    for stmt in &cx.model.function(method).def.body {
        calls.visit_stmt(stmt);
    }
    calls.found
}

/// Does `method` walk `self.<field>` and register each item on its own (`for i, m in
/// enumerate(self.heads): self.add_module(f"head_{i}", m)`)? By the loop's text.
pub(crate) fn registered_item_by_item(cx: &Checker<'_, '_>, method: FunctionId, field: &str) -> bool {
    // `self.<field>` itself, or inside `enumerate(..)`, `zip(..)`, `list(..)`, `reversed(..)`.
    let is_field = |e: &Expr| matches!(e, Expr::Attribute(a) if a.attr.as_str() == field && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self"));
    let walks_field = |iter: &Expr| {
        is_field(iter)
            || matches!(iter, Expr::Call(c) if matches!(&*c.func, Expr::Name(n) if matches!(n.id.as_str(), "enumerate" | "zip" | "list" | "reversed"))
                && c.arguments.args.iter().any(is_field))
    };
    let mut found = false;
    crate::python::rules::helpers::each_stmt(&cx.model.function(method).def.body, &mut |s| {
        if let Stmt::For(f) = s
            && walks_field(&f.iter)
            && f.body.iter().any(|b| {
                let text = cx.text(b.range());
                ["add_module(", "register_module(", "register_parameter(", "setattr(self"]
                    .iter()
                    .any(|w| text.contains(w))
            })
        {
            found = true;
        }
    });
    found
}

/// Are the assignments at `first` and `then` statements of one block (the method's body, or one
/// branch or loop body inside it)?
fn in_one_block(stmts: &[Stmt], first: TextRange, then: TextRange, depth: usize) -> bool {
    let assigns = |at: TextRange| {
        stmts
            .iter()
            .any(|s| matches!(s, Stmt::Assign(_) | Stmt::AnnAssign(_)) && s.range().contains_range(at))
    };
    if assigns(first) && assigns(then) {
        return true;
    }
    if depth > 32 {
        return false;
    }
    let Some(holder) = stmts.iter().find(|s| s.range().contains_range(first)) else { return false };
    let blocks: Vec<&[Stmt]> = match holder {
        Stmt::If(i) => {
            std::iter::once(&i.body[..]).chain(i.elif_else_clauses.iter().map(|c| &c.body[..])).collect()
        }
        Stmt::For(f) => vec![&f.body, &f.orelse],
        Stmt::While(w) => vec![&w.body, &w.orelse],
        Stmt::With(w) => vec![&w.body],
        Stmt::Try(t) => std::iter::once(&t.body[..])
            .chain(t.handlers.iter().map(|h| {
                let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                &h.body[..]
            }))
            .chain([&t.orelse[..], &t.finalbody[..]])
            .collect(),
        Stmt::Match(m) => m.cases.iter().map(|c| &c.body[..]).collect(),
        _ => Vec::new(),
    };
    blocks.into_iter().any(|b| in_one_block(b, first, then, depth + 1))
}

/// A value a plain container of modules or tensors can come from ([`Holds::ModulesInPlain`],
/// [`Holds::TensorsInPlain`]): a display or comprehension, or an empty `list()` or `dict()`
/// filled later. By its syntax alone.
pub(crate) fn may_be_container(e: &Expr) -> bool {
    matches!(e, Expr::List(_) | Expr::Tuple(_) | Expr::Dict(_) | Expr::ListComp(_) | Expr::DictComp(_))
        || is_empty_display(e)
}

fn is_empty_display(e: &Expr) -> bool {
    match e {
        Expr::List(l) => l.elts.is_empty(),
        Expr::Dict(d) => d.items.is_empty(),
        Expr::Tuple(t) => t.elts.is_empty(),
        // `list()`, `dict()`
        Expr::Call(c) => {
            c.arguments.is_empty()
                && matches!(&*c.func, Expr::Name(n) if matches!(n.id.as_str(), "list" | "dict"))
        }
        _ => false,
    }
}

/// What the methods of a class put into its containers, per attribute, in source order:
/// `self.name.append(v)`, `self.name[k] = v`.
type Puts<'a> = FxHashMap<&'a str, Vec<(TextRange, &'a Expr)>>;

/// The kind of what is put into a container (modules win over tensors).
fn filled_with(cx: &Checker<'_, '_>, puts: &[(TextRange, &Expr)]) -> Option<Kind> {
    let kinds: Vec<Kind> = puts.iter().map(|(_, v)| cx.kind_of(v)).collect();
    [Kind::Module, Kind::Tensor].into_iter().find(|k| kinds.contains(k))
}

/// [`Puts`] of `class` (whose lineage is `lineage`), from one pass over the file's calls.
/// For each class, the calls of the file (indices into the model's calls) that put a value into
/// a container attribute of one of its instances.
pub(super) type ContainerPuts = FxHashMap<ClassId, Vec<usize>>;

/// `self.heads.append(v)`: the attribute, the call, and the value put.
fn container_put(call: &ast::ExprCall) -> Option<(&ast::ExprAttribute, &Expr)> {
    let Expr::Attribute(m) = &*call.func else { return None };
    if !matches!(m.attr.as_str(), "append" | "extend" | "insert" | "update" | "setdefault") {
        return None;
    }
    let Expr::Attribute(list) = &*m.value else { return None };
    // `insert(i, v)`, `setdefault(k, v)`: the value is the last argument.
    Some((list, call.arguments.args.last()?))
}

/// The file's container puts, grouped by the receiver's class: one pass over the calls for the
/// whole file (a pass per class took time quadratic in the number of classes).
fn container_puts<'c>(cx: &'c Checker<'_, '_>) -> &'c ContainerPuts {
    cx.container_puts.get_or_init(|| {
        let mut out = ContainerPuts::default();
        for (i, site) in cx.model.calls.iter().enumerate() {
            let Some((list, _)) = container_put(site.call) else { continue };
            if let Some(class) = cx.types.receiver_class(&list.value) {
                out.entry(class).or_default().push(i);
            }
        }
        out
    })
}

fn puts<'a>(cx: &Checker<'_, 'a>, class: ClassId, lineage: &[ClassId]) -> Puts<'a> {
    let mut out: Puts<'a> = FxHashMap::default();
    for &i in container_puts(cx).get(&class).map_or(&[][..], Vec::as_slice) {
        let call = cx.model.calls[i].call;
        if let Some((list, v)) = container_put(call) {
            out.entry(list.attr.as_str()).or_default().push((call.range(), v));
        }
    }
    for &c in lineage {
        for a in &cx.model.class(c).attrs {
            if let (AttrHow::Update, Some(v)) = (a.how, a.value) {
                out.entry(a.name).or_default().push((a.range, v));
            }
        }
    }
    for sites in out.values_mut() {
        sites.sort_by_key(|(r, _)| r.start());
    }
    out
}

/// A value, shortened for a table: `nn.Linear(..)`, `torch.zeros(..)`, `[nn.Linear(..) ..]`.
fn shorten(cx: &Checker<'_, '_>, v: &Expr) -> String {
    match v {
        Expr::Call(c) => match &*c.func {
            // `nn.Parameter(torch.ones(d)).cuda()` → `nn.Parameter(..).cuda(..)`
            Expr::Attribute(a) if matches!(&*a.value, Expr::Call(_)) => {
                format!("{}.{}(..)", shorten(cx, &a.value), a.attr.as_str())
            }
            func => format!("{}(..)", cx.short(func.range())),
        },
        Expr::List(_) | Expr::ListComp(_) => "[..]".to_string(),
        Expr::Tuple(_) => "(..)".to_string(),
        Expr::Dict(_) | Expr::DictComp(_) => "{..}".to_string(),
        other => cx.short(other.range()),
    }
}
