//! The semantic model of one Python file: scopes, bindings, references, functions, classes and
//! loops in arenas addressed by small `Copy` ids, built in one traversal in evaluation order.
//!
//! A binding records how a name was bound (import, assignment, parameter, loop variable, ...) and
//! is never overwritten: a new binding of the same name shadows the old one and remembers it.
//! Every name that is read is resolved, at the moment it is read, to the binding it sees; the
//! rules later look the answer up by the name's offset ([`Model::binding_of`]). Imports carry
//! the full qualified name, so `import torch as t; t.ones`, `from torch import ones; ones` and
//! `torch.ones` all resolve to `torch.ones` ([`Model::qualified_name`]).
//!
//! Function bodies are deferred: they are visited after the code that defines them, so a name
//! defined later in the module (a helper below its caller, a global set in `main`) still
//! resolves, as it does when Python runs the function.

use std::borrow::Cow;

use ruff_python_ast::{
    self as ast, Expr, ExprContext, Parameters, Stmt,
    visitor::{self, Visitor},
};
use ruff_text_size::{Ranged, TextRange, TextSize};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) struct $name(u32);

        impl $name {
            fn new(index: usize) -> Self {
                // Arenas hold at most one entry per byte of a file under the size limit.
                $name(u32::try_from(index).unwrap_or(u32::MAX))
            }

            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// A scope: the module, a class body, a function, a lambda or a comprehension.
    ScopeId
);
id_type!(
    /// A binding of a name.
    BindingId
);
id_type!(
    /// A `def`.
    FunctionId
);
id_type!(
    /// A `class`.
    ClassId
);
id_type!(
    /// A `for` or `while` loop.
    LoopId
);

impl ScopeId {
    /// The module's own scope.
    pub const MODULE: ScopeId = ScopeId(0);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScopeKind {
    Module,
    Class(ClassId),
    Function(FunctionId),
    Lambda,
    Comprehension,
}

#[derive(Debug)]
pub(crate) struct Scope<'a> {
    pub kind: ScopeKind,
    pub parent: Option<ScopeId>,
    /// Names declared `global` (or `nonlocal`) here: assignments bind them outside.
    outer: FxHashSet<&'a str>,
}

/// Which part of the assigned value a target takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// `x = value`
    Whole,
    /// `a, b = value`: element `i` (counting from the front, before any starred target).
    Element(usize),
    /// A starred target, or an element after one, or a nested pattern.
    Unknown,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum BindingKind<'a> {
    /// `import a.b as c`, `from a import b`: the module or object's full dotted name, by its
    /// index in the model's list of import names ([`Model::import_name`]).
    Import {
        name: usize,
    },
    /// `import a.b` binds `a`.
    ImportRoot,
    /// `x = value`, `x: T = value`, `(x := value)`, `a, b = value`.
    Assignment {
        value: &'a Expr,
        part: Part,
        annotation: Option<&'a Expr>,
    },
    /// `x: T` without a value.
    Declaration {
        annotation: &'a Expr,
    },
    /// `x += value`: the new value depends on the old one.
    AugAssignment {
        value: &'a Expr,
        op: ast::Operator,
    },
    /// A parameter of a function or lambda: its position and its annotation and default.
    Parameter {
        function: Option<FunctionId>,
        position: usize,
        annotation: Option<&'a Expr>,
        default: Option<&'a Expr>,
        variadic: bool,
    },
    /// A `for` target (also in comprehensions): an element of `iter`.
    LoopVar {
        iter: &'a Expr,
        part: Part,
    },
    /// `with expr as name`.
    WithItem,
    ClassDef(ClassId),
    FunctionDef(FunctionId),
    /// `except E as e`, `match` captures, `del`, `global`: nothing the rules reason about.
    Other,
}

#[derive(Debug)]
pub(crate) struct Binding<'a> {
    pub name: &'a str,
    pub kind: BindingKind<'a>,
    /// The binding of the same name in the same scope that this one replaced.
    pub shadowed: Option<BindingId>,
    /// Bound inside `with torch.no_grad():` (or `inference_mode`, or a function decorated with
    /// one): the value does not require grad.
    pub in_no_grad: bool,
}

/// `self.name = value` (or a registration: `self.register_buffer("name", value)`) in a method.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttrAssign<'a> {
    pub name: &'a str,
    /// `None` when the value is not known (an unpacked tuple, an augmented assignment).
    pub value: Option<&'a Expr>,
    pub how: AttrHow,
    pub method: FunctionId,
    /// Where to point: the target `self.name`, or the registration call.
    pub range: TextRange,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrHow {
    /// `self.name = value`
    Assign,
    /// `self.name += value`, `self.name[i] = value` (the value is what goes in): changes the
    /// attribute in place.
    Update,
    /// `self.register_buffer("name", value)` (persistent unless `persistent=False`).
    Buffer { persistent: bool },
    /// `self.register_parameter("name", value)`
    Parameter,
    /// `self.add_module("name", value)`, `self.register_module(..)`
    Module,
    /// `setattr(self, "name", value)`
    SetAttr,
}

#[derive(Debug)]
pub(crate) struct Function<'a> {
    pub def: &'a ast::StmtFunctionDef,
    /// Its own scope, once its body has been visited.
    pub scope: Option<ScopeId>,
    /// The class whose body holds the `def`: a method.
    pub class: Option<ClassId>,
    /// The function whose body holds the `def`.
    pub parent: Option<FunctionId>,
    /// `self` of a method (`None` for static methods); `cls` for class methods.
    pub receiver: Option<&'a str>,
    pub is_classmethod: bool,
    /// `return` values (not those of nested functions).
    pub returns: Vec<&'a Expr>,
}

impl Function<'_> {
    pub fn name(&self) -> &str {
        self.def.name.as_str()
    }
}

#[derive(Debug)]
pub(crate) struct Class<'a> {
    pub def: &'a ast::StmtClassDef,
    pub scope: Option<ScopeId>,
    pub attrs: Vec<AttrAssign<'a>>,
    /// For each attribute name, where its assignments are in `attrs` (a class may assign
    /// thousands of attributes: asking about each by a scan would take quadratic time).
    attr_index: FxHashMap<&'a str, SmallVec<[usize; 2]>>,
}

impl<'a> Class<'a> {
    pub fn bases(&self) -> &[Expr] {
        self.def.arguments.as_deref().map(|a| &*a.args).unwrap_or(&[])
    }

    /// Every assignment or registration of attribute `name`, in source order.
    pub fn attr<'s>(&'s self, name: &str) -> impl Iterator<Item = &'s AttrAssign<'a>> + 's {
        self.attr_index.get(name).into_iter().flatten().map(|&i| &self.attrs[i])
    }

    /// The names of the attributes the class assigns or registers, each once, in source order.
    pub fn attr_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.attrs.iter().enumerate().filter(|(i, a)| self.attr_index[a.name][0] == *i).map(|(_, a)| a.name)
    }
}

#[derive(Debug)]
pub(crate) struct Loop<'a> {
    pub stmt: &'a Stmt,
    pub function: Option<FunctionId>,
    pub parent: Option<LoopId>,
    /// Another loop runs inside this one (in the same function): this is an outer loop, such as
    /// one over epochs.
    pub has_inner_loop: bool,
}

impl<'a> Loop<'a> {
    /// The `for` target and iterable; `None` for a `while` loop.
    pub fn for_parts(&self) -> Option<(&'a Expr, &'a Expr)> {
        match self.stmt {
            Stmt::For(f) => Some((&f.target, &f.iter)),
            _ => None,
        }
    }
}

