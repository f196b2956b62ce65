//! What kind of value an expression holds — a tensor, an `nn.Module`, a numpy array, a Python
//! scalar — decided without types, from bindings: an assignment's right-hand side, a parameter's
//! annotation, a loop's iterable, a class's base classes and the attributes its methods assign.
//! The answer may be [`Kind::Unknown`]; rules act only on what is known.

use std::cell::{Cell, RefCell};

use ruff_python_ast::{self as ast, Expr, Operator};
use rustc_hash::FxHashMap;

use super::api;
use super::model::{AttrHow, BindingId, BindingKind, Callee, ClassId, FunctionId, Model, Part};
use super::project::View;

/// What a value is, as far as the rules care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Tensor,
    /// An `nn.Module` (a model, a layer, a loss criterion): `.to()` moves it in place.
    Module,
    Numpy,
    /// A Python number, bool or string.
    Scalar,
    /// A `torch.device`.
    Device,
    /// Something else that is known: a list, a class, a module object, `None`.
    Other,
    Unknown,
}

impl Kind {
    /// Not known to be something other than a tensor.
    pub fn may_be_tensor(self) -> bool {
        matches!(self, Kind::Tensor | Kind::Unknown)
    }
}

/// A yes/no question the model may not be able to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Truth {
    Yes,
    No,
    Unknown,
}

/// Deeper chains of bindings than this are not followed.
const MAX_FOLLOW: usize = 48;

/// The type inference of one file, with its memos.
pub(crate) struct Types<'m, 'a> {
    pub model: &'m Model<'a>,
    /// The classes of the other files of the run ([`super::project`]).
    project: View<'m>,
    bindings: Slots<Kind>,
    classes: Slots<Truth>,
    returns: Slots<Kind>,
    /// Attribute kinds per class and name: `self.data = self.data.filter(..)` refers to itself.
    attrs: RefCell<FxHashMap<ClassId, FxHashMap<Box<str>, Kind>>>,
    depth: Cell<usize>,
}

/// Answers worked out so far, one slot per dense id (a binding, class or function), so a lookup
/// is an index, not a hash.
struct Slots<V>(RefCell<Vec<Option<V>>>);

impl<V> Default for Slots<V> {
    fn default() -> Self {
        Slots(RefCell::new(Vec::new()))
    }
}

impl<V: Copy> Slots<V> {
    fn get(&self, i: usize) -> Option<V> {
        self.0.borrow().get(i).copied().flatten()
    }

    fn set(&self, i: usize, v: V) {
        let mut slots = self.0.borrow_mut();
        if slots.len() <= i {
            slots.resize(i + 1, None);
        }
        slots[i] = Some(v);
    }
}

impl<'m, 'a> Types<'m, 'a> {
    pub fn new(model: &'m Model<'a>, project: View<'m>) -> Self {
        Types {
            model,
            project,
            bindings: Slots::default(),
            classes: Slots::default(),
            returns: Slots::default(),
            attrs: RefCell::default(),
            depth: Cell::new(0),
        }
    }