/// A call as the model saw it: where it is, for the call graph.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSite<'a> {
    pub call: &'a ast::ExprCall,
    pub function: Option<FunctionId>,
    pub in_loop: Option<LoopId>,
}

/// The model of one file.
pub(crate) struct Model<'a> {
    pub source: &'a str,
    scopes: Vec<Scope<'a>>,
    bindings: Vec<Binding<'a>>,
    functions: Vec<Function<'a>>,
    classes: Vec<Class<'a>>,
    loops: Vec<Loop<'a>>,
    pub calls: Vec<CallSite<'a>>,
    /// The binding each augmented assignment's target read (`x += 1` reads `x`, then binds it):
    /// the target's node index holds the binding it made.
    aug_reads: FxHashMap<TextSize, BindingId>,
    /// The binding each name has now in each scope; older ones hang off [`Binding::shadowed`].
    /// One table for the file: a table per scope cost an allocation or more per function.
    names: FxHashMap<(ScopeId, &'a str), BindingId>,
    /// The methods of each class by name.
    methods: FxHashMap<(ClassId, &'a str), FunctionId>,
    functions_by_start: FxHashMap<TextSize, FunctionId>,
    classes_by_start: FxHashMap<TextSize, ClassId>,
    loops_by_start: FxHashMap<TextSize, LoopId>,
    /// Qualified names of imports (`from a import b` makes `a.b`).
    imports: Vec<String>,
    /// Some import is from `torch` (or a library built on it).
    pub imports_torch: bool,
    /// Where the builder stopped descending, past [`MAX_DEPTH`]: the file is then not analysed
    /// (never half-analysed). The depth estimate refuses such trees first, so this is a guard.
    pub too_deep_at: Option<TextRange>,
    /// The canonical name of every call's callee, worked out once: every rule asks for it.
    /// Indexed by the node index the build gives each callee that is an attribute (`torch.zeros`,
    /// `self.net`, `x.to`): looking one up is a load and a bounds check.
    callee_names: Vec<(TextRange, CalleeName)>,
    /// The module-level names the file may give another value than the one written
    /// ([`Model::may_rebind_global`]), read from the text once.
    rebound_globals: std::sync::OnceLock<Rebound>,
    /// The attributes the file empties through another object than `self`
    /// ([`Model::emptied_from_outside`]), read from the text once.
    emptied_attributes: std::sync::OnceLock<FxHashSet<String>>,
}

/// What a file's text lets rebind its globals: a wholesale rebinding (`exec(..)`, `globals()`, a
/// star import), or the names `global` statements list.
#[derive(Debug, Default)]
struct Rebound {
    wholesale: bool,
    names: FxHashSet<String>,
}

impl<'a> Model<'a> {
    /// Could the module's `name` be given another value than the one written: a `global`
    /// statement naming it (`global epochs, log_interval`), a star import (`from run_config import
    /// *`), or code that rebinds globals wholesale (`exec(open(config).read())`,
    /// `globals().update(..)`)? The text is read once per file, whatever the number of questions.
    /// Does the file empty an attribute of that name through another object than `self`
    /// (`model.packer.max_len = None` in a training loop)? The text is read once for all names.
    pub fn emptied_from_outside(&self, name: &str) -> bool {
        self.emptied_attributes
            .get_or_init(|| {
                let text = self.source;
                let mut names = FxHashSet::default();
                for at in memchr::memmem::find_iter(text.as_bytes(), b" = None") {
                    let before = &text[..at];
                    let target = before
                        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                        .next()
                        .unwrap_or("");
                    let after = &text[at + " = None".len()..];
                    if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                        continue;
                    }
                    if let Some((receiver, attr)) = target.rsplit_once('.')
                        && receiver != "self"
                        && !attr.is_empty()
                    {
                        names.insert(attr.to_string());
                    }
                }
                names
            })
            .contains(name)
    }

    pub fn may_rebind_global(&self, name: &str) -> bool {
        let rebound = self.rebound_globals.get_or_init(|| {
            let bytes = self.source.as_bytes();
            let mut r = Rebound {
                wholesale: memchr::memmem::find(bytes, b"exec(").is_some()
                    || memchr::memmem::find(bytes, b"globals()").is_some(),
                names: FxHashSet::default(),
            };
            for line in self.source.lines().map(str::trim_start) {
                let code = line.split('#').next().unwrap_or_default();
                if let Some(names) = code.strip_prefix("global ") {
                    r.names.extend(names.split([',', ';']).map(|n| n.trim().to_string()));
                } else if code.starts_with("from ") && code.trim_end().ends_with("import *") {
                    r.wholesale = true;
                }
            }
            r
        });
        rebound.wholesale || rebound.names.contains(name)
    }

    /// Builds the model of a parsed module.
    pub fn build(source: &'a str, body: &'a [Stmt]) -> Self {
        // Sized from the text (about one call or binding per 128 bytes of Python) so the tables
        // rarely grow while the tree is walked.
        let others = source.len() / 128;
        let mut b = Builder {
            model: Model {
                source,
                rebound_globals: std::sync::OnceLock::new(),
                emptied_attributes: std::sync::OnceLock::new(),
                scopes: Vec::new(),
                bindings: Vec::with_capacity(others),
                functions: Vec::new(),
                classes: Vec::new(),
                loops: Vec::new(),
                calls: Vec::with_capacity(others),
                aug_reads: FxHashMap::default(),
                names: FxHashMap::with_capacity_and_hasher(others, Default::default()),
                methods: FxHashMap::default(),
                functions_by_start: FxHashMap::default(),
                classes_by_start: FxHashMap::default(),
                loops_by_start: FxHashMap::default(),
                imports: Vec::new(),
                imports_torch: false,
                too_deep_at: None,
                callee_names: Vec::new(),
            },
            scope: ScopeId(0),
            function: None,
            class_body: None,
            loop_stack: Vec::new(),
            deferred: Vec::new(),
            no_grad: 0,
            depth: 0,
        };
        b.model.scopes.push(Scope { kind: ScopeKind::Module, parent: None, outer: FxHashSet::default() });
        b.visit_body(body);
        // Function bodies run after the code that defines them.
        while let Some(f) = b.deferred.pop() {
            b.visit_function_body(f);
        }
        // Methods are visited in no particular order: keep each class's attributes in source order.
        for c in &mut b.model.classes {
            c.attrs.sort_by_key(|a| a.range.start());
            for (i, a) in c.attrs.iter().enumerate() {
                c.attr_index.entry(a.name).or_default().push(i);
            }
        }
        let mut model = b.model;
        let mut names = Vec::with_capacity(model.calls.len());
        for site in &model.calls {
            let Expr::Attribute(a) = &*site.call.func else { continue };
            let Ok(i) = u32::try_from(names.len()) else { break };
            if i >= u32::MAX - 2 {
                break;
            }
            let name = match model.qualified_name(&site.call.func).map(canonical) {
                None => CalleeName::Unknown,
                // The name is the callee's own text (`torch.nn.functional.relu`): nothing to keep.
                Some(Cow::Borrowed(q))
                    if model.source.get(a.range.to_std_range()).is_some_and(|t| t == q) =>
                {
                    CalleeName::AsWritten
                }
                Some(q) => CalleeName::Named(q.into_owned().into_boxed_str()),
            };
            a.node_index.set(ruff_python_ast::NodeIndex::from(i));
            names.push((a.range, name));
        }
        model.callee_names = names;
        model
    }

    /// The dotted name of an import binding.
    pub fn import_name(&self, index: usize) -> &str {
        self.imports.get(index).map(String::as_str).unwrap_or("")
    }

    pub fn bindings(&self) -> impl Iterator<Item = &Binding<'a>> {
        self.bindings.iter()
    }

    pub fn binding(&self, id: BindingId) -> &Binding<'a> {
        &self.bindings[id.index()]
    }

    pub fn function(&self, id: FunctionId) -> &Function<'a> {
        &self.functions[id.index()]
    }

    pub fn functions(&self) -> impl Iterator<Item = (FunctionId, &Function<'a>)> {
        self.functions.iter().enumerate().map(|(i, f)| (FunctionId::new(i), f))
    }

    pub fn class(&self, id: ClassId) -> &Class<'a> {
        &self.classes[id.index()]
    }

    pub fn classes(&self) -> impl Iterator<Item = (ClassId, &Class<'a>)> {
        self.classes.iter().enumerate().map(|(i, c)| (ClassId::new(i), c))
    }

    pub fn loops(&self) -> impl Iterator<Item = (LoopId, &Loop<'a>)> {
        self.loops.iter().enumerate().map(|(i, l)| (LoopId::new(i), l))
    }

    pub fn loop_(&self, id: LoopId) -> &Loop<'a> {
        &self.loops[id.index()]
    }

    /// The names bound in `scope` with their current bindings.
    pub fn bound_names(&self, scope: ScopeId) -> impl Iterator<Item = (&'a str, BindingId)> + '_ {
        self.names.iter().filter(move |((s, _), _)| *s == scope).map(|((_, n), b)| (*n, *b))
    }

    pub fn scope(&self, id: ScopeId) -> &Scope<'a> {
        &self.scopes[id.index()]
    }

    /// Some scope declares a name `global` or `nonlocal`: an assignment there binds a name of
    /// another scope, with a value written in this one.
    pub fn declares_outer_names(&self) -> bool {
        self.scopes.iter().any(|s| !s.outer.is_empty())
    }

    /// The function a `def` statement defines.
    pub fn function_of_def(&self, def: &ast::StmtFunctionDef) -> Option<FunctionId> {
        self.functions_by_start.get(&def.name.start()).copied()
    }

    pub fn loop_of_stmt(&self, stmt: &Stmt) -> Option<LoopId> {
        self.loops_by_start.get(&stmt.start()).copied()
    }

    /// The binding a name that is read saw when it was read (for the target of `x += 1`, the
    /// `x` it read).
    pub fn binding_of(&self, name: &ast::ExprName) -> Option<BindingId> {
        match name.ctx {
            ExprContext::Load => name.node_index.load().as_u32().map(BindingId),
            ExprContext::Store => self.aug_reads.get(&name.start()).copied(),
            _ => None,
        }
    }

    /// The binding an assignment target (`x` in `x = ..`, `x += ..`, `for x in ..`) made.
    pub fn definition_of(&self, name: &ast::ExprName) -> Option<BindingId> {
        if name.ctx != ExprContext::Store {
            return None;
        }
        name.node_index.load().as_u32().map(BindingId)
    }

    /// The binding `name` has at the end of `scope` (or an enclosing scope), as a function body
    /// defined there sees it.
    pub fn lookup(&self, scope: ScopeId, name: &str) -> Option<BindingId> {
        let mut at = Some(scope);
        let mut first = true;
        while let Some(id) = at {
            let s = self.scope(id);
            // A function does not see the names of the class bodies around it.
            if (first || !matches!(s.kind, ScopeKind::Class(_)))
                && let Some(b) = self.names.get(&(id, name))
            {
                return Some(*b);
            }
            first = false;
            at = s.parent;
        }
        None
    }

    /// The full dotted name an expression refers to, following imports: `t.nn.Linear` with
    /// `import torch as t` is `torch.nn.Linear`. Names bound to nothing are builtins
    /// (`builtins.float`). `None` for local values and anything that is not a dotted name.
    pub fn qualified_name(&self, e: &Expr) -> Option<Cow<'_, str>> {
        // Down the attribute chain to its root name; a string only once the root is an import.
        let mut at = e;
        let mut chained = false;
        // The length of the `.a.b` tail written without spaces, comments or parentheses.
        let mut dotted = 0;
        let root = loop {
            match at {
                Expr::Attribute(a) => {
                    chained = true;
                    dotted += a.attr.len() + 1;
                    at = &a.value;
                }
                Expr::Name(n) => break n,
                _ => return None,
            }
        };
        let base: &str = match self.binding_of(root) {
            Some(id) => match self.binding(id).kind {
                BindingKind::Import { name } => self.import_name(name),
                BindingKind::ImportRoot => self.binding(id).name,
                _ => return None,
            },
            // An attribute of a builtin (`str.join`) is not a dotted name of a module.
            None if chained => return None,
            None => {
                let name = root.id.as_str();
                return Some(
                    builtin_name(name).map_or_else(|| Cow::Owned(format!("builtins.{name}")), Cow::Borrowed),
                );
            }
        };
        if !chained {
            return Some(Cow::Borrowed(base));
        }
        if base.starts_with("builtins.") {
            return None;
        }
        // Nearly always the chain is spelled out plainly: the name is the text itself when the
        // import binds the module under its own name (`import torch`), else one copy.
        let tail = self.source.get(root.end().to_usize()..e.end().to_usize()).filter(|t| t.len() == dotted);
        if let Some(tail) = tail {
            if base == root.id.as_str() {
                return self.source.get(root.start().to_usize()..e.end().to_usize()).map(Cow::Borrowed);
            }
            return Some(Cow::Owned([base, tail].concat()));
        }
        let mut attrs: Vec<&str> = Vec::new();
        let mut at = e;
        while let Expr::Attribute(a) = at {
            attrs.push(a.attr.as_str());
            at = &a.value;
        }
        let mut q = String::with_capacity(base.len() + dotted);
        q.push_str(base);
        for a in attrs.iter().rev() {
            q.push('.');
            q.push_str(a);
        }
        Some(Cow::Owned(q))
    }

    /// Like [`Model::qualified_name`], with the spellings of one object reduced to one:
    /// `torch.nn.modules.linear.Linear` is `torch.nn.Linear`.
    pub fn canonical_name(&self, e: &Expr) -> Option<Cow<'_, str>> {
        if let Expr::Attribute(a) = e
            && let Some(i) = a.node_index.load().as_u32()
            && let Some((range, known)) = self.callee_names.get(i as usize)
            && *range == a.range
        {
            return match known {
                CalleeName::Unknown => None,
                CalleeName::AsWritten => self.source.get(range.to_std_range()).map(Cow::Borrowed),
                CalleeName::Named(q) => Some(Cow::Borrowed(q)),
            };
        }
        let q = self.qualified_name(e)?;
        Some(canonical(q))
    }

    /// The same-file function or class a call's callee names, through names and `self.method`.
    pub fn callee(&self, call: &ast::ExprCall, caller: Option<FunctionId>) -> Option<Callee> {
        self.callee_of(&call.func, caller)
    }

    /// The same-file function or class `func` names (a call's callee, or a function passed on:
    /// `map(self.split_heads, xs)`).
    pub fn callee_of(&self, func: &Expr, caller: Option<FunctionId>) -> Option<Callee> {
        match func {
            Expr::Name(n) => match self.binding(self.binding_of(n)?).kind {
                BindingKind::FunctionDef(f) => Some(Callee::Function(f)),
                BindingKind::ClassDef(c) => Some(Callee::Class(c)),
                _ => None,
            },
            Expr::Attribute(a) => {
                let Expr::Name(recv) = &*a.value else { return None };
                let f = self.function(caller?);
                let class = f.class?;
                if f.receiver != Some(recv.id.as_str()) {
                    return None;
                }
                let name = a.attr.as_str();
                self.method(class, name)
                    .or_else(|| self.function_attribute(class, name))
                    .map(Callee::Function)
            }
            _ => None,
        }
    }

    /// The same-file functions a call through a table of them may run:
    /// `model_func = {"TransE": self.TransE, ..}` then `model_func[name](..)`, one of the table's
    /// values (a table bound once, to a dict, list or tuple of functions).
    pub fn dispatched(&self, func: &Expr, caller: Option<FunctionId>) -> Vec<FunctionId> {
        let Expr::Subscript(s) = func else { return Vec::new() };
        let Expr::Name(table) = &*s.value else { return Vec::new() };
        let Some(b) = self.binding_of(table) else { return Vec::new() };
        let binding = self.binding(b);
        let BindingKind::Assignment { value, part: Part::Whole, .. } = binding.kind else {
            return Vec::new();
        };
        if binding.shadowed.is_some() {
            return Vec::new();
        }
        let values: Vec<&Expr> = match value {
            Expr::Dict(d) => d.items.iter().map(|i| &i.value).collect(),
            Expr::List(l) => l.elts.iter().collect(),
            Expr::Tuple(t) => t.elts.iter().collect(),
            _ => return Vec::new(),
        };
        values
            .into_iter()
            .take(64)
            .filter_map(|v| match self.callee_of(v, caller) {
                Some(Callee::Function(f)) => Some(f),
                _ => None,
            })
            .collect()
    }

    /// The function of the file a class keeps in an attribute and calls as a method
    /// (`self.neg_loss = _neg_loss` in `__init__`, then `self.neg_loss(out, target)`): the one
    /// function every assignment of the attribute names.
    fn function_attribute(&self, class: ClassId, name: &str) -> Option<FunctionId> {
        let mut found = None;
        for assign in self.class(class).attr(name) {
            let Some(Expr::Name(n)) = assign.value else { return None };
            let BindingKind::FunctionDef(f) = self.binding(self.binding_of(n)?).kind else { return None };
            if found.is_some_and(|g| g != f) {
                return None;
            }
            found = Some(f);
        }
        found
    }

    /// Method `name` defined in the class's own body.
    pub fn own_method(&self, class: ClassId, name: &str) -> Option<FunctionId> {
        self.methods.get(&(class, name)).copied()
    }

    /// Method `name` of a class, or of a base class defined in the same file.
    pub fn method(&self, class: ClassId, name: &str) -> Option<FunctionId> {
        let mut seen = 0;
        let mut at = Some(class);
        while let Some(c) = at {
            if let Some(m) = self.own_method(c, name) {
                return Some(m);
            }
            seen += 1;
            if seen > 32 {
                return None;
            }
            at = self.class(c).bases().iter().find_map(|b| self.local_class(b));
        }
        None
    }

    /// The methods of same-file subclasses that override `f`, when `f` is a method left for them
    /// to write: its body only raises `NotImplementedError` (or is `pass`, `...`, a docstring).
    /// `self.batch_update(x, y)` in a base class's loop runs one of them.
    pub fn overrides(&self, f: FunctionId) -> Vec<FunctionId> {
        let fun = self.function(f);
        let Some(class) = fun.class else { return Vec::new() };
        if !self.is_left_to_subclasses(f) {
            return Vec::new();
        }
        let derives = |mut at: ClassId| {
            for _ in 0..32 {
                match self.class(at).bases().iter().find_map(|b| self.local_class(b)) {
                    Some(base) if base == class => return true,
                    Some(base) => at = base,
                    None => return false,
                }
            }
            false
        };
        self.classes()
            .filter(|&(c, _)| c != class && derives(c))
            .filter_map(|(c, _)| self.own_method(c, fun.name()))
            .collect()
    }

    /// Is `f` a method left for subclasses to write: its body only raises `NotImplementedError`,
    /// or it is an `@abstractmethod` with nothing of its own (`pass`, `...`, a docstring)?
    pub fn is_left_to_subclasses(&self, f: FunctionId) -> bool {
        let fun = self.function(f);
        fun.class.is_some()
            && (raises_not_implemented(&fun.def.body)
                || (has_nothing_of_its_own(&fun.def.body)
                    && fun.def.decorator_list.iter().any(|d| {
                        self.canonical_name(&d.expression)
                            .is_some_and(|q| matches!(&*q, "abc.abstractmethod" | "abstractmethod"))
                    })))
    }

    /// The method a method's call of a base class's method runs, where this file defines it:
    /// `Base.forward(self, x)`, a class of this file named and called on the caller's own
    /// instance, or `super().forward(x)`, the caller's class's bases searched in order as Python's
    /// method resolution does for a single line of bases, stopping at the first base of another
    /// file or library, which may define the method itself (`class Conv(nn.Conv2d, Mixin)` runs
    /// `nn.Conv2d.forward`). `super(Other, self)` starts elsewhere in the order: not followed.
    /// (Not a [`Callee`]: the arguments of `Base.forward(self, x)` do not line up with the
    /// parameters as a method call's do.)
    pub fn base_method_call(&self, call: &ast::ExprCall, caller: Option<FunctionId>) -> Option<FunctionId> {
        let Expr::Attribute(a) = &*call.func else { return None };
        let f = self.function(caller?);
        let class = f.class?;
        let name = a.attr.as_str();
        match &*a.value {
            Expr::Name(_) => {
                let base = self.local_class(&a.value)?;
                let on_itself = matches!(call.arguments.args.first(), Some(Expr::Name(n)) if Some(n.id.as_str()) == f.receiver);
                if on_itself { self.method(base, name) } else { None }
            }
            Expr::Call(s)
                if matches!(&*s.func, Expr::Name(n) if n.id.as_str() == "super")
                    && s.arguments.is_empty() =>
            {
                for base in self.class(class).bases() {
                    if let Some(m) = self.method(self.local_class(base)?, name) {
                        return Some(m);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// The class defined in this file that an expression names.
    pub fn local_class(&self, e: &Expr) -> Option<ClassId> {
        let Expr::Name(n) = e else { return None };
        match self.binding(self.binding_of(n)?).kind {
            BindingKind::ClassDef(c) => Some(c),
            _ => None,
        }
    }

    /// The source text of a range.
    pub fn text(&self, range: TextRange) -> &'a str {
        self.source.get(range.to_std_range()).unwrap_or("")
    }
}

/// A body with nothing of its own: `raise NotImplementedError(..)`, `pass`, `...`, a docstring.
fn has_nothing_of_its_own(body: &[Stmt]) -> bool {
    !body.is_empty()
        && body.iter().all(|s| match s {
            Stmt::Pass(_) => true,
            Stmt::Expr(e) => matches!(&*e.value, Expr::StringLiteral(_) | Expr::EllipsisLiteral(_)),
            Stmt::Raise(r) => r.exc.as_deref().is_some_and(|e| {
                let name = match e {
                    Expr::Call(c) => &*c.func,
                    other => other,
                };
                matches!(name, Expr::Name(n) if n.id.as_str() == "NotImplementedError")
            }),
            _ => false,
        })
}

/// A body with nothing of its own that raises `NotImplementedError`.
fn raises_not_implemented(body: &[Stmt]) -> bool {
    has_nothing_of_its_own(body) && body.iter().any(|s| matches!(s, Stmt::Raise(_)))
}

/// The context managers (and decorators) that turn autograd off.
pub(crate) fn is_no_grad_name(q: &str) -> bool {
    matches!(
        q,
        "torch.no_grad"
            | "torch.inference_mode"
            | "torch.autograd.no_grad"
            | "torch.autograd.grad_mode.no_grad"
    )
}

/// What a call calls, when it is defined in the same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Callee {
    Function(FunctionId),
    Class(ClassId),
}

/// `builtins.NAME` for the names Python's `builtins` module defines (3.11), as static text: a
/// call of `print` or `len` is named without building a string.
fn builtin_name(name: &str) -> Option<&'static str> {
    macro_rules! builtins {
        ($($n:ident),* $(,)?) => {
            match name {
                $(stringify!($n) => Some(concat!("builtins.", stringify!($n))),)*
                _ => None,
            }
        };
    }
    builtins!(
        ArithmeticError,
        AssertionError,
        AttributeError,
        BaseException,
        BaseExceptionGroup,
        BlockingIOError,
        BrokenPipeError,
        BufferError,
        BytesWarning,
        ChildProcessError,
        ConnectionAbortedError,
        ConnectionError,
        ConnectionRefusedError,
        ConnectionResetError,
        DeprecationWarning,
        EOFError,
        Ellipsis,
        EncodingWarning,
        EnvironmentError,
        Exception,
        ExceptionGroup,
        FileExistsError,
        FileNotFoundError,
        FloatingPointError,
        FutureWarning,
        GeneratorExit,
        IOError,
        ImportError,
        ImportWarning,
        IndentationError,
        IndexError,
        InterruptedError,
        IsADirectoryError,
        KeyError,
        KeyboardInterrupt,
        LookupError,
        MemoryError,
        ModuleNotFoundError,
        NameError,
        NotADirectoryError,
        NotImplemented,
        NotImplementedError,
        OSError,
        OverflowError,
        PendingDeprecationWarning,
        PermissionError,
        ProcessLookupError,
        RecursionError,
        ReferenceError,
        ResourceWarning,
        RuntimeError,
        RuntimeWarning,
        StopAsyncIteration,
        StopIteration,
        SyntaxError,
        SyntaxWarning,
        SystemError,
        SystemExit,
        TabError,
        TimeoutError,
        TypeError,
        UnboundLocalError,
        UnicodeDecodeError,
        UnicodeEncodeError,
        UnicodeError,
        UnicodeTranslateError,
        UnicodeWarning,
        UserWarning,
        ValueError,
        Warning,
        ZeroDivisionError,
        __import__,
        abs,
        aiter,
        all,
        anext,
        any,
        ascii,
        bin,
        bool,
        breakpoint,
        bytearray,
        bytes,
        callable,
        chr,
        classmethod,
        compile,
        complex,
        copyright,
        credits,
        delattr,
        dict,
        dir,
        divmod,
        enumerate,
        eval,
        exec,
        exit,
        filter,
        float,
        format,
        frozenset,
        getattr,
        globals,
        hasattr,
        hash,
        help,
        hex,
        id,
        input,
        int,
        isinstance,
        issubclass,
        iter,
        len,
        license,
        list,
        locals,
        map,
        max,
        memoryview,
        min,
        next,
        object,
        oct,
        open,
        ord,
        pow,
        print,
        property,
        quit,
        range,
        repr,
        reversed,
        round,
        set,
        setattr,
        slice,
        sorted,
        staticmethod,
        str,
        sum,
        super,
        tuple,
        type,
        vars,
        zip,
    )
}

/// One spelling per object: re-exports and aliases of the objects the rules look for.
pub(crate) fn canonical(q: Cow<'_, str>) -> Cow<'_, str> {
    const PREFIXES: [(&str, &str); 5] = [
        ("torch.nn.modules.", "torch.nn."),
        ("torch.utils.data.dataloader.", "torch.utils.data."),
        ("torch.nn.parameter.", "torch.nn."),
        ("torch.serialization.", "torch."),
        ("torch._C._nn.", "torch.nn.functional."),
    ];
    for (long, short) in PREFIXES {
        if let Some(rest) = q.strip_prefix(long) {
            // `torch.nn.modules.linear.Linear` → `torch.nn.Linear`: keep the object's own name.
            let name =
                if long == "torch.nn.modules." { rest.rsplit('.').next().unwrap_or(rest) } else { rest };
            return Cow::Owned(format!("{short}{name}"));
        }
    }
    q
}

/// A node index for the `i`th binding: `NodeIndex::from` reserves the top values.
fn node_index(i: usize) -> Option<ruff_python_ast::NodeIndex> {
    u32::try_from(i).ok().filter(|&i| i < u32::MAX - 2).map(ruff_python_ast::NodeIndex::from)
}

/// The canonical name of an attribute callee, worked out once when the model is built.
enum CalleeName {
    /// Not a dotted name of an import.
    Unknown,
    /// The callee's own text (`torch.nn.functional.relu`, imported as `import torch`).
    AsWritten,
    Named(Box<str>),
}

/// A function whose body waits to be visited, with what it sees.
struct Deferred {
    function: FunctionId,
    scope: ScopeId,
    /// The function is decorated with `@torch.no_grad()` (or runs inside such a function).
    no_grad: bool,
}

struct Builder<'a> {
    model: Model<'a>,
    scope: ScopeId,
    function: Option<FunctionId>,
    /// The class whose body is being visited (not its methods).
    class_body: Option<ClassId>,
    loop_stack: Vec<LoopId>,
    deferred: Vec<Deferred>,
    /// Inside `with torch.no_grad()` blocks (and `@torch.no_grad()` functions).
    no_grad: usize,
    /// Nesting of statements and expressions: past [`MAX_DEPTH`] the builder stops descending.
    depth: usize,
}

/// The deepest nesting of statements and expressions analysed: the limit of the depth estimate
/// that decides which files are parsed ([`super::depth::MAX_DEPTH`]), so that every tree it lets
/// through is analysed whole. Past it, the builder stops and says where.
pub(crate) const MAX_DEPTH: usize = super::depth::MAX_DEPTH;

/// Where a bound name's value comes from, before the target's shape says which part it takes.
#[derive(Clone, Copy)]
enum Source<'a> {
    Assign { value: &'a Expr, annotation: Option<&'a Expr> },
    Aug { value: &'a Expr, op: ast::Operator },
    Loop { iter: &'a Expr },
    With,
}

impl<'a> Source<'a> {
    fn kind(self, part: Part) -> BindingKind<'a> {
        match self {
            Source::Assign { value, annotation } => BindingKind::Assignment { value, part, annotation },
            Source::Aug { value, op } => BindingKind::AugAssignment { value, op },
            Source::Loop { iter } => BindingKind::LoopVar { iter, part },
            Source::With => BindingKind::WithItem,
        }
    }

    fn value(self) -> Option<&'a Expr> {
        match self {
            Source::Assign { value, .. } => Some(value),
            _ => None,
        }
    }
}

impl<'a> Builder<'a> {
    fn push_scope(&mut self, kind: ScopeKind) -> ScopeId {
        let id = ScopeId::new(self.model.scopes.len());
        self.model.scopes.push(Scope { kind, parent: Some(self.scope), outer: FxHashSet::default() });
        self.scope = id;
        id
    }

    fn pop_scope(&mut self) {
        if let Some(parent) = self.model.scopes[self.scope.index()].parent {
            self.scope = parent;
        }
    }

    /// The scope an assignment to `name` binds in: here, unless declared `global`/`nonlocal`.
    fn binding_scope(&self, name: &str) -> ScopeId {
        let here = &self.model.scopes[self.scope.index()];
        if !here.outer.contains(name) {
            return self.scope;
        }
        // `nonlocal` binds in the nearest enclosing function that has the name; `global` (and a
        // `nonlocal` that finds none) in the module.
        let mut at = here.parent;
        while let Some(id) = at {
            let s = &self.model.scopes[id.index()];
            if matches!(s.kind, ScopeKind::Function(_)) && self.model.names.contains_key(&(id, name)) {
                return id;
            }
            at = s.parent;
        }
        ScopeId(0)
    }

    fn bind(&mut self, name: &'a str, kind: BindingKind<'a>) -> BindingId {
        let scope = self.binding_scope(name);
        let id = BindingId::new(self.model.bindings.len());
        let shadowed = self.model.names.insert((scope, name), id);
        self.model.bindings.push(Binding { name, kind, shadowed, in_no_grad: self.no_grad > 0 });
        id
    }