    /// What the other files of the run say ([`super::project`]).
    pub fn project(&self) -> View<'m> {
        self.project
    }

    /// The kind of value `e` holds.
    pub fn kind(&self, e: &Expr) -> Kind {
        let depth = self.depth.get();
        if depth > MAX_FOLLOW {
            return Kind::Unknown;
        }
        self.depth.set(depth + 1);
        let k = self.kind_inner(e);
        self.depth.set(depth);
        k
    }

    fn kind_inner(&self, e: &Expr) -> Kind {
        match e {
            Expr::Name(n) => match self.model.binding_of(n) {
                Some(b) => self.binding_kind(b),
                None => Kind::Unknown,
            },
            Expr::Attribute(a) => self.attribute_kind(a),
            Expr::Call(c) => self.call_kind(c),
            Expr::BinOp(b) => {
                let (l, r) = (self.kind(&b.left), self.kind(&b.right));
                combine(l, r, b.op)
            }
            Expr::UnaryOp(u) => match u.op {
                ast::UnaryOp::Not => Kind::Scalar,
                _ => self.kind(&u.operand),
            },
            Expr::Compare(c) => {
                // (`mask == "auto"`: a tensor is never equal to a string; Python answers `False`.)
                if c.ops.iter().any(|op| {
                    matches!(op, ast::CmpOp::Is | ast::CmpOp::IsNot | ast::CmpOp::In | ast::CmpOp::NotIn)
                }) || std::iter::once(&*c.left)
                    .chain(c.comparators.iter())
                    .any(|o| matches!(o, Expr::StringLiteral(_) | Expr::FString(_)))
                {
                    return Kind::Scalar;
                }
                let operands = std::iter::once(&*c.left).chain(c.comparators.iter());
                let kinds: Vec<Kind> = operands.map(|o| self.kind(o)).collect();
                if kinds.contains(&Kind::Tensor) {
                    Kind::Tensor
                } else if kinds.iter().all(|k| matches!(k, Kind::Scalar | Kind::Other | Kind::Device)) {
                    Kind::Scalar
                } else {
                    Kind::Unknown
                }
            }
            Expr::Subscript(s) => match self.kind(&s.value) {
                Kind::Tensor => Kind::Tensor,
                Kind::Numpy => Kind::Numpy,
                _ => self.indexed_kind(&s.value),
            },
            Expr::If(i) => {
                let (a, b) = (self.kind(&i.body), self.kind(&i.orelse));
                if a == b { a } else { Kind::Unknown }
            }
            Expr::Named(n) => self.kind(&n.value),
            Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::FString(_)
            | Expr::BytesLiteral(_) => Kind::Scalar,
            Expr::List(_)
            | Expr::Tuple(_)
            | Expr::Dict(_)
            | Expr::Set(_)
            | Expr::ListComp(_)
            | Expr::DictComp(_)
            | Expr::SetComp(_)
            | Expr::NoneLiteral(_)
            | Expr::Lambda(_) => Kind::Other,
            _ => Kind::Unknown,
        }
    }

    /// The kind of the value a binding holds.
    pub fn binding_kind(&self, id: BindingId) -> Kind {
        if let Some(k) = self.bindings.get(id.index()) {
            return k;
        }
        // A cycle (`x = x + 1` through shadowed bindings) answers Unknown.
        self.bindings.set(id.index(), Kind::Unknown);
        let k = self.binding_kind_inner(id);
        self.bindings.set(id.index(), k);
        k
    }

    fn binding_kind_inner(&self, id: BindingId) -> Kind {
        let b = self.model.binding(id);
        match b.kind {
            BindingKind::Assignment { value, part, annotation } => {
                if let Some(k) = annotation.map(|a| self.annotation_kind(a)).filter(|k| *k != Kind::Unknown) {
                    return k;
                }
                match part {
                    Part::Whole => self.kind(value),
                    Part::Element(i) => self.element_kind(value, i),
                    Part::Unknown => Kind::Unknown,
                }
            }
            BindingKind::Declaration { annotation } => self.annotation_kind(annotation),
            BindingKind::AugAssignment { value, op } => {
                let old = b.shadowed.map(|s| self.binding_kind(s)).unwrap_or(Kind::Unknown);
                combine(old, self.kind(value), op)
            }
            BindingKind::Parameter { function, position, annotation, default, variadic } => {
                if let Some(k) = annotation.map(|a| self.annotation_kind(a)).filter(|k| *k != Kind::Unknown) {
                    return k;
                }
                if variadic {
                    return Kind::Other;
                }
                if let Some(f) = function {
                    let fun = self.model.function(f);
                    if position == 0 && fun.receiver == Some(b.name) {
                        return match fun.class {
                            Some(c) if !fun.is_classmethod => match self.is_module_class(c) {
                                Truth::Yes => Kind::Module,
                                Truth::No => Kind::Other,
                                Truth::Unknown => Kind::Unknown,
                            },
                            _ => Kind::Other,
                        };
                    }
                }
                match default {
                    Some(Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::StringLiteral(_)) => {
                        Kind::Scalar
                    }
                    _ => Kind::Unknown,
                }
            }
            BindingKind::LoopVar { iter, part, .. } => self.loop_var_kind(iter, part),
            BindingKind::Import { .. } | BindingKind::ImportRoot => Kind::Other,
            BindingKind::ClassDef(_) | BindingKind::FunctionDef(_) => Kind::Other,
            BindingKind::WithItem { .. } | BindingKind::Other => Kind::Unknown,
        }
    }

    /// Element `i` of an unpacked value: `a, b = x.max(dim=1)`, `q, k, v = qkv.chunk(3)`.
    fn element_kind(&self, value: &Expr, i: usize) -> Kind {
        match value {
            Expr::Tuple(t) => t.elts.get(i).map(|e| self.kind(e)).unwrap_or(Kind::Unknown),
            Expr::List(t) => t.elts.get(i).map(|e| self.kind(e)).unwrap_or(Kind::Unknown),
            Expr::Call(c) => {
                let tuple_of_tensors = match &*c.func {
                    Expr::Attribute(a) if self.kind(&a.value) == Kind::Tensor => matches!(
                        a.attr.as_str(),
                        "max"
                            | "min"
                            | "sort"
                            | "topk"
                            | "chunk"
                            | "split"
                            | "unbind"
                            | "std_mean"
                            | "var_mean"
                    ),
                    func => self
                        .model
                        .canonical_name(func)
                        .is_some_and(|q| api::returns_tensor(&q) && !matches!(&*q, "torch.unique")),
                };
                // `b, c, h, w = x.size()`: sizes.
                let size = matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "size" && c.arguments.is_empty());
                // `output, hidden = self.rnn(x, hidden)`: a recurrent module's outputs (an LSTM's
                // second is the pair `(h, c)`; attention's second, its weights, may be `None`).
                let recurrent = self.module_class_name(&c.func).is_some_and(|q| match q.as_str() {
                    "torch.nn.GRU" | "torch.nn.RNN" | "torch.nn.LSTMCell" => true,
                    "torch.nn.LSTM" | "torch.nn.MultiheadAttention" => i == 0,
                    _ => false,
                });
                if tuple_of_tensors || recurrent {
                    Kind::Tensor
                } else if size {
                    Kind::Scalar
                } else {
                    Kind::Unknown
                }
            }
            // `b, c, h, w = x.shape`, `h, w = x.shape[-2:]`.
            Expr::Attribute(a) if a.attr.as_str() == "shape" => Kind::Scalar,
            Expr::Subscript(s) if matches!(&*s.value, Expr::Attribute(a) if a.attr.as_str() == "shape") => {
                Kind::Scalar
            }
            _ => Kind::Unknown,
        }
    }

    fn loop_var_kind(&self, iter: &Expr, part: Part) -> Kind {
        if let Expr::Call(c) = iter {
            match self.model.canonical_name(&c.func).as_deref() {
                Some("builtins.range") => {
                    return if part == Part::Whole { Kind::Scalar } else { Kind::Unknown };
                }
                Some("builtins.enumerate") if part == Part::Element(0) => return Kind::Scalar,
                _ => {}
            }
        }
        if part != Part::Whole {
            return Kind::Unknown;
        }
        // `for layer in self.layers` over an `nn.ModuleList`.
        if let Expr::Attribute(a) = iter
            && let Some(class) = self.receiver_class(&a.value)
            && self.attr_is_module_container(class, a.attr.as_str())
        {
            return Kind::Module;
        }
        Kind::Unknown
    }

    /// An attribute that holds an `nn.ModuleList`, `nn.Sequential` or `nn.ModuleDict`.
    fn attr_is_module_container(&self, class: ClassId, name: &str) -> bool {
        let mut found = false;
        for a in self.class_attrs(class, name) {
            let is_container = a.value.and_then(|v| self.constructed_class(v)).is_some_and(|q| {
                matches!(q.as_str(), "torch.nn.ModuleList" | "torch.nn.Sequential" | "torch.nn.ModuleDict")
            });
            if a.how == AttrHow::Assign && !is_container {
                return false;
            }
            found |= is_container;
        }
        found
    }

    /// The qualified name of the class a call constructs (`nn.Linear(..)` → `torch.nn.Linear`).
    pub fn constructed_class(&self, e: &Expr) -> Option<String> {
        let Expr::Call(c) = e else { return None };
        self.model.canonical_name(&c.func).map(|q| q.into_owned())
    }

    /// The class whose method has `e` as its receiver (`self`).
    pub fn receiver_class(&self, e: &Expr) -> Option<ClassId> {
        let Expr::Name(n) = e else { return None };
        let b = self.model.binding(self.model.binding_of(n)?);
        let BindingKind::Parameter { function: Some(f), position: 0, .. } = b.kind else { return None };
        let fun = self.model.function(f);
        (fun.receiver == Some(b.name) && !fun.is_classmethod).then_some(fun.class).flatten()
    }

    fn attribute_kind(&self, a: &ast::ExprAttribute) -> Kind {
        if let Some(class) = self.receiver_class(&a.value) {
            return self.attr_kind(class, a.attr.as_str());
        }
        self.attribute_kind_given(a, self.kind(&a.value))
    }

    /// The kind of an element of `container` (`container[i]`), when every assignment of it says:
    /// a display or comprehension whose elements agree (`{"a": nn.Linear(..), ..}`: modules,
    /// `[torch.zeros(3)]`: tensors), or `nn.ModuleList`/`ModuleDict`/`Sequential` (modules).
    /// Unknown for anything else — a module of its own class may index to anything.
    fn indexed_kind(&self, container: &Expr) -> Kind {
        let values: Vec<&Expr> = match container {
            Expr::Attribute(a) => match self.receiver_class(&a.value) {
                Some(class) => {
                    let assigns = self.class_attrs(class, a.attr.as_str());
                    if assigns.iter().any(|x| !matches!(x.how, AttrHow::Assign) || x.value.is_none()) {
                        return Kind::Unknown;
                    }
                    assigns.iter().filter_map(|x| x.value).collect()
                }
                None => return Kind::Unknown,
            },
            Expr::Name(n) => match self.model.binding_of(n).map(|b| &self.model.binding(b).kind) {
                Some(BindingKind::Assignment { value, part: Part::Whole, .. }) => vec![*value],
                // `input_shape[1]`: a size.
                Some(BindingKind::Parameter { annotation: None, .. }) if named_for_a_shape(n.id.as_str()) => {
                    return Kind::Scalar;
                }
                _ => return Kind::Unknown,
            },
            _ => return Kind::Unknown,
        };
        let mut kind = None;
        for v in values {
            let k = match v {
                // (An element of a `ParameterList` is a parameter: assigned to an attribute it is
                // registered, which a plain tensor would not be. Left unknown.)
                Expr::Call(c) => match self.model.canonical_name(&c.func).as_deref() {
                    Some("torch.nn.ModuleList" | "torch.nn.ModuleDict" | "torch.nn.Sequential") => {
                        Kind::Module
                    }
                    _ => return Kind::Unknown,
                },
                Expr::List(_) | Expr::Tuple(_) | Expr::Dict(_) | Expr::ListComp(_) | Expr::DictComp(_) => {
                    let elements = super::fields::elements(v);
                    let Some(first) = elements.first() else { return Kind::Unknown };
                    let k = self.kind(first);
                    if elements.iter().skip(1).any(|e| self.kind(e) != k) {
                        return Kind::Unknown;
                    }
                    k
                }
                _ => return Kind::Unknown,
            };
            match kind {
                None => kind = Some(k),
                Some(old) if old == k => {}
                Some(_) => return Kind::Unknown,
            }
        }
        match kind {
            Some(k @ (Kind::Module | Kind::Tensor)) => k,
            _ => Kind::Unknown,
        }
    }

    /// The kind of `value.attr` when `value`'s kind is known (a method call has just asked for it:
    /// asking again at every level of `x.to(..).to(..) ..` would take exponential time).
    fn attribute_kind_given(&self, a: &ast::ExprAttribute, value: Kind) -> Kind {
        let attr = a.attr.as_str();
        // `model.module`: the module a `DataParallel` or `DistributedDataParallel` wraps.
        if attr == "module" && value == Kind::Module {
            return Kind::Module;
        }
        if let Some(class) = self.receiver_class(&a.value) {
            return self.attr_kind(class, attr);
        }
        // `d.min(dim=-1).values`, `torch.topk(x, k).indices`: a field of the (values, indices)
        // pair a reduction over a dimension returns.
        if matches!(attr, "values" | "indices")
            && let Expr::Call(c) = &*a.value
            && self.returns_values_and_indices(c)
        {
            return Kind::Tensor;
        }
        match value {
            Kind::Tensor => match attr {
                "T" | "mT" | "H" | "mH" | "data" | "grad" | "real" | "imag" => Kind::Tensor,
                "shape" | "ndim" | "requires_grad" | "is_cuda" | "dtype" => Kind::Other,
                "device" => Kind::Device,
                _ => Kind::Unknown,
            },
            Kind::Module => match attr {
                "weight" | "bias" => Kind::Tensor,
                // `model.pe` of a module class of this file.
                _ => match self.module_local_class(&a.value) {
                    Some(class) => self.attr_kind(class, attr),
                    None => Kind::Unknown,
                },
            },
            _ => Kind::Unknown,
        }
    }

    /// Does the call return PyTorch's (values, indices) pair: `x.min(dim)`, `torch.topk(x, k)`,
    /// `x.sort()`?
    fn returns_values_and_indices(&self, c: &ast::ExprCall) -> bool {
        const PAIRS: [&str; 9] =
            ["min", "max", "sort", "topk", "kthvalue", "median", "mode", "cummax", "cummin"];
        match &*c.func {
            Expr::Attribute(f) if self.kind(&f.value) == Kind::Tensor => PAIRS.contains(&f.attr.as_str()),
            _ => self
                .model
                .canonical_name(&c.func)
                .as_deref()
                .and_then(|q| q.strip_prefix("torch."))
                .is_some_and(|n| PAIRS.contains(&n)),
        }
    }

    /// Every assignment of attribute `name` in a class and the same-file classes it derives from.
    pub fn class_attrs<'s>(&'s self, class: ClassId, name: &'s str) -> Vec<&'s super::model::AttrAssign<'a>>
    where
        'm: 's,
    {
        self.class_attrs_upto(class, name, usize::MAX).unwrap_or_default()
    }

    /// [`Types::class_attrs`], or `None` past `limit` assignments (a container filled item by item
    /// thousands of times is not walked at each read of it).
    pub fn class_attrs_upto<'s>(
        &'s self,
        class: ClassId,
        name: &'s str,
        limit: usize,
    ) -> Option<Vec<&'s super::model::AttrAssign<'a>>>
    where
        'm: 's,
    {
        let mut out = Vec::new();
        let mut at = Some(class);
        let mut seen = 0;
        while let Some(c) = at {
            for x in self.model.class(c).attr(name) {
                if out.len() == limit {
                    return None;
                }
                out.push(x);
            }
            seen += 1;
            if seen > 32 {
                break;
            }
            at = self.model.class(c).bases().iter().find_map(|b| self.model.local_class(b));
        }
        Some(out)
    }

    /// The kind of `self.name` in a method of `class`: what every assignment to it agrees on.
    pub fn attr_kind(&self, class: ClassId, name: &str) -> Kind {
        if let Some(k) = self.attrs.borrow().get(&class).and_then(|names| names.get(name)) {
            return *k;
        }
        // A cycle answers Unknown.
        self.attrs.borrow_mut().entry(class).or_default().insert(name.into(), Kind::Unknown);
        let k = self.attr_kind_inner(class, name);
        if let Some(slot) = self.attrs.borrow_mut().get_mut(&class).and_then(|names| names.get_mut(name)) {
            *slot = k;
        }
        k
    }

    /// `self.net = self.net.to(device)`, `self.net = DataParallel(self.net, ..)`: the value of
    /// attribute `name` is the same module again, moved or wrapped.
    fn same_attribute_again(&self, value: &Expr, name: &str) -> bool {
        let mut at = value;
        for _ in 0..8 {
            match at {
                Expr::Attribute(x) => return x.attr.as_str() == name && matches!(&*x.value, Expr::Name(_)),
                Expr::Call(c) => match &*c.func {
                    Expr::Attribute(m) if api::module_method_returns_self(m.attr.as_str()) => at = &m.value,
                    f if self.model.canonical_name(f).is_some_and(|q| api::is_module_wrapper(&q)) => {
                        let Some(inner) = c.arguments.args.first() else { return false };
                        at = inner;
                    }
                    _ => return false,
                },
                _ => return false,
            }
        }
        false
    }

    fn attr_kind_inner(&self, class: ClassId, name: &str) -> Kind {
        let mut kind = None;
        for a in self.class_attrs(class, name) {
            if a.value.is_some_and(|v| self.same_attribute_again(v, name)) {
                continue;
            }
            let k = match a.how {
                AttrHow::Buffer { .. } | AttrHow::Parameter => Kind::Tensor,
                AttrHow::Module => Kind::Module,
                AttrHow::Update => continue,
                AttrHow::Assign | AttrHow::SetAttr => match a.value {
                    Some(v) => self.kind(v),
                    None => Kind::Unknown,
                },
            };
            if matches!(a.value, Some(Expr::NoneLiteral(_))) {
                continue;
            }
            match kind {
                None => kind = Some(k),
                Some(old) if old == k => {}
                Some(_) => return Kind::Unknown,
            }
        }
        kind.unwrap_or(Kind::Unknown)
    }

    fn call_kind(&self, c: &ast::ExprCall) -> Kind {
        let receiver = match &*c.func {
            Expr::Attribute(a) => Some((a, self.kind(&a.value))),
            _ => None,
        };
        if let Some((a, value)) = receiver {
            let method = a.attr.as_str();
            match value {
                Kind::Tensor => {
                    return match method {
                        "item" => Kind::Scalar,
                        // `x.type()` names the type; `x.type(torch.float16)` converts.
                        "type" if c.arguments.is_empty() => Kind::Scalar,
                        "numpy" => Kind::Numpy,
                        "tolist" | "size" | "dim" | "numel" | "element_size" | "stride" | "data_ptr"
                        | "get_device" | "is_contiguous" | "nelement" => Kind::Other,
                        m if api::tensor_method_returns_tensor(m) => Kind::Tensor,
                        _ => Kind::Unknown,
                    };
                }
                Kind::Module if api::module_method_returns_self(method) => return Kind::Module,
                Kind::Module if method == "forward" => return self.module_output(&a.value),
                // Otherwise `self.fc(x)`: an attribute holding a submodule, called below.
                Kind::Numpy => {
                    return match method {
                        "item" => Kind::Scalar,
                        "tolist" => Kind::Other,
                        _ => Kind::Numpy,
                    };
                }
                _ => {}
            }
        }
        if self.autograd_apply(c) {
            return Kind::Tensor;
        }
        if let Some(q) = self.model.canonical_name(&c.func) {
            if api::is_parameter_class(&q) || api::returns_tensor(&q) {
                return Kind::Tensor;
            }
            if api::keeps_its_input(&q) {
                return c.arguments.args.first().map_or(Kind::Unknown, |x| self.kind(x));
            }
            if api::is_module_class(&q) || self.project.is_module(&q) == Truth::Yes {
                return Kind::Module;
            }
            if q == "torch.device" {
                return Kind::Device;
            }
            if q.starts_with("numpy.") {
                return Kind::Numpy;
            }
            if matches!(
                &*q,
                "builtins.float"
                    | "builtins.int"
                    | "builtins.bool"
                    | "builtins.len"
                    | "builtins.str"
                    | "builtins.round"
            ) {
                return Kind::Scalar;
            }
            if matches!(
                &*q,
                "builtins.list"
                    | "builtins.dict"
                    | "builtins.tuple"
                    | "builtins.set"
                    | "builtins.zip"
                    | "builtins.enumerate"
                    | "builtins.range"
            ) {
                return Kind::Other;
            }
        }
        match self.model.callee(c, self.function_of_call(c)) {
            Some(Callee::Class(class)) => match self.is_module_class(class) {
                Truth::Yes => return Kind::Module,
                Truth::No => return Kind::Other,
                Truth::Unknown => return Kind::Unknown,
            },
            Some(Callee::Function(f)) => return self.return_kind(f),
            None => {}
        }
        // Calling a module runs its forward.
        let func = match receiver {
            Some((a, value)) => self.attribute_kind_given(a, value),
            None => self.kind(&c.func),
        };
        if func == Kind::Module {
            return self.module_output(&c.func);
        }
        Kind::Unknown
    }

    /// `AllReduce.apply(x)`: a custom autograd function (a class of this file deriving from
    /// `torch.autograd.Function`, or a class imported from elsewhere) run on a tensor. Its result
    /// is what its `forward` makes of the tensors it is given: a tensor on their device.
    pub fn autograd_apply(&self, c: &ast::ExprCall) -> bool {
        let Expr::Attribute(a) = &*c.func else { return false };
        let Expr::Name(n) = &*a.value else { return false };
        if a.attr.as_str() != "apply" {
            return false;
        }
        let Some(b) = self.model.binding_of(n) else { return false };
        let function_class = match self.model.binding(b).kind {
            BindingKind::ClassDef(class) => self.model.class(class).bases().iter().any(|base| {
                self.model.canonical_name(base).is_some_and(|q| {
                    matches!(&*q, "torch.autograd.Function" | "torch.autograd.function.Function")
                })
            }),
            // A class by its name (`from .distributed import AllReduce`); a module's `apply(fn)`
            // is called on an instance, not a class.
            BindingKind::Import { .. } => n.id.chars().next().is_some_and(char::is_uppercase),
            _ => false,
        };
        function_class && c.arguments.args.iter().any(|x| self.kind(x).may_be_tensor())
    }

    /// The function a call is in is not needed to resolve `self.method(..)` for typing: the
    /// receiver's binding names the method's function.
    fn function_of_call(&self, c: &ast::ExprCall) -> Option<FunctionId> {
        let Expr::Attribute(a) = &*c.func else { return None };
        let Expr::Name(n) = &*a.value else { return None };
        match self.model.binding(self.model.binding_of(n)?).kind {
            BindingKind::Parameter { function, position: 0, .. } => function,
            _ => None,
        }
    }

    /// What calling a module returns: one tensor for the `nn` layers and losses (not the
    /// recurrent ones), what `forward` returns for a class of this file.
    pub fn module_output(&self, module: &Expr) -> Kind {
        if let Some(q) = self.module_class_name(module) {
            return if api::module_returns_tuple(&q) { Kind::Unknown } else { Kind::Tensor };
        }
        if let Some(class) = self.module_local_class(module)
            && let Some(forward) = self.model.method(class, "forward")
        {
            return self.return_kind(forward);
        }
        Kind::Unknown
    }

    /// The `nn` class a module value was built from: `self.fc` assigned `nn.Linear(..)`, a name
    /// bound to `nn.CrossEntropyLoss()`.
    pub fn module_class_name(&self, module: &Expr) -> Option<String> {
        let value = self.module_value(module)?;
        let q = self.constructed_class(value)?;
        api::is_module_class(&q).then_some(q)
    }

    /// The `forward` that calling a module of this file runs.
    pub fn forward_of(&self, module: &Expr) -> Option<FunctionId> {
        self.model.method(self.module_local_class(module)?, "forward")
    }

    pub fn module_local_class(&self, module: &Expr) -> Option<ClassId> {
        let Expr::Call(c) = self.module_value(module)? else { return None };
        self.model.local_class(&c.func)
    }

    /// The expression a module value was made by, following one name or attribute.
    fn module_value<'e>(&'e self, module: &'e Expr) -> Option<&'e Expr>
    where
        'a: 'e,
        'm: 'e,
    {
        match module {
            Expr::Call(_) => Some(module),
            Expr::Name(n) => match self.model.binding(self.model.binding_of(n)?).kind {
                // `model = self.model`: the attribute's value.
                BindingKind::Assignment { value: value @ Expr::Attribute(_), part: Part::Whole, .. } => {
                    self.module_value(value).or(Some(value))
                }
                BindingKind::Assignment { value, part: Part::Whole, .. } => Some(value),
                _ => None,
            },
            Expr::Attribute(a) => {
                let class = self.receiver_class(&a.value)?;
                let name = a.attr.as_str();
                let attrs = self.class_attrs(class, name);
                let mut values = attrs
                    .iter()
                    .filter(|x| x.how != AttrHow::Update)
                    .filter_map(|x| x.value)
                    .filter(|v| !self.same_attribute_again(v, name));
                let first = values.next()?;
                values.next().is_none().then_some(first)
            }
            _ => None,
        }
    }

    /// The kind every `return` of a same-file function agrees on.
    pub fn return_kind(&self, f: FunctionId) -> Kind {
        if let Some(k) = self.returns.get(f.index()) {
            return k;
        }
        self.returns.set(f.index(), Kind::Unknown);
        let fun = self.model.function(f);
        let mut kind = None;
        for r in &fun.returns {
            let k = self.kind(r);
            match kind {
                None => kind = Some(k),
                Some(old) if old == k => {}
                Some(_) => {
                    kind = Some(Kind::Unknown);
                    break;
                }
            }
        }
        let k = kind.unwrap_or(Kind::Other);
        self.returns.set(f.index(), k);
        k
    }

    /// The kind an annotation declares.
    pub fn annotation_kind(&self, a: &Expr) -> Kind {
        let mut a = a;
        for _ in 0..8 {
            a = match a {
                // `Optional[Tensor]`, `Tensor | None`: a tensor where it is used as one.
                Expr::Subscript(s)
                    if self.model.canonical_name(&s.value).is_some_and(|q| q == "typing.Optional") =>
                {
                    &s.slice
                }
                Expr::BinOp(b)
                    if b.op == ast::Operator::BitOr && matches!(&*b.right, Expr::NoneLiteral(_)) =>
                {
                    &b.left
                }
                Expr::BinOp(b)
                    if b.op == ast::Operator::BitOr && matches!(&*b.left, Expr::NoneLiteral(_)) =>
                {
                    &b.right
                }
                // `NDArray[np.float32]`: a NumPy array of that dtype.
                Expr::Subscript(s) => &s.value,
                _ => break,
            };
        }
        // `"np.ndarray"`: a forward reference, read by its text.
        if let Expr::StringLiteral(l) = a {
            let text = l.value.to_str();
            return match text.trim().trim_end_matches(" | None") {
                "np.ndarray" | "numpy.ndarray" | "NDArray" | "npt.NDArray" => Kind::Numpy,
                "torch.Tensor" | "Tensor" => Kind::Tensor,
                _ => Kind::Unknown,
            };
        }
        let Some(q) = self.model.canonical_name(a) else { return Kind::Unknown };
        if api::is_tensor_type(&q) {
            Kind::Tensor
        } else if api::is_module_class(&q) || self.project.is_module(&q) == Truth::Yes {
            Kind::Module
        } else if matches!(&*q, "builtins.int" | "builtins.float" | "builtins.bool" | "builtins.str") {
            Kind::Scalar
        } else if q == "torch.device" {
            Kind::Device
        } else if matches!(&*q, "numpy.ndarray" | "numpy.typing.NDArray" | "numpy.typing.ArrayLike") {
            Kind::Numpy
        } else if let Some(c) = self.model.local_class(a) {
            if self.is_module_class(c) == Truth::Yes { Kind::Module } else { Kind::Unknown }
        } else {
            Kind::Unknown
        }
    }

    /// Is a class of this file an `nn.Module`? Yes when a base class is one (in PyTorch, a
    /// library built on it, this file or another file of the run); no when every base is known and none is; and when a
    /// base comes from elsewhere, yes if the class has a `forward` and keeps `nn` layers.
    pub fn is_module_class(&self, class: ClassId) -> Truth {
        if let Some(t) = self.classes.get(class.index()) {
            return t;
        }
        self.classes.set(class.index(), Truth::Unknown);
        let t = self.is_module_class_inner(class);
        self.classes.set(class.index(), t);
        t
    }

    fn is_module_class_inner(&self, class: ClassId) -> Truth {
        let c = self.model.class(class);
        let mut unknown = false;
        for base in c.bases() {
            if let Some(local) = self.model.local_class(base) {
                match self.is_module_class(local) {
                    Truth::Yes => return Truth::Yes,
                    Truth::No => continue,
                    Truth::Unknown => unknown = true,
                }
                continue;
            }
            match self.model.canonical_name(base) {
                Some(q) if api::is_module_class(&q) => return Truth::Yes,
                Some(q) if api::is_plain_base(&q) => {}
                // A class of another file of the run.
                Some(q) => match self.project.is_module(&q) {
                    Truth::Yes => return Truth::Yes,
                    Truth::No => {}
                    Truth::Unknown => unknown = true,
                },
                // `Generic[T]` and other subscripted bases say nothing.
                _ if matches!(base, Expr::Subscript(_)) => {}
                _ => unknown = true,
            }
        }
        if !unknown {
            return Truth::No;
        }
        let keeps_layers = c.attrs.iter().any(|a| {
            a.how == AttrHow::Assign
                && a.value.and_then(|v| self.constructed_class(v)).is_some_and(|q| api::is_module_class(&q))
        });
        if self.model.own_method(class, "forward").is_some() && keeps_layers {
            Truth::Yes
        } else {
            Truth::Unknown
        }
    }
}

/// The kind of `l op r`.
fn combine(l: Kind, r: Kind, op: Operator) -> Kind {
    match (l, r) {
        // `"%.3f" % loss` formats a string.
        (Kind::Scalar, _) if op == Operator::Mod => Kind::Unknown,
        (Kind::Tensor, _) | (_, Kind::Tensor) => Kind::Tensor,
        (Kind::Numpy, _) | (_, Kind::Numpy) => Kind::Numpy,
        (Kind::Scalar, Kind::Scalar) if op != Operator::Mod => Kind::Scalar,
        _ => Kind::Unknown,
    }
}

/// Is a parameter named for a shape (`shape`, `input_shape`): a tuple of sizes? (Names of sizes,
/// `seq_len`, are left alone: a tensor of lengths is often called so.)
fn named_for_a_shape(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "shape" || lower.ends_with("_shape")
}