    /// Binds a target name; the name node records the binding it made ([`Model::definition_of`]),
    /// as a name that is read records the one it saw.
    fn bind_name(&mut self, n: &'a ast::ExprName, kind: BindingKind<'a>) -> BindingId {
        let id = self.bind(n.id.as_str(), kind);
        if let Some(i) = node_index(id.index()) {
            n.node_index.set(i);
        }
        id
    }

    fn resolve(&mut self, name: &ast::ExprName) {
        // The name node itself records the binding it saw (ruff's trees carry a node index that
        // the parser leaves unset): reading it back is a load, not a hash lookup. A model built
        // again on the same tree records the same bindings.
        if let Some(i) = self.model.lookup(self.scope, name.id.as_str()).and_then(|b| node_index(b.index())) {
            name.node_index.set(i);
        }
    }

    /// The method (and its class and receiver name) whose body the builder is in, through
    /// nested functions.
    fn method(&self) -> Option<(FunctionId, ClassId, &'a str)> {
        let mut at = self.function;
        while let Some(f) = at {
            let fun = &self.model.functions[f.index()];
            if let (Some(class), Some(receiver)) = (fun.class, fun.receiver) {
                return Some((f, class, receiver));
            }
            at = fun.parent;
        }
        None
    }

    fn note_attr(&mut self, target: &'a ast::ExprAttribute, value: Option<&'a Expr>, how: AttrHow) {
        let Some((method, class, receiver)) = self.method() else { return };
        let Expr::Name(n) = &*target.value else { return };
        if n.id.as_str() != receiver {
            return;
        }
        self.model.classes[class.index()].attrs.push(AttrAssign {
            name: target.attr.as_str(),
            value,
            how,
            method,
            range: target.range,
        });
    }

    /// `self.register_buffer("name", value)` and its kin, `setattr(self, "name", value)`; also
    /// through a local alias (`rb = self.register_buffer`, or `register_buffer = lambda name, val:
    /// self.register_buffer(name, val.float())`, as diffusion models write it).
    fn note_registration(&mut self, call: &'a ast::ExprCall) {
        let Some((method, class, receiver)) = self.method() else { return };
        let args = &call.arguments;
        let registration = |attr: &ast::ExprAttribute, args: &ast::Arguments| {
            if !matches!(&*attr.value, Expr::Name(n) if n.id.as_str() == receiver) {
                return None;
            }
            Some(match attr.attr.as_str() {
                "register_buffer" => {
                    let persistent = !args
                        .find_keyword("persistent")
                        .is_some_and(|k| matches!(k.value, Expr::BooleanLiteral(ref b) if !b.value));
                    (AttrHow::Buffer { persistent }, 0, "tensor")
                }
                "register_parameter" => (AttrHow::Parameter, 0, "param"),
                "add_module" | "register_module" => (AttrHow::Module, 0, "module"),
                _ => return None,
            })
        };
        let (how, name_at, value_key) = match &*call.func {
            Expr::Attribute(a) => match registration(a, args) {
                Some(r) => r,
                None => return,
            },
            Expr::Name(f) if f.id.as_str() == "setattr" => {
                if !matches!(args.args.first(), Some(Expr::Name(n)) if n.id.as_str() == receiver) {
                    return;
                }
                (AttrHow::SetAttr, 1, "value")
            }
            Expr::Name(f) => {
                // A local name bound to the registration, or to a lambda that calls it with the
                // name it is given first.
                let Some(b) = self.model.lookup(self.scope, f.id.as_str()) else { return };
                let BindingKind::Assignment { value, part: Part::Whole, .. } = self.model.binding(b).kind
                else {
                    return;
                };
                let through = match value {
                    Expr::Attribute(a) => registration(a, args),
                    Expr::Lambda(l) => {
                        let first = l
                            .parameters
                            .as_deref()
                            .and_then(|p| p.args.first())
                            .map(|p| p.parameter.name.as_str());
                        match &*l.body {
                            Expr::Call(inner) => match (&*inner.func, inner.arguments.args.first()) {
                                (Expr::Attribute(a), Some(Expr::Name(n))) if Some(n.id.as_str()) == first => {
                                    registration(a, &inner.arguments)
                                }
                                _ => None,
                            },
                            _ => None,
                        }
                    }
                    _ => None,
                };
                match through {
                    // The alias is called with the name first and the value second.
                    Some((how, _, _)) => (how, 0, "value"),
                    None => return,
                }
            }
            _ => return,
        };
        let Some(Expr::StringLiteral(name)) = args.find_argument_value("name", name_at) else { return };
        let value = args.find_argument_value(value_key, name_at + 1);
        let name = name.value.to_str();
        self.model.classes[class.index()].attrs.push(AttrAssign {
            name,
            value,
            how,
            method,
            range: call.range(),
        });
    }

    fn bind_target(&mut self, target: &'a Expr, source: Source<'a>, part: Part) {
        match target {
            Expr::Name(n) => {
                self.bind_name(n, source.kind(part));
            }
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                let star = elts.iter().position(Expr::is_starred_expr);
                for (i, e) in elts.iter().enumerate() {
                    let p = if part != Part::Whole || star.is_some_and(|s| i >= s) {
                        Part::Unknown
                    } else {
                        Part::Element(i)
                    };
                    self.bind_target(e, source, p);
                }
            }
            Expr::Starred(s) => self.bind_target(&s.value, source, Part::Unknown),
            Expr::Attribute(a) => {
                self.visit_expr(&a.value);
                let value = if part == Part::Whole { source.value() } else { None };
                let how =
                    if matches!(source, Source::Aug { .. }) { AttrHow::Update } else { AttrHow::Assign };
                self.note_attr(a, value, how);
            }
            Expr::Subscript(s) => {
                self.visit_expr(&s.value);
                self.visit_expr(&s.slice);
                // `self.heads[name] = nn.Linear(..)`: an update that puts a value in.
                if let Expr::Attribute(a) = &*s.value {
                    let value = if part == Part::Whole { source.value() } else { None };
                    self.note_attr(a, value, AttrHow::Update);
                }
            }
            _ => self.visit_expr(target),
        }
    }

    fn bind_parameters(&mut self, parameters: &'a Parameters, function: Option<FunctionId>) {
        for (position, p) in parameters.posonlyargs.iter().chain(&parameters.args).enumerate() {
            self.bind(
                p.parameter.name.as_str(),
                BindingKind::Parameter {
                    function,
                    position,
                    annotation: p.parameter.annotation.as_deref(),
                    default: p.default.as_deref(),
                    variadic: false,
                },
            );
        }
        for p in parameters.vararg.iter().chain(&parameters.kwarg) {
            self.bind(
                p.name.as_str(),
                BindingKind::Parameter {
                    function,
                    position: usize::MAX,
                    annotation: p.annotation.as_deref(),
                    default: None,
                    variadic: true,
                },
            );
        }
        for p in &parameters.kwonlyargs {
            self.bind(
                p.parameter.name.as_str(),
                BindingKind::Parameter {
                    function,
                    position: usize::MAX,
                    annotation: p.parameter.annotation.as_deref(),
                    default: p.default.as_deref(),
                    variadic: false,
                },
            );
        }
    }

    /// Defaults and annotations are evaluated where the `def` or `lambda` is.
    fn visit_parameter_exprs(&mut self, parameters: &'a Parameters) {
        for p in parameters.iter_non_variadic_params() {
            if let Some(d) = &p.default {
                self.visit_expr(d);
            }
            if let Some(a) = &p.parameter.annotation {
                self.visit_expr(a);
            }
        }
        for p in parameters.vararg.iter().chain(&parameters.kwarg) {
            if let Some(a) = &p.annotation {
                self.visit_expr(a);
            }
        }
    }

    fn function_def(&mut self, def: &'a ast::StmtFunctionDef) {
        for d in &def.decorator_list {
            self.visit_expr(&d.expression);
        }
        self.visit_parameter_exprs(&def.parameters);
        if let Some(r) = &def.returns {
            self.visit_expr(r);
        }
        let decorated = |name: &str| {
            def.decorator_list.iter().any(|d| match &d.expression {
                Expr::Name(n) => n.id.as_str() == name,
                _ => false,
            })
        };
        let class = match self.model.scopes[self.scope.index()].kind {
            ScopeKind::Class(c) => Some(c),
            _ => None,
        };
        let is_staticmethod = decorated("staticmethod");
        let is_classmethod = decorated("classmethod");
        let receiver = if class.is_some() && !is_staticmethod {
            let p = &def.parameters;
            p.posonlyargs.first().or(p.args.first()).map(|p| p.parameter.name.as_str())
        } else {
            None
        };
        let id = FunctionId::new(self.model.functions.len());
        self.model.functions.push(Function {
            def,
            scope: None,
            class,
            parent: self.function,
            receiver,
            is_classmethod,
            returns: Vec::new(),
        });
        self.model.functions_by_start.insert(def.name.start(), id);
        if let Some(c) = class {
            self.model.methods.insert((c, def.name.as_str()), id);
        }
        self.bind(def.name.as_str(), BindingKind::FunctionDef(id));
        let no_grad = self.no_grad > 0 || def.decorator_list.iter().any(|d| self.is_no_grad(&d.expression));
        self.deferred.push(Deferred { function: id, scope: self.scope, no_grad });
    }

    fn visit_function_body(&mut self, d: Deferred) {
        let def = self.model.functions[d.function.index()].def;
        self.scope = d.scope;
        let scope = self.push_scope(ScopeKind::Function(d.function));
        self.model.functions[d.function.index()].scope = Some(scope);
        self.function = Some(d.function);
        self.class_body = None;
        self.loop_stack.clear();
        self.no_grad = usize::from(d.no_grad);
        // `global` and `nonlocal` apply to the whole body, wherever they are written.
        collect_outer_names(&def.body, &mut self.model.scopes[scope.index()].outer);
        self.bind_parameters(&def.parameters, Some(d.function));
        self.visit_body(&def.body);
    }

    fn class_def(&mut self, def: &'a ast::StmtClassDef) {
        for d in &def.decorator_list {
            self.visit_expr(&d.expression);
        }
        if let Some(args) = &def.arguments {
            self.visit_arguments(args);
        }
        let id = ClassId::new(self.model.classes.len());
        self.model.classes.push(Class {
            def,
            scope: None,
            attrs: Vec::new(),
            attr_index: FxHashMap::default(),
        });
        self.model.classes_by_start.insert(def.name.start(), id);
        let scope = self.push_scope(ScopeKind::Class(id));
        self.model.classes[id.index()].scope = Some(scope);
        let saved = self.class_body.replace(id);
        self.visit_body(&def.body);
        self.class_body = saved;
        self.pop_scope();
        self.bind(def.name.as_str(), BindingKind::ClassDef(id));
    }

    fn loop_stmt(&mut self, stmt: &'a Stmt) {
        let id = LoopId::new(self.model.loops.len());
        let parent = self.loop_stack.last().copied();
        if let Some(p) = parent {
            self.model.loops[p.index()].has_inner_loop = true;
        }
        self.model.loops.push(Loop { stmt, function: self.function, parent, has_inner_loop: false });
        self.model.loops_by_start.insert(stmt.start(), id);
        match stmt {
            Stmt::For(f) => {
                self.visit_expr(&f.iter);
                self.loop_stack.push(id);
                self.bind_target(&f.target, Source::Loop { iter: &f.iter }, Part::Whole);
                self.visit_body(&f.body);
                self.loop_stack.pop();
                self.visit_body(&f.orelse);
            }
            Stmt::While(w) => {
                self.loop_stack.push(id);
                self.visit_expr(&w.test);
                self.visit_body(&w.body);
                self.loop_stack.pop();
                self.visit_body(&w.orelse);
            }
            _ => {}
        }
    }

    fn import(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Import(i) => {
                for alias in &i.names {
                    let full = alias.name.as_str();
                    self.note_library(full);
                    match &alias.asname {
                        Some(as_name) => {
                            let name = self.intern(full.to_string());
                            self.bind(as_name.as_str(), BindingKind::Import { name });
                        }
                        None => {
                            // `import a.b` binds `a`.
                            let root = full.split('.').next().unwrap_or(full);
                            self.bind(root, BindingKind::ImportRoot);
                        }
                    }
                }
            }
            Stmt::ImportFrom(i) => {
                let dots = ".".repeat(i.level as usize);
                let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                let base = format!("{dots}{module}");
                if i.level == 0 {
                    self.note_library(module);
                }
                for alias in &i.names {
                    if alias.name.as_str() == "*" {
                        continue;
                    }
                    let bound = alias.asname.as_ref().unwrap_or(&alias.name);
                    let full = if base.is_empty() || base.ends_with('.') {
                        format!("{base}{}", alias.name.as_str())
                    } else {
                        format!("{base}.{}", alias.name.as_str())
                    };
                    let name = self.intern(full);
                    self.bind(bound.as_str(), BindingKind::Import { name });
                }
            }
            _ => {}
        }
    }

    /// `torch.no_grad()` or `torch.inference_mode()`, called or not (as a decorator).
    fn is_no_grad(&self, e: &Expr) -> bool {
        let func = match e {
            Expr::Call(c) => &*c.func,
            other => other,
        };
        self.model.canonical_name(func).is_some_and(|q| is_no_grad_name(&q))
    }

    fn intern(&mut self, full: String) -> usize {
        self.model.imports.push(full);
        self.model.imports.len() - 1
    }

    fn note_library(&mut self, module: &str) {
        if is_torch_library(module) {
            self.model.imports_torch = true;
        }
    }

    fn comprehension(&mut self, generators: &'a [ast::Comprehension], elts: &[&'a Expr]) {
        let Some(first) = generators.first() else { return };
        self.visit_expr(&first.iter);
        self.push_scope(ScopeKind::Comprehension);
        for (i, g) in generators.iter().enumerate() {
            if i > 0 {
                self.visit_expr(&g.iter);
            }
            self.bind_target(&g.target, Source::Loop { iter: &g.iter }, Part::Whole);
            for cond in &g.ifs {
                self.visit_expr(cond);
            }
        }
        for e in elts {
            self.visit_expr(e);
        }
        self.pop_scope();
    }
}

/// Names a function body declares `global` or `nonlocal` (not inside nested functions).
fn collect_outer_names<'a>(body: &'a [Stmt], out: &mut FxHashSet<&'a str>) {
    use ruff_python_ast::statement_visitor::{StatementVisitor, walk_stmt};
    struct Outer<'a, 'o>(&'o mut FxHashSet<&'a str>);
    impl<'a> StatementVisitor<'a> for Outer<'a, '_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::Global(g) => self.0.extend(g.names.iter().map(|n| n.as_str())),
                Stmt::Nonlocal(g) => self.0.extend(g.names.iter().map(|n| n.as_str())),
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                _ => walk_stmt(self, stmt),
            }
        }
    }
    let mut v = Outer(out);
    v.visit_body(body);
}

impl<'a> Visitor<'a> for Builder<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.depth > MAX_DEPTH {
            self.model.too_deep_at.get_or_insert(stmt.range());
            return;
        }
        self.depth += 1;
        match stmt {
            Stmt::FunctionDef(def) => self.function_def(def),
            Stmt::ClassDef(def) => self.class_def(def),
            Stmt::Import(_) | Stmt::ImportFrom(_) => self.import(stmt),
            Stmt::Assign(a) => {
                self.visit_expr(&a.value);
                for t in &a.targets {
                    self.bind_target(t, Source::Assign { value: &a.value, annotation: None }, Part::Whole);
                }
            }
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    self.visit_expr(v);
                }
                self.visit_expr(&a.annotation);
                match (&*a.target, &a.value) {
                    (Expr::Name(n), None) => {
                        self.bind_name(n, BindingKind::Declaration { annotation: &a.annotation });
                    }
                    (_, Some(v)) => self.bind_target(
                        &a.target,
                        Source::Assign { value: v, annotation: Some(&a.annotation) },
                        Part::Whole,
                    ),
                    (t, None) => self.visit_expr(t),
                }
            }
            Stmt::AugAssign(a) => {
                self.visit_expr(&a.value);
                if let Expr::Name(n) = &*a.target
                    && let Some(b) = self.model.lookup(self.scope, n.id.as_str())
                {
                    self.model.aug_reads.insert(n.start(), b);
                }
                self.bind_target(&a.target, Source::Aug { value: &a.value, op: a.op }, Part::Whole);
            }
            Stmt::For(_) | Stmt::While(_) => self.loop_stmt(stmt),
            Stmt::With(w) => {
                let mut no_grad = 0;
                for item in &w.items {
                    self.visit_expr(&item.context_expr);
                    if let Some(vars) = &item.optional_vars {
                        self.bind_target(vars, Source::With, Part::Whole);
                    }
                    no_grad += usize::from(self.is_no_grad(&item.context_expr));
                }
                self.no_grad += no_grad;
                self.visit_body(&w.body);
                self.no_grad -= no_grad;
            }
            Stmt::Try(t) => {
                self.visit_body(&t.body);
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    if let Some(ty) = &h.type_ {
                        self.visit_expr(ty);
                    }
                    if let Some(name) = &h.name {
                        self.bind(name.as_str(), BindingKind::Other);
                    }
                    self.visit_body(&h.body);
                }
                self.visit_body(&t.orelse);
                self.visit_body(&t.finalbody);
            }
            Stmt::Return(r) => {
                if let Some(v) = &r.value {
                    self.visit_expr(v);
                    if let Some(f) = self.function {
                        self.model.functions[f.index()].returns.push(v);
                    }
                }
            }
            Stmt::Global(_) | Stmt::Nonlocal(_) => {}
            _ => visitor::walk_stmt(self, stmt),
        }
        self.depth -= 1;
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.depth > MAX_DEPTH {
            self.model.too_deep_at.get_or_insert(expr.range());
            return;
        }
        self.depth += 1;
        match expr {
            Expr::Name(n) => {
                if n.ctx == ExprContext::Load {
                    self.resolve(n);
                }
            }
            Expr::Call(call) => {
                self.model.calls.push(CallSite {
                    call,
                    function: self.function,
                    in_loop: self.loop_stack.last().copied(),
                });
                self.note_registration(call);
                visitor::walk_expr(self, expr);
            }
            Expr::Named(n) => {
                self.visit_expr(&n.value);
                self.bind_target(
                    &n.target,
                    Source::Assign { value: &n.value, annotation: None },
                    Part::Whole,
                );
            }
            Expr::Lambda(l) => {
                if let Some(p) = &l.parameters {
                    self.visit_parameter_exprs(p);
                }
                self.push_scope(ScopeKind::Lambda);
                if let Some(p) = &l.parameters {
                    self.bind_parameters(p, None);
                }
                self.visit_expr(&l.body);
                self.pop_scope();
            }
            Expr::ListComp(c) => self.comprehension(&c.generators, &[&c.elt]),
            Expr::SetComp(c) => self.comprehension(&c.generators, &[&c.elt]),
            Expr::Generator(c) => self.comprehension(&c.generators, &[&c.elt]),
            Expr::DictComp(c) => {
                let elts: Vec<&Expr> = c.key.as_deref().into_iter().chain([&*c.value]).collect();
                self.comprehension(&c.generators, &elts);
            }
            _ => visitor::walk_expr(self, expr),
        }
        self.depth -= 1;
    }
}

/// Is a module one of torch's or of a library that only runs on torch (a Lightning module's file
/// need not import torch itself)? Its importer's tensors are torch's.
pub(crate) fn is_torch_library(module: &str) -> bool {
    let root = module.split('.').next().unwrap_or(module);
    matches!(
        root,
        "torch"
            | "torchvision"
            | "torchaudio"
            | "lightning"
            | "pytorch_lightning"
            | "lightning_fabric"
            | "torchmetrics"
            | "torch_geometric"
    )
}

#[cfg(test)]
mod tests {
    use ruff_python_ast::visitor::{self, Visitor};

    use super::*;

    /// Every name in `body`, in source order.
    fn names(body: &[Stmt]) -> Vec<&ast::ExprName> {
        struct Names<'a>(Vec<&'a ast::ExprName>);
        impl<'a> Visitor<'a> for Names<'a> {
            fn visit_expr(&mut self, e: &'a Expr) {
                if let Expr::Name(n) = e {
                    self.0.push(n);
                }
                visitor::walk_expr(self, e);
            }
        }
        let mut v = Names(Vec::new());
        v.visit_body(body);
        v.0.sort_by_key(|n| n.start());
        v.0
    }

    /// A target records the binding it made and a read name the one it saw; the target of
    /// `x += 1` has both: the `x` it read and the `x` it binds.
    #[test]
    fn targets_record_their_definitions_and_reads_their_bindings() {
        let text = "x = 1\nx += 2\ny: int\nprint(x, y)\n";
        let parsed = ruff_python_parser::parse_module(text).expect("valid");
        let body = &parsed.syntax().body;
        let model = Model::build(text, body);
        let [x1, x2, y, _int, print, x3, y2] = names(body)[..] else { panic!("seven names") };
        let first = model.definition_of(x1).expect("x = 1 binds x");
        assert_eq!(model.binding_of(x1), None, "a plain target reads nothing");
        let second = model.definition_of(x2).expect("x += 2 binds x");
        assert_ne!(first, second);
        assert_eq!(model.binding_of(x2), Some(first), "x += 2 reads the x before it");
        assert!(matches!(model.binding(second).kind, BindingKind::AugAssignment { .. }));
        let declared = model.definition_of(y).expect("y: int declares y");
        assert!(matches!(model.binding(declared).kind, BindingKind::Declaration { .. }));
        // Reads see the latest binding and define nothing.
        assert_eq!(model.binding_of(x3), Some(second));
        assert_eq!(model.binding_of(y2), Some(declared));
        assert_eq!(model.definition_of(x3), None);
        assert_eq!(model.binding_of(print), None, "a builtin is bound to nothing");
    }
}
