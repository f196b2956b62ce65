//! The rules' pass: one walk over the tree in source order, with the finished model at hand and
//! the context of each node (the function, the loops, the branch, the `with` blocks around it).
//! The walk only matches on node kinds and calls the enabled rules; rules read the model and the
//! context, report, and never change either.
//!
//! Before the walk, whole-file facts are computed once: the call graph between functions of the
//! file, which functions run inside a hot loop of their callers (the loop context carried into
//! same-file callees), which run as part of a forward pass, and whether the file is an
//! application (a script) rather than library code.

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use crate::diagnostic::Finding;
use crate::source::FileKind;

use super::api;
use super::model::{AttrHow, BindingId, BindingKind, Callee, FunctionId, LoopId, MAX_DEPTH, Model, Part};
use super::project::{CalledFrom, Calls, HotCall, ProjectCall, View};
use super::rules::Rules;
use super::rules::helpers::{NameWords, name_words, names_accelerator};
use super::typing::{Kind, Truth, Types};

/// What a method keeps of its parameters ([`super::project::kept_parameters`]), shared.
pub(crate) type KeptParameters = std::rc::Rc<[(String, usize)]>;

/// A rule of the Python front end.
pub(crate) trait Rule {
    /// What the walk shows the rule: the kinds of expression [`Rule::expr`] looks at, and
    /// whether it looks at statements ([`Reads::STATEMENT`]) or at the tests of `if` and `while`
    /// ([`Reads::TEST`]). The walk calls the rule for those only: most expressions are names and
    /// literals, which no rule reads on their own, and most rules read no statement.
    fn reads(&self) -> Reads {
        Reads::NOTHING
    }
    fn stmt(&mut self, _cx: &Checker<'_, '_>, _stmt: &Stmt, _out: &mut Vec<Finding>) {}
    fn expr(&mut self, _cx: &Checker<'_, '_>, _expr: &Expr, _out: &mut Vec<Finding>) {}
    /// The calls [`Rule::expr`] looks at, by their last name: the method (`numpy` for
    /// `x.numpy()`) or the last part of the callee's canonical name (`load` for `torch.load`,
    /// however imported). Empty: every call.
    fn calls(&self) -> &'static [&'static str] {
        &[]
    }
    /// The test of an `if`, `elif`, `while` or `assert` (`if loss:`), before [`Rule::expr`] sees it.
    fn test(&mut self, _cx: &Checker<'_, '_>, _test: &Expr, _out: &mut Vec<Finding>) {}
    /// After the walk: rules about the whole file (classes, data loaders).
    fn finish(&mut self, _cx: &Checker<'_, '_>, _out: &mut Vec<Finding>) {}
}

/// A set of expression kinds, for [`Rule::reads`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reads(u8);

impl Reads {
    pub const NOTHING: Reads = Reads(0);
    pub const CALL: Reads = Reads(1);
    pub const ATTRIBUTE: Reads = Reads(1 << 1);
    /// Binary operators and comparisons.
    pub const OPERATOR: Reads = Reads(1 << 2);
    pub const SUBSCRIPT: Reads = Reads(1 << 3);
    /// f-strings.
    pub const FORMAT: Reads = Reads(1 << 4);
    /// Every statement ([`Rule::stmt`]).
    pub const STATEMENT: Reads = Reads(1 << 5);
    /// The tests of `if`, `elif` and `while` ([`Rule::test`]).
    pub const TEST: Reads = Reads(1 << 6);

    /// The number of expression kinds a rule can read (the first bits, in the order of
    /// [`Reads::index_of`]).
    const KINDS: usize = 5;

    /// The kind of `e` as an index below [`Reads::KINDS`] (`None` for kinds no rule reads).
    fn index_of(e: &Expr) -> Option<usize> {
        match e {
            Expr::Call(_) => Some(0),
            Expr::Attribute(_) => Some(1),
            Expr::BinOp(_) | Expr::Compare(_) => Some(2),
            Expr::Subscript(_) => Some(3),
            Expr::FString(_) => Some(4),
            _ => None,
        }
    }

    pub(crate) fn meets(self, other: Reads) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for Reads {
    type Output = Reads;
    fn bitor(self, other: Reads) -> Reads {
        Reads(self.0 | other.0)
    }
}

/// A node on the path from the module to the one being checked.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Node<'a> {
    Stmt(&'a Stmt),
    Expr(&'a Expr),
}

/// Why a function's body runs again and again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hot {
    /// It is `forward` of a module, or called from one: it runs at every step and every layer.
    Forward,
    /// It is called inside an inner loop (per step, per token, per layer) of a function of this
    /// file; the range is that call.
    CalledInLoop(TextRange),
    /// It is called at every step from another file of the project: an index into
    /// [`Facts::elsewhere`].
    CalledElsewhere(usize),
    /// It is a method that takes one training step itself (`loss.backward()` and an optimizer's
    /// `.step()` in its own body, outside any loop), and nothing the project shows calls it: a
    /// trainer's framework calls it once per step. The range is the `backward()` call.
    Step(TextRange),
}

/// What the loops around a place make of it.
enum Heat {
    /// A loop that queues device work at every iteration (a step loop): the place runs at every
    /// step.
    Work(LoopId),
    /// A loop around a loop of steps (over epochs): the place runs once per epoch.
    Outer,
    /// Loops that queue no device work (over items, over a dict's entries): as often as the
    /// function runs.
    Cold,
}

/// What is known about the whole file before the rules run.
pub(crate) struct Facts {
    /// Per function: whether it is a forward pass (or called from one).
    forward: Vec<bool>,
    /// Per function: why its body runs in a hot loop, if it does.
    hot: Vec<Option<Hot>>,
    /// Per loop: an iteration queues device work (here or in a function it calls).
    loop_work: Vec<bool>,
    /// Per loop: the loop runs a working loop inside (directly or through a call): an outer loop,
    /// such as one over epochs.
    outer_loop: Vec<bool>,
    /// Per loop: its body steps the training (`loss.backward()`, `optimizer.step()`, or a
    /// function of this file that does once).
    steps_training: Vec<bool>,
    /// The file is a script, a test or an example: where choosing a device is fine.
    pub application: bool,
    /// `torch.set_default_device(..)` is called somewhere: tensors made with no device follow it.
    pub sets_default_device: bool,
    /// The file mentions an accelerator (`cuda`, `mps`, ...): tensors may be on one.
    pub uses_accelerator: bool,
    /// The file, or another file of its project, mentions an accelerator: the losses and outputs
    /// its training code handles may be on one even when it never names a device (a PPO update
    /// in `algo/ppo.py`, given its model by `main.py`).
    pub project_uses_accelerator: bool,
    /// The file's name has `cuda` or `gpu` as a word (`accelerators/cuda.py`, `gpu_utils.py`),
    /// or `mps`: code about that accelerator.
    pub file_named_for_cuda: bool,
    /// A module of models other files of the project import from, not named for what it runs
    /// (`train.py`) and reading no command line: its `__main__` block is the module's own check
    /// or benchmark ([`Checker::hot`]).
    pub self_check_main: bool,
    /// The file is named for evaluation (`val.py`, `val_dual.py`, `evaluate.py`, `test.py`): its
    /// loops that train nothing are an evaluation pass ([`super::rules::helpers::in_evaluation_pass`]).
    pub file_named_for_evaluation: bool,
    /// Some call of the file steps the training (`loss.backward()`, `optimizer.step()`).
    pub trains: bool,
    pub file_named_for_mps: bool,
    /// The file is in a folder of tests (`tests/`, `test/`): a test, or a script that checks or
    /// compares something by hand, whose speed is not a run's.
    pub in_tests_folder: bool,
    /// The file is named for tests (`test.py`, `dcn_test.py`) and compares results by hand
    /// (`torch.allclose`, `gradcheck`): a check of an op or a model, run by hand, whose speed is
    /// not a run's.
    pub checks_by_hand: bool,
    /// Where a call reads a wall clock (`time.time()`, `time.perf_counter()`, ...): per
    /// function (the innermost `def` around the call), and at the top level.
    clock_in: Vec<bool>,
    clock_at_top: bool,
    /// Bindings whose value `.backward()` is called on (`loss = ..; loss.backward()`), and the
    /// terms of their sums ([`losses`]): the autograd graph, where the model is, whatever built it.
    pub backward: FxHashSet<BindingId>,
    /// Bindings a loss is computed from through tensor operations (`ratio` in
    /// `loss = -torch.min(adv * ratio, ..).mean()`): on the loss's device, whatever built them
    /// ([`loss_inputs`]).
    pub loss_inputs: FxHashSet<BindingId>,
    /// Bindings `.backward()` is called on by name (`loss` in `loss.backward()`).
    pub backward_roots: FxHashSet<BindingId>,
    /// Per function: the calls of this file that call it by name (indices into the model's
    /// calls), so a question about its callers does not scan every call of the file.
    pub calls_to: Vec<Vec<usize>>,
    /// Per function, the names whose `.device` one of its calls takes (`.to(t.device)`,
    /// `device=t.device`): its author expects those off the CPU.
    pub device_taken_from: FxHashSet<(FunctionId, ruff_python_ast::name::Name)>,
    /// This file's functions that other files of the project call at every step
    /// ([`super::project`]).
    pub elsewhere: Vec<CalledFrom>,
    /// Per function: no run the repository makes reaches it — every known call of it is on a
    /// branch a run with the project's default options never takes (`if args.gail:`) or in a
    /// function no run reaches, or nothing in the repository names it ([`latent_functions`]).
    latent: Vec<bool>,
    /// Per function: it is (or is inside) a top-level function or class nothing in the
    /// repository names ([`super::references`]).
    unreferenced: Vec<bool>,
}

/// The rules' view of the file and of the node being checked.
pub(crate) struct Checker<'m, 'a> {
    pub model: &'m Model<'a>,
    pub types: Types<'m, 'a>,
    pub kind: FileKind,
    pub facts: Facts,
    /// The function whose body holds the node (innermost).
    pub function: Option<FunctionId>,
    /// The loops around the node, innermost last, in the same function.
    pub loops: Vec<LoopId>,
    /// The path from the module to the node (the node itself not included).
    pub parents: Vec<Node<'a>>,
    /// Inside an `except` clause.
    pub in_except: usize,
    /// Inside a branch taken only now and then: `if step % 100 == 0`, `if args.verbose`.
    pub gated: usize,
    /// Inside a branch a run with the project's default options never takes (`if args.gail:`,
    /// [`super::options`]).
    opt_in: usize,
    /// Inside `with torch.device(..)`: tensors made without a device land there.
    pub device_block: usize,
    /// The `with torch.device(..)` blocks walked so far: a name bound in one holds a tensor made
    /// on that device, wherever it is used.
    pub device_blocks: Vec<TextRange>,
    /// Inside `with torch.no_grad()` / `inference_mode()` or a function decorated with one.
    pub no_grad: usize,
    /// Inside `if __name__ == "__main__":`.
    pub main_block: usize,
    /// The module's statements.
    pub module_body: &'a [Stmt],
    depth: usize,
    /// For each expression kind ([`Reads::index_of`]), the enabled rules whose `expr` reads it.
    /// (A bit per rule: the walk asks this of every expression.)
    readers: [u32; Reads::KINDS],
    /// The enabled rules that read statements, and the tests of `if` and `while`.
    stmt_readers: u32,
    test_readers: u32,
    /// The rules that read only some calls ([`Rule::calls`]), and for each last name, the rules
    /// that read calls of that name.
    call_filtered: u32,
    call_names: Vec<(&'static str, u32)>,
    /// The call being checked and its callee's canonical name, worked out once for every rule
    /// that reads the call ([`Checker::callee_name`]).
    callee: Option<(TextRange, Option<std::borrow::Cow<'m, str>>)>,
    /// What the file's calls put into containers held by instances of each class
    /// (`self.heads.append(..)`), worked out once for the file ([`super::fields`]).
    pub(super) container_puts: std::cell::OnceCell<super::fields::ContainerPuts>,
    /// Calls to functions of other files of the project, for their files.
    calls: Calls,
    /// The calls of the file that call an attribute of an instance of each class
    /// (`self.net(x)`), worked out once for the file ([`super::fields`]).
    pub(super) attribute_calls: std::cell::OnceCell<super::fields::ContainerPuts>,
    /// The file's top-level functions whose every result is on the host, worked out once for the
    /// file ([`super::project::host_functions`]).
    host_functions: std::cell::OnceCell<FxHashSet<String>>,
    /// What the file's statements put into each container a name holds (`d[k] = v`,
    /// `d.append(v)`), by the container's binding: one pass over the file's statements.
    pub(crate) puts: FxHashMap<BindingId, Vec<&'a Expr>>,
    /// The steps left to the provenance query under way ([`super::rules::helpers::provenance`]):
    /// containers of containers fan out, so a query stops (knowing nothing) after so many.
    pub(crate) provenance_steps: std::cell::Cell<u32>,
    /// Per nested function asked about: does it return only host values?
    pub(crate) nested_host: std::cell::RefCell<FxHashMap<FunctionId, bool>>,
    /// Per loop: does its body call a function named for prediction
    /// ([`super::rules::helpers::in_evaluation_pass`])? Asked of every place in the loop.
    pub(crate) calls_prediction: std::cell::RefCell<FxHashMap<LoopId, bool>>,
    /// Per loop: does it walk evaluation data, or start with a model put in evaluation mode
    /// ([`super::rules::helpers::in_evaluation_pass`])? Asked of every place in the loop.
    pub(crate) evaluates: std::cell::RefCell<FxHashMap<LoopId, bool>>,
    /// Per name bound to a module a function makes: is it kept where it was made, never moved
    /// nor handed over ([`super::rules::helpers::provenance_in_project`])?
    pub(crate) kept_modules: std::cell::RefCell<FxHashMap<BindingId, bool>>,
    /// Per function (and whether a function named for prediction leads to it): is it run by loops
    /// over inputs only ([`super::rules::helpers::in_evaluation_pass`])?
    pub(crate) per_input: std::cell::RefCell<FxHashMap<(FunctionId, bool), bool>>,
    /// Per function: the values its own body's top-level assignments bind (by address), for
    /// [`super::rules`]' question whether a name holds one everywhere after it.
    pub(crate) straight_line: std::cell::RefCell<FxHashMap<FunctionId, FxHashSet<usize>>>,
    /// Per parameter (function, position) of a function that runs its own loop: whether some call
    /// of it in this file passes a tensor on the accelerator, worked out once (`None` while it is
    /// being worked out, which a cycle of calls reads as no).
    pub(crate) passed_by_callers: std::cell::RefCell<FxHashMap<(FunctionId, usize), Option<bool>>>,
    /// Per attribute of a plain class asked about (class, name): where what its methods assign to
    /// it is, worked out once (`None` while it is being worked out: a cycle reads as nowhere).
    /// Per method of this file: what it keeps of its parameters
    /// ([`super::project::kept_parameters`]), worked out once.
    pub(crate) kept: std::cell::RefCell<FxHashMap<FunctionId, KeptParameters>>,
    pub(crate) plain_attributes: std::cell::RefCell<
        FxHashMap<(super::model::ClassId, String), Option<super::rules::helpers::Provenance>>,
    >,
    /// Per function of the file asked about: where the one value its `return`s give is (`None`
    /// while it is being worked out: a cycle reads as nowhere; no entry's value when a `return`
    /// gives a tuple), worked out once ([`super::rules::helpers::returned_value`]).
    /// For a binding made inside a branch a CUDA run never takes (`if mode == "cpu": x = x.cpu()`),
    /// that branch's statements ([`super::rules::helpers`]); worked out once per binding.
    pub(crate) other_device_branches: std::cell::RefCell<FxHashMap<BindingId, Option<TextRange>>>,
    /// The file's functions by where their `def` starts, sorted, made once
    /// ([`super::rules::helpers`]'s innermost function around an offset).
    pub(crate) function_starts: std::cell::OnceCell<Vec<(ruff_text_size::TextSize, FunctionId)>>,
    pub(crate) returned_values:
        std::cell::RefCell<FxHashMap<FunctionId, Option<Option<super::rules::helpers::Provenance>>>>,
    /// Set when a provenance query stopped at its depth or step limit, knowing nothing: an answer
    /// worked out under it is not final, and is not memoised.
    pub(crate) provenance_cut: std::cell::Cell<bool>,
    /// Per Lightning `training_step`: the names its `return`s mention, worked out once
    /// ([`super::rules::helpers::binding_is_device_loss`]).
    pub(crate) returned_names: std::cell::RefCell<FxHashMap<FunctionId, Vec<BindingId>>>,
    /// Per function run at every step from a loop of this file: whether one of its calls needs
    /// what it returns on the host, worked out once (D005's `callers_need_result`).
    pub(crate) callers_need_result: std::cell::RefCell<FxHashMap<FunctionId, Option<bool>>>,
    /// Per function (`None`: the module's statements outside one), the arrays written into after
    /// they are made (D005's `fills_keep_constant`), worked out once.
    pub(crate) filled_arrays: std::cell::RefCell<FxHashMap<Option<FunctionId>, FxHashSet<BindingId>>>,
    /// Per such array: whether every write keeps it a constant (`k[1, 1] = -4 * alpha`), worked
    /// out once.
    pub(crate) constant_fills: std::cell::RefCell<FxHashMap<BindingId, bool>>,
    /// Per function of this file: whether it moves everything it returns to the device
    /// ([`super::project::returns_device`]), worked out once.
    pub(crate) moves_results: std::cell::RefCell<FxHashMap<FunctionId, bool>>,
    /// Per function of this file: whether it makes every result on the host, unless given which
    /// parameter ([`super::project::returns_host_made`]), worked out once.
    pub(crate) makes_on_host: std::cell::RefCell<FxHashMap<FunctionId, Option<super::project::Unless>>>,
}

impl<'m, 'a> Checker<'m, 'a> {
    pub fn new(model: &'m Model<'a>, kind: FileKind, path: &std::path::Path, project: View<'m>) -> Self {
        let types = Types::new(model, project);
        let facts = Facts::gather(model, &types, kind, path);
        Checker {
            model,
            types,
            kind,
            facts,
            function: None,
            loops: Vec::new(),
            parents: Vec::new(),
            in_except: 0,
            gated: 0,
            opt_in: 0,
            device_block: 0,
            device_blocks: Vec::new(),
            no_grad: 0,
            main_block: 0,
            module_body: &[],
            depth: 0,
            readers: Default::default(),
            stmt_readers: 0,
            test_readers: 0,
            call_filtered: 0,
            call_names: Vec::new(),
            callee: None,
            container_puts: std::cell::OnceCell::new(),
            attribute_calls: std::cell::OnceCell::new(),
            host_functions: std::cell::OnceCell::new(),
            puts: FxHashMap::default(),
            provenance_steps: std::cell::Cell::new(0),
            nested_host: std::cell::RefCell::new(FxHashMap::default()),
            calls_prediction: std::cell::RefCell::new(FxHashMap::default()),
            evaluates: std::cell::RefCell::new(FxHashMap::default()),
            kept_modules: std::cell::RefCell::new(FxHashMap::default()),
            per_input: std::cell::RefCell::new(FxHashMap::default()),
            straight_line: std::cell::RefCell::new(FxHashMap::default()),
            passed_by_callers: std::cell::RefCell::new(FxHashMap::default()),
            plain_attributes: std::cell::RefCell::new(FxHashMap::default()),
            kept: std::cell::RefCell::new(FxHashMap::default()),
            returned_values: std::cell::RefCell::new(FxHashMap::default()),
            other_device_branches: std::cell::RefCell::new(FxHashMap::default()),
            function_starts: std::cell::OnceCell::new(),
            provenance_cut: std::cell::Cell::new(false),
            returned_names: std::cell::RefCell::new(FxHashMap::default()),
            callers_need_result: std::cell::RefCell::new(FxHashMap::default()),
            filled_arrays: std::cell::RefCell::new(FxHashMap::default()),
            constant_fills: std::cell::RefCell::new(FxHashMap::default()),
            moves_results: std::cell::RefCell::new(FxHashMap::default()),
            makes_on_host: std::cell::RefCell::new(FxHashMap::default()),
            calls: Calls::default(),
        }
    }

    /// Runs the rules over the module.
    /// The findings, and the calls to functions of other files of the project.
    pub fn run(mut self, body: &'a [Stmt], mut rules: Rules) -> (Vec<Finding>, Calls) {
        let mut out = Vec::new();
        for (kind, readers) in self.readers.iter_mut().enumerate() {
            *readers = rules.readers(Reads(1 << kind));
        }
        self.stmt_readers = rules.readers(Reads::STATEMENT);
        self.test_readers = rules.readers(Reads::TEST);
        for (name, bit) in rules.calls() {
            self.call_filtered |= bit;
            match self.call_names.iter_mut().find(|(n, _)| *n == name) {
                Some((_, bits)) => *bits |= bit,
                None => self.call_names.push((name, bit)),
            }
        }
        self.module_body = body;
        self.puts = super::rules::helpers::container_puts(self.model, body);
        self.body(body, &mut rules, &mut out);
        rules.finish(&self, &mut out);
        self.calls.elsewhere.sort_unstable_by(|a, b| (&a.callee, a.opt_in).cmp(&(&b.callee, b.opt_in)));
        self.calls.elsewhere.dedup();
        self.calls.latent = self
            .model
            .functions()
            .filter(|(id, f)| self.facts.latent[id.index()] && f.parent.is_none())
            .map(|(_, f)| match f.class {
                None => f.name().to_string(),
                Some(c) => format!("{}.{}", self.model.class(c).def.name, f.name()),
            })
            .collect();
        (out, self.calls)
    }

    /// Records a call to a function of another file of the project: whether it is opt-in (when
    /// the project declares options, [`super::options`]), and, when it runs at every step (not in
    /// an evaluation pass), what it passes: that function then runs at every step too.
    fn note_project_call(&mut self, expr: &Expr, call: &ast::ExprCall) {
        let project = self.types.project();
        // A method of another file that takes one training step is a training step however
        // often a counter lets it run (`if T % replay_frequency == 0: dqn.learn(mem)`).
        let hot = self.hot().or_else(|| {
            let body = self.function.map_or(self.module_body, |f| &self.model.function(f).def.body[..]);
            (self.gated > 0
                && project_step_method(self.model, &self.types, call)
                && gated_by_counter_only(self.model, project, body, call.start()))
            .then(|| self.hot_whatever_the_gates())
            .flatten()
        });
        if hot.is_none() && !project.has_options() {
            return;
        }
        let (callee, method, dispatched) = match self.model.callee(call, self.function) {
            // `self.loss(batch)` where the class leaves `loss` to its subclasses: their overrides
            // run, in whichever file they are.
            Some(Callee::Function(f)) if self.model.is_left_to_subclasses(f) => {
                let fun = self.model.function(f);
                let Some(class) = fun.class else { return };
                let name = format!("{}.{}", self.model.class(class).def.name.as_str(), fun.name());
                (project.own_absolute(&name), true, true)
            }
            Some(_) => return,
            None => match self.project_callee(call) {
                Some((callee, method)) => (callee, method, false),
                None => return self.note_annotated_call(expr, call),
            },
        };
        // A call in code nothing names is no call of a run: it says nothing of its callee.
        let unreferenced = self.enclosing_functions().any(|f| self.facts.unreferenced[f.index()]);
        if project.has_options() && !unreferenced && !dispatched {
            let opt_in = self.in_latent_code();
            // `policy.load(..)` where `policy` was made by one of several classes (`if args.policy
            // == "TD3": policy = TD3.TD3(..) elif ..`): a call of each one's method.
            for other in self.methods_of_earlier_instances(call) {
                self.calls.elsewhere.push(ProjectCall { callee: other, opt_in });
            }
            self.calls.elsewhere.push(ProjectCall { callee: callee.clone(), opt_in });
        }
        if hot.is_none() || super::rules::helpers::in_evaluation_pass(self) {
            return;
        }
        self.note_hot_call(expr, call, callee, method, dispatched);
    }

    /// `self.agents.act(..)` where nothing made the instance in this file, but the parameter it
    /// came from is annotated with classes of another file of the project (`agents: Agent |
    /// MultiAgent`, then `self.agents = agents`): the call runs the method of each class named,
    /// or the override of a class derived from it (the annotation names a base the caller's
    /// instance derives from), in whichever file they are. Only from a loop that steps the
    /// training: followed from every working loop, the calls reached evaluation rollouts, robot
    /// control loops and per-frame inference (2 of 23 new places true on the sample trees).
    fn note_annotated_call(&mut self, expr: &Expr, call: &ast::ExprCall) {
        let Expr::Attribute(a) = &*call.func else { return };
        if self.hot().is_none() || super::rules::helpers::in_evaluation_pass(self) || !self.in_training_step()
        {
            return;
        }
        let project = self.types.project();
        for class in self.annotated_classes(&a.value) {
            if let Some(own) = project.method(&class, a.attr.as_str()) {
                self.note_hot_call(expr, call, own, true, false);
            }
            self.note_hot_call(expr, call, format!("{class}.{}", a.attr), true, true);
        }
    }

    /// Is `at` on a branch that a run with the project's default options never takes
    /// ([`opt_in_at`]), in the function being checked (or the module's body)?
    pub(crate) fn on_opt_in_branch(&self, at: ruff_text_size::TextSize) -> bool {
        let project = self.types.project();
        project.has_options()
            && opt_in_at(
                self.model,
                project,
                self.function.map_or(self.module_body, |f| &self.model.function(f).def.body[..]),
                at,
            )
    }

    /// Does the loop step the training itself (`loss.backward()`, an optimizer's `.step()`, a
    /// method of another file that takes one training step, in its body)?
    pub(crate) fn loop_steps_training(&self, l: LoopId) -> bool {
        self.facts.steps_training[l.index()]
    }

    /// Is the node in a loop that steps the training (`loss.backward()`, `optimizer.step()` in
    /// its body, or in a loop around it), or in a framework's training step (a Lightning
    /// `training_step`)? A loop that only queues other work (an evaluation's rollouts, a robot's
    /// control loop), with no such loop around it, is not.
    pub(crate) fn in_training_step(&self) -> bool {
        let mut at = self.loops.last().copied();
        while let Some(l) = at {
            if self.facts.steps_training[l.index()] {
                return true;
            }
            at = self.model.loop_(l).parent;
        }
        matches!(self.hot(), Some(Hot::Forward))
            && self.function.is_some_and(|f| framework_step(self.model, &self.types.project(), f))
    }

    /// The classes of another file of the project (absolute names) that an instance's annotation
    /// names: a parameter annotated with them (`agents: Agent | MultiAgent`, `Optional[Agent]`),
    /// or an attribute of `self` whose every assignment is such a parameter (`self.agents =
    /// agents`), or an element of what it holds (`self.agents = self.agents[0]`, of a parameter
    /// annotated `list[Agent]`). None where one assignment is anything else.
    fn annotated_classes(&self, instance: &Expr) -> Vec<String> {
        let mut out = Vec::new();
        match instance {
            Expr::Name(n) => {
                if let Some(b) = self.model.binding_of(n) {
                    self.classes_of_parameter(b, false, &mut out);
                }
            }
            Expr::Attribute(field) => {
                let Some(class) = self.types.receiver_class(&field.value) else { return out };
                let assigns = self.types.class_attrs(class, field.attr.as_str());
                // (The assignments are all in methods of the class, to an attribute of `self`.)
                let itself = |e: &Expr| {
                    matches!(e, Expr::Attribute(a) if a.attr.as_str() == field.attr.as_str()
                        && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self"))
                };
                // (`self.agents = self.agents[0]`: one of the list the parameter was.)
                let elements =
                    assigns.iter().any(|x| matches!(x.value, Some(Expr::Subscript(s)) if itself(&s.value)));
                // Each parameter assigned once, however many times (`self.agent = agent` in
                // several branches).
                let mut parameters: Vec<BindingId> = Vec::new();
                for assign in assigns {
                    match assign.value {
                        Some(Expr::NoneLiteral(_)) => {}
                        Some(Expr::Subscript(s)) if itself(&s.value) => {}
                        Some(Expr::Name(n)) if assign.how == AttrHow::Assign => {
                            match self.model.binding_of(n) {
                                Some(b) if !parameters.contains(&b) => parameters.push(b),
                                Some(_) => {}
                                None => return Vec::new(),
                            }
                        }
                        _ => return Vec::new(),
                    }
                }
                for b in parameters {
                    let mut named = Vec::new();
                    self.classes_of_parameter(b, elements, &mut named);
                    if named.is_empty() {
                        return Vec::new();
                    }
                    out.extend(named);
                }
            }
            _ => {}
        }
        out.sort();
        out.dedup();
        out
    }

    /// The classes of another file of the project the annotation of a parameter names (and, with
    /// `elements`, those of the elements of a list it names); nothing for another binding.
    fn classes_of_parameter(&self, b: BindingId, elements: bool, out: &mut Vec<String>) {
        if let BindingKind::Parameter { annotation: Some(annotation), .. } = self.model.binding(b).kind {
            self.classes_annotated(annotation, elements, out, 0);
        }
    }

    /// The classes of another file of the project an annotation names: `Agent`, `pkg.Agent`,
    /// and the members of `A | B`, `Optional[A]` and `Union[A, B]`; with `elements`, also the
    /// elements of `list[A]`, `List[A]`, `Sequence[A]` (a list itself has none of its elements'
    /// methods).
    fn classes_annotated(&self, annotation: &Expr, elements: bool, out: &mut Vec<String>, depth: usize) {
        if depth > 8 || out.len() > 8 {
            return;
        }
        match annotation {
            Expr::Name(_) | Expr::Attribute(_) => {
                if let Some(q) = self.model.canonical_name(annotation)
                    && let Some(class) = self.types.project().class(&q)
                    && !out.contains(&class)
                {
                    out.push(class);
                }
            }
            // `A | B | C` nests to the left: its members are walked as one list, not by depth.
            Expr::BinOp(b) if b.op == ast::Operator::BitOr => {
                let mut members = vec![&*b.right];
                let mut left = &*b.left;
                while let Expr::BinOp(l) = left
                    && l.op == ast::Operator::BitOr
                    && members.len() < 64
                {
                    members.push(&l.right);
                    left = &l.left;
                }
                members.push(left);
                for m in members.into_iter().rev() {
                    self.classes_annotated(m, elements, out, depth + 1);
                }
            }
            Expr::Subscript(s) => {
                let Some(q) = self.model.canonical_name(&s.value) else { return };
                let members = match q.as_ref() {
                    "typing.Optional" | "typing.Union" => true,
                    "builtins.list" | "typing.List" | "typing.Sequence" | "collections.abc.Sequence" => false,
                    _ => return,
                };
                if !members && !elements {
                    return;
                }
                // (The elements of a list are not lists again.)
                let elements = elements && members;
                match &*s.slice {
                    Expr::Tuple(t) => {
                        t.elts.iter().for_each(|e| self.classes_annotated(e, elements, out, depth + 1));
                    }
                    one => self.classes_annotated(one, elements, out, depth + 1),
                }
            }
            _ => {}
        }
    }

    /// The absolute name of the function or method of another file of the project a call runs,
    /// and whether it is a method.
    fn project_callee(&self, call: &ast::ExprCall) -> Option<(String, bool)> {
        let project = self.types.project();
        match self
            .model
            .canonical_name(&call.func)
            .and_then(|q| project.function(&q))
            .or_else(|| project.star_bound(&call.func, |n| self.model.binding_of(n).is_some()))
        {
            Some(callee) => Some((callee, false)),
            None => {
                match self.method_of_project_class(call).or_else(|| self.call_of_class_own_method_makes(call))
                {
                    Some(callee) => Some((callee, true)),
                    // `ProbMask(b, h, ..)`: an instance of another file's class made at every step
                    // runs its `__init__`.
                    None => self
                        .model
                        .canonical_name(&call.func)
                        .and_then(|q| project.method(&q, "__init__"))
                        .map(|callee| (callee, true)),
                }
            }
        }
    }

    /// Records a call at every step of a function of another file ([`Checker::note_project_call`]).
    fn note_hot_call(
        &mut self,
        expr: &Expr,
        call: &ast::ExprCall,
        callee: String,
        method: bool,
        dispatched: bool,
    ) {
        // Where the project's tensors may be, as the callee's file asks ([`Facts::project_uses_accelerator`]).
        let on = |e: &Expr| super::rules::helpers::provenance_in_project(self, e).on_accelerator;
        // Positions are known up to the first `*args`; a method's first parameter is its receiver.
        let args = std::iter::repeat_n(false, usize::from(method))
            .chain(call.arguments.args.iter().take_while(|a| !matches!(a, Expr::Starred(_))).map(on))
            .collect();
        let keywords = call
            .arguments
            .keywords
            .iter()
            .filter_map(|k| k.arg.as_ref().map(|name| (name.to_string(), on(&k.value))))
            .collect();
        let spread = call.arguments.args.iter().any(|a| matches!(a, Expr::Starred(s) if on(&s.value)))
            || call.arguments.keywords.iter().any(|k| k.arg.is_none() && on(&k.value));
        let result_needed = super::rules::result_needed_on_host(self, expr);
        let how = match self.hot() {
            Some(Hot::Forward) if self.pass_words() == "training step" => "at every training step",
            Some(Hot::Forward) => "at every forward pass",
            _ => "in a loop",
        };
        self.calls.hot.push(HotCall {
            callee,
            offset: call.start().to_usize(),
            line: 0,
            cell: None,
            args,
            keywords,
            spread,
            result_needed,
            how,
            dispatched,
        });
    }

    /// For `name.method(..)`, the method of the class each earlier assignment of `name` in the
    /// same scope made (`policy = TD3.TD3(..)` in one branch, `policy = DDPG.DDPG(..)` in the
    /// next), a few deep: the name may hold any of them where the call is.
    fn methods_of_earlier_instances(&self, call: &ast::ExprCall) -> Vec<String> {
        let Expr::Attribute(a) = &*call.func else { return Vec::new() };
        let Expr::Name(n) = &*a.value else { return Vec::new() };
        let Some(mut b) = self.model.binding_of(n) else { return Vec::new() };
        let project = self.types.project();
        let mut out = Vec::new();
        for _ in 0..8 {
            let Some(earlier) = self.model.binding(b).shadowed else { break };
            b = earlier;
            let BindingKind::Assignment { value: Expr::Call(made), part: Part::Whole, .. } =
                self.model.binding(b).kind
            else {
                continue;
            };
            let Some(class) = self.class_made_by(made_before_moves(made)) else { continue };
            out.extend(project.method(&class, a.attr.as_str()));
        }
        out
    }

    /// `logger.update(..)` where `logger = utils.MetricLogger(..)` names a class of another
    /// file of the project: the method's absolute name (`pkg.utils.MetricLogger.update`).
    /// The instance may also be kept on `self` (`self.meter = utils.MetricLogger()` in `__init__`,
    /// then `self.meter.update(..)`), when every assignment of that attribute makes one class, or
    /// made by a factory of that file; an instance called (`self.loss_fn(..)`) runs `__call__`.
    fn method_of_project_class(&self, call: &ast::ExprCall) -> Option<String> {
        let project = self.types.project();
        match &*call.func {
            // `logger.update(..)`, `self.meter.update(..)`; or `self.loss_fn(..)`, an instance kept
            // on `self` and called.
            Expr::Attribute(a) => self
                .instance_class(&a.value)
                .and_then(|class| project.method(&class, a.attr.as_str()))
                .or_else(|| {
                    self.instance_class(&call.func).and_then(|class| project.method(&class, "__call__"))
                }),
            // `self.loss_fn(preds, targets)`, `criterion(out, y)`: the instance's `__call__`.
            instance => self.instance_class(instance).and_then(|class| project.method(&class, "__call__")),
        }
    }

    /// `self.criterion(..)` (or `self.criterion.update(..)`) where `self.criterion =
    /// self.build_loss()` and the one method of that name in the file returns an instance of a
    /// class of another file of the project (`return DualLoss(self)`): that class's `__call__` (or
    /// the method called). Where the file's classes override the method to return different
    /// classes (one loss per task), which one runs depends on the model the run builds: no call.
    fn call_of_class_own_method_makes(&self, call: &ast::ExprCall) -> Option<String> {
        let (instance, method) = match &*call.func {
            Expr::Attribute(a) if matches!(&*a.value, Expr::Attribute(_)) => (&*a.value, a.attr.as_str()),
            instance => (instance, "__call__"),
        };
        let made = self.instance_made_by(instance)?;
        let Expr::Attribute(factory) = &*made.func else { return None };
        if !matches!(&*factory.value, Expr::Name(n) if n.id.as_str() == "self") {
            return None;
        }
        let mut makers =
            self.model.functions().filter(|(_, f)| f.class.is_some() && f.name() == factory.attr.as_str());
        let (_, maker) = makers.next()?;
        if makers.next().is_some() {
            return None;
        }
        let mut classes: Vec<String> = Vec::new();
        super::rules::helpers::each_stmt(&maker.def.body, &mut |s| {
            if let Stmt::Return(ast::StmtReturn { value: Some(v), .. }) = s
                && let Expr::Call(c) = &**v
                && let Some(class) = self.class_made_by(c)
                && !classes.contains(&class)
            {
                classes.push(class);
            }
        });
        match &classes[..] {
            [class] => self.types.project().method(class, method),
            _ => None,
        }
    }

    /// The class of an instance a name or an attribute of `self` holds, when every assignment of
    /// it makes one: `Class(..)`, or a factory of another file of the project that returns one
    /// (`create_loss_function(cfg)` returning `DualLoss(..)`). The class as the semantic model
    /// qualifies it, or its absolute name when a factory names it.
    pub(crate) fn instance_class(&self, instance: &Expr) -> Option<String> {
        self.class_made_by(self.instance_made_by(instance)?)
    }

    /// The class a call makes: `Class(..)`, or what a factory of the project returns.
    fn class_made_by(&self, made: &ast::ExprCall) -> Option<String> {
        let project = self.types.project();
        // A name the file's `from module import *` brings (`RNN_VAE(..)`), or as the model names it.
        let name = match project.star_name(&made.func, |n| self.model.binding_of(n).is_some()) {
            Some(name) => name,
            None => self.model.canonical_name(&made.func)?.into_owned(),
        };
        Some(project.factory_class(&name).unwrap_or(name))
    }

    /// The call that makes the instance a name or an attribute of `self` holds
    /// ([`instance_made_by`]).
    pub(crate) fn instance_made_by(&self, instance: &Expr) -> Option<&'a ast::ExprCall> {
        instance_made_by(self.model, &self.types, instance)
    }

    // ---- questions the rules ask -------------------------------------------------------------

    /// The canonical name of `call`'s callee ([`Model::canonical_name`]): for the call being
    /// checked, the name worked out once for all the rules.
    pub fn callee_name(&self, call: &ast::ExprCall) -> Option<std::borrow::Cow<'_, str>> {
        match &self.callee {
            Some((range, name)) if *range == call.range() => name.as_deref().map(std::borrow::Cow::Borrowed),
            _ => self.model.canonical_name(&call.func),
        }
    }

    /// What a forward-like function runs at, for messages: "training step" in a framework's step
    /// ([`framework_step`]: a Lightning `training_step`, a `Trainer`'s `compute_loss`), else
    /// "forward pass".
    pub fn pass_words(&self) -> &'static str {
        let project = self.types.project();
        match self.function {
            // A framework's step, or any method of an optimizer (its `step` and what it calls).
            Some(f)
                if framework_step(self.model, &project, f) || optimizer_method(self.model, &project, f) =>
            {
                "training step"
            }
            _ => "forward pass",
        }
    }

    /// The file's top-level functions whose every result is on the host.
    pub fn host_functions(&self) -> &FxHashSet<String> {
        self.host_functions.get_or_init(|| super::project::host_functions(self.module_body))
    }

    pub fn kind_of(&self, e: &Expr) -> Kind {
        let kind = self.types.kind(e);
        // A name `.backward()` is called on is a tensor.
        if kind == Kind::Unknown
            && let Expr::Name(n) = e
            && self.model.binding_of(n).is_some_and(|b| self.facts.backward_roots.contains(&b))
        {
            return Kind::Tensor;
        }
        kind
    }

    /// The text of a node, on one line and shortened, for messages.
    pub fn short(&self, range: TextRange) -> String {
        let one_line: String = self.model.text(range).split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 60 {
            let cut: String = one_line.chars().take(57).collect();
            format!("{cut}...")
        } else {
            one_line
        }
    }

    pub fn text(&self, range: TextRange) -> &'a str {
        self.model.text(range)
    }

    /// Is the function a forward pass (or called from one)?
    pub fn is_forward(&self, f: FunctionId) -> bool {
        self.facts.forward[f.index()]
    }

    /// Why a function runs at every step, if it does.
    pub fn hot_of(&self, f: FunctionId) -> Option<Hot> {
        self.facts.hot[f.index()]
    }

    /// Does a factory given no device make its tensor on a device here: under
    /// `torch.set_default_device(..)` in this file, or inside `with torch.device(..)`? (Set by
    /// another file of the project, it is not seen: a repository's one test or script that sets
    /// it says nothing of its other files.)
    pub fn default_device_set(&self) -> bool {
        self.facts.sets_default_device || self.device_block > 0
    }

    /// Is the current function a forward pass (or called from one)?
    pub fn in_forward(&self) -> bool {
        self.function.is_some_and(|f| self.facts.forward[f.index()])
    }

    /// The name of the current function, for messages.
    pub fn function_name(&self) -> Option<&'a str> {
        self.function.map(|f| self.model.function(f).def.name.as_str())
    }

    /// Does the node run again and again, once per step, token or layer: inside an inner loop
    /// here, in a forward pass, or in a function called from such a loop? Outer loops (over
    /// epochs: loops that run another loop) do not count, nor do branches taken now and then.
    pub fn hot(&self) -> Option<Hot> {
        if self.gated > 0 {
            return None;
        }
        self.hot_whatever_the_gates()
    }

    /// [`Checker::hot`], as if the branches taken now and then around the node were taken always.
    fn hot_whatever_the_gates(&self) -> Option<Hot> {
        if self.in_latent_code() {
            return None;
        }
        // The `__main__` block of a module of models other files import from, not named for what
        // it runs and reading no command line, is the module's own check or benchmark
        // (`unet.to("cuda")`, ten timed steps), not a run of the project. (A script that other
        // files import from, `from ppo import Agent` or `from train import build_model`, is still
        // run.)
        if self.main_block > 0 && self.facts.self_check_main {
            return None;
        }
        if let Some(&l) = self.loops.last() {
            match self.facts.loop_heat(self.model, l) {
                Heat::Work(hot) => return Some(Hot::CalledInLoop(self.model.loop_(hot).stmt.range())),
                // Once per epoch (around a loop of steps): not hot, whatever calls the function;
                // unless the function itself runs at every step or forward pass, where a loop
                // around another working loop is one over scales or frames of that step
                // (`for scale in self.opt.scales: for frame_id in ..:` in a trainer's
                // `compute_losses`).
                Heat::Outer => {
                    let f = self.function?;
                    if !self.facts.forward[f.index()] && self.facts.hot[f.index()].is_none() {
                        return None;
                    }
                }
                // A loop over items in a function that runs at every step runs at every step.
                Heat::Cold => {}
            }
        }
        let f = self.function?;
        if self.facts.forward[f.index()] {
            return Some(Hot::Forward);
        }
        self.facts.hot[f.index()]
    }

    /// Does no run the repository makes reach the node: it is on a branch a run with the
    /// project's default options never takes ([`super::options`]), or in a function no run
    /// reaches ([`latent_functions`])? A hazard there is latent.
    pub fn in_latent_code(&self) -> bool {
        self.opt_in > 0 || self.enclosing_functions().any(|f| self.facts.latent[f.index()])
    }

    /// Is the code a script's, a test's or an example's rather than a library's?
    pub fn in_application(&self) -> bool {
        self.facts.application
            || self.main_block > 0
            || self.enclosing_functions().any(|f| {
                let name = self.model.function(f).name();
                matches!(name, "main" | "cli" | "run" | "parse_args" | "get_args" | "get_parser")
                    || name.starts_with("test_")
            })
    }

    /// The current function and the ones around it, innermost first.
    pub fn enclosing_functions(&self) -> impl Iterator<Item = FunctionId> + '_ {
        std::iter::successors(self.function, |f| self.model.function(*f).parent)
    }

    /// Is the current function a method of an `nn.Module`?
    pub fn in_module_method(&self) -> bool {
        self.function
            .and_then(|f| self.model.function(f).class)
            .is_some_and(|c| self.types.is_module_class(c) == Truth::Yes)
    }

    /// The parent of the current node.
    pub fn parent(&self) -> Option<Node<'a>> {
        self.parents.last().copied()
    }

    /// Does the call queue work on the device (a module, `backward()`, an optimizer step): what
    /// the whole-file facts ask of every call.
    pub fn queues_device_work(&self, call: &ast::ExprCall) -> bool {
        queues_device_work(self.model, &self.types, call)
    }

    /// The block that holds the innermost statement being checked, and its place there.
    pub fn block_of_statement(&self) -> Option<(&'a [Stmt], usize)> {
        let at = self.parents.iter().rposition(|n| matches!(n, Node::Stmt(_)))?;
        self.block_of(at)
    }

    /// The block that holds the statement `parents[at]`, and its place there.
    pub fn block_of(&self, at: usize) -> Option<(&'a [Stmt], usize)> {
        let Node::Stmt(stmt) = *self.parents.get(at)? else { return None };
        let parent = self.parents[..at].iter().rev().find_map(|n| match n {
            Node::Stmt(s) => Some(*s),
            Node::Expr(_) => None,
        });
        let blocks: Vec<&'a [Stmt]> = match parent {
            None => vec![self.module_body],
            Some(Stmt::FunctionDef(d)) => vec![&d.body],
            Some(Stmt::ClassDef(d)) => vec![&d.body],
            Some(Stmt::For(f)) => vec![&f.body, &f.orelse],
            Some(Stmt::While(w)) => vec![&w.body, &w.orelse],
            Some(Stmt::If(i)) => {
                std::iter::once(&i.body[..]).chain(i.elif_else_clauses.iter().map(|c| &c.body[..])).collect()
            }
            Some(Stmt::With(w)) => vec![&w.body],
            Some(Stmt::Try(t)) => std::iter::once(&t.body[..])
                .chain(t.handlers.iter().map(|h| {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    &h.body[..]
                }))
                .chain([&t.orelse[..], &t.finalbody[..]])
                .collect(),
            Some(Stmt::Match(m)) => m.cases.iter().map(|c| &c.body[..]).collect(),
            Some(_) => Vec::new(),
        };
        blocks.into_iter().find_map(|b| b.iter().position(|s| std::ptr::eq(s, stmt)).map(|i| (b, i)))
    }

    /// The statement the current node is part of.
    pub fn statement(&self) -> Option<&'a Stmt> {
        self.parents.iter().rev().find_map(|n| match n {
            Node::Stmt(s) => Some(*s),
            Node::Expr(_) => None,
        })
    }

    // ---- the walk ------------------------------------------------------------------------------

    fn body(&mut self, body: &'a [Stmt], rules: &mut Rules, out: &mut Vec<Finding>) {
        // `if not should_log: return` (or `if step % 100: continue`): what follows in the block
        // runs now and then, as the body of `if should_log:` would.
        let mut gates = 0;
        for s in body {
            self.stmt(s, rules, out);
            if leaves_unless_gated(self.model, self.types.project(), s) {
                gates += 1;
                self.gated += 1;
            }
        }
        self.gated -= gates;
    }

    fn stmt(&mut self, stmt: &'a Stmt, rules: &mut Rules, out: &mut Vec<Finding>) {
        if self.depth > MAX_DEPTH {
            return;
        }
        self.depth += 1;
        rules.stmt(self.stmt_readers, self, stmt, out);
        self.parents.push(Node::Stmt(stmt));
        match stmt {
            Stmt::FunctionDef(def) => self.function_def(def, rules, out),
            Stmt::ClassDef(def) => {
                for d in &def.decorator_list {
                    self.expr(&d.expression, rules, out);
                }
                if let Some(args) = &def.arguments {
                    self.arguments(args, rules, out);
                }
                self.body(&def.body, rules, out);
            }
            Stmt::For(f) => {
                self.expr(&f.iter, rules, out);
                self.expr(&f.target, rules, out);
                self.in_loop(stmt, &f.body, rules, out);
                self.body(&f.orelse, rules, out);
            }
            Stmt::While(w) => {
                self.test(&w.test, rules, out);
                self.in_loop(stmt, &w.body, rules, out);
                self.body(&w.orelse, rules, out);
            }
            Stmt::If(i) => {
                self.test(&i.test, rules, out);
                let main = is_main_guard(&i.test);
                let gate = body_is_gated(self.model, self.types.project(), i, !self.loops.is_empty());
                let project = self.types.project();
                let side = project.opt_in(&i.test, is_switch(self.model, i));
                // Code no run takes (`if False:`) is as latent as an option no run turns on.
                let dead = constant_truth(&i.test);
                let opt_in = side == Some(true) || dead == Some(false);
                self.main_block += usize::from(main);
                self.gated += usize::from(gate);
                self.opt_in += usize::from(opt_in);
                self.body(&i.body, rules, out);
                self.main_block -= usize::from(main);
                self.gated -= usize::from(gate);
                self.opt_in -= usize::from(opt_in);
                // A clause after a test that always holds (`if True:`, `elif True:`), or whose own
                // test never does (`elif False:`), never runs.
                let mut taken_before = dead == Some(true);
                for clause in &i.elif_else_clauses {
                    let gate = clause_is_gated(self.model, i, clause);
                    let test = clause.test.as_ref().and_then(constant_truth);
                    let opt_in = side == Some(false)
                        || taken_before
                        || test == Some(false)
                        || clause.test.as_ref().is_some_and(|t| project.opt_in(t, true) == Some(true));
                    taken_before |= test == Some(true);
                    if let Some(t) = &clause.test {
                        self.test(t, rules, out);
                    }
                    self.gated += usize::from(gate);
                    self.opt_in += usize::from(opt_in);
                    self.body(&clause.body, rules, out);
                    self.gated -= usize::from(gate);
                    self.opt_in -= usize::from(opt_in);
                }
            }
            Stmt::With(w) => {
                let mut device = 0;
                let mut no_grad = 0;
                for item in &w.items {
                    self.expr(&item.context_expr, rules, out);
                    if let Some(v) = &item.optional_vars {
                        self.expr(v, rules, out);
                    }
                    match self.context_manager(&item.context_expr) {
                        Some(ContextManager::Device) => device += 1,
                        Some(ContextManager::NoGrad) => no_grad += 1,
                        None => {}
                    }
                }
                if device > 0 {
                    self.device_blocks.push(w.range());
                }
                self.device_block += device;
                self.no_grad += no_grad;
                self.body(&w.body, rules, out);
                self.device_block -= device;
                self.no_grad -= no_grad;
            }
            Stmt::Try(t) => {
                self.body(&t.body, rules, out);
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    if let Some(ty) = &h.type_ {
                        self.expr(ty, rules, out);
                    }
                    self.in_except += 1;
                    self.body(&h.body, rules, out);
                    self.in_except -= 1;
                }
                self.body(&t.orelse, rules, out);
                self.body(&t.finalbody, rules, out);
            }
            _ => self.stmt_children(stmt, rules, out),
        }
        self.parents.pop();
        self.depth -= 1;
    }

    /// The expressions and bodies of statements with no context of their own.
    fn stmt_children(&mut self, stmt: &'a Stmt, rules: &mut Rules, out: &mut Vec<Finding>) {
        match stmt {
            Stmt::Return(r) => {
                if let Some(v) = &r.value {
                    self.expr(v, rules, out);
                }
            }
            Stmt::Delete(d) => {
                for t in &d.targets {
                    self.expr(t, rules, out);
                }
            }
            Stmt::Assign(a) => {
                self.expr(&a.value, rules, out);
                for t in &a.targets {
                    self.expr(t, rules, out);
                }
            }
            Stmt::AugAssign(a) => {
                self.expr(&a.value, rules, out);
                self.expr(&a.target, rules, out);
            }
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    self.expr(v, rules, out);
                }
                self.expr(&a.target, rules, out);
            }
            Stmt::Match(m) => {
                self.expr(&m.subject, rules, out);
                for case in &m.cases {
                    if let Some(g) = &case.guard {
                        self.expr(g, rules, out);
                    }
                    self.body(&case.body, rules, out);
                }
            }
            Stmt::Raise(r) => {
                for e in r.exc.iter().chain(&r.cause) {
                    self.expr(e, rules, out);
                }
            }
            Stmt::Assert(a) => {
                self.test(&a.test, rules, out);
                if let Some(m) = &a.msg {
                    self.expr(m, rules, out);
                }
            }
            Stmt::Expr(e) => self.expr(&e.value, rules, out),
            _ => {}
        }
    }

    fn function_def(&mut self, def: &'a ast::StmtFunctionDef, rules: &mut Rules, out: &mut Vec<Finding>) {
        for d in &def.decorator_list {
            self.expr(&d.expression, rules, out);
        }
        for p in def.parameters.iter_non_variadic_params() {
            if let Some(d) = &p.default {
                self.expr(d, rules, out);
            }
        }
        let no_grad = def
            .decorator_list
            .iter()
            .any(|d| self.context_manager(&d.expression) == Some(ContextManager::NoGrad));
        // A body runs when it is called, not inside the blocks around its `def`.
        let saved = Saved {
            function: self.function,
            loops: std::mem::take(&mut self.loops),
            in_except: std::mem::take(&mut self.in_except),
            gated: std::mem::take(&mut self.gated),
            opt_in: std::mem::take(&mut self.opt_in),
            device_block: std::mem::take(&mut self.device_block),
            no_grad: std::mem::replace(&mut self.no_grad, usize::from(no_grad)),
        };
        self.function = self.model.function_of_def(def);
        let first = out.len();
        self.body(&def.body, rules, out);
        // The findings of the body are in this function (those of nested functions already say
        // which): repeats of one are reported once.
        for f in &mut out[first..] {
            f.scope.get_or_insert(def.range.start().to_usize());
        }
        self.function = saved.function;
        self.loops = saved.loops;
        self.in_except = saved.in_except;
        self.gated = saved.gated;
        self.opt_in = saved.opt_in;
        self.device_block = saved.device_block;
        self.no_grad = saved.no_grad;
    }

    fn in_loop(&mut self, stmt: &'a Stmt, body: &'a [Stmt], rules: &mut Rules, out: &mut Vec<Finding>) {
        let id = self.model.loop_of_stmt(stmt);
        if let Some(id) = id {
            self.loops.push(id);
        }
        // A gate outside a loop of steps says nothing about how often its body runs; a loop that
        // queues no device work (over the items of a log line) runs when the gate lets it.
        let steps = id.is_some_and(|l| self.facts.loop_work[l.index()]);
        let gated = if steps { std::mem::take(&mut self.gated) } else { self.gated };
        self.body(body, rules, out);
        self.gated = gated;
        if id.is_some() {
            self.loops.pop();
        }
    }

    fn arguments(&mut self, args: &'a ast::Arguments, rules: &mut Rules, out: &mut Vec<Finding>) {
        for a in &args.args {
            self.expr(a, rules, out);
        }
        for k in &args.keywords {
            self.expr(&k.value, rules, out);
        }
    }

    fn expr(&mut self, expr: &'a Expr, rules: &mut Rules, out: &mut Vec<Finding>) {
        // Names and literals (about half of all expressions): no rule reads them on their own
        // ([`Reads::index_of`]) and they have nothing inside.
        if matches!(
            expr,
            Expr::Name(_)
                | Expr::NumberLiteral(_)
                | Expr::StringLiteral(_)
                | Expr::BytesLiteral(_)
                | Expr::BooleanLiteral(_)
                | Expr::NoneLiteral(_)
                | Expr::EllipsisLiteral(_)
        ) || self.depth > MAX_DEPTH
        {
            return;
        }
        self.depth += 1;
        if let Some(kind) = Reads::index_of(expr) {
            let mut readers = self.readers[kind];
            if let Expr::Call(call) = expr
                && readers != 0
            {
                let callee = self.model.canonical_name(&call.func);
                if readers & self.call_filtered != 0 {
                    readers = (readers & !self.call_filtered) | self.readers_of_call(call, callee.as_deref());
                }
                self.callee = Some((call.range(), callee));
            }
            rules.expr(readers, self, expr, out);
        }
        // A model file need not name a device itself: its project moves the model.
        if let Expr::Call(call) = expr
            && self.facts.project_uses_accelerator
            && !self.types.project().is_empty()
        {
            self.note_project_call(expr, call);
        }
        self.parents.push(Node::Expr(expr));
        match expr {
            Expr::BoolOp(b) => b.values.iter().for_each(|v| self.expr(v, rules, out)),
            Expr::Named(n) => {
                self.expr(&n.value, rules, out);
                self.expr(&n.target, rules, out);
            }
            Expr::BinOp(b) => {
                self.expr(&b.left, rules, out);
                self.expr(&b.right, rules, out);
            }
            Expr::UnaryOp(u) => self.expr(&u.operand, rules, out),
            Expr::Lambda(l) => self.expr(&l.body, rules, out),
            Expr::If(i) => {
                // `mask if has_pads else None`: the test's truth is read as an `if`'s is.
                self.test(&i.test, rules, out);
                self.expr(&i.body, rules, out);
                self.expr(&i.orelse, rules, out);
            }
            Expr::Dict(d) => {
                for item in &d.items {
                    if let Some(k) = &item.key {
                        self.expr(k, rules, out);
                    }
                    self.expr(&item.value, rules, out);
                }
            }
            Expr::Set(s) => s.elts.iter().for_each(|e| self.expr(e, rules, out)),
            Expr::List(s) => s.elts.iter().for_each(|e| self.expr(e, rules, out)),
            Expr::Tuple(s) => s.elts.iter().for_each(|e| self.expr(e, rules, out)),
            Expr::ListComp(c) => self.comprehension(&c.generators, &[&c.elt], rules, out),
            Expr::SetComp(c) => self.comprehension(&c.generators, &[&c.elt], rules, out),
            Expr::Generator(c) => self.comprehension(&c.generators, &[&c.elt], rules, out),
            Expr::DictComp(c) => {
                let elts: Vec<&Expr> = c.key.as_deref().into_iter().chain([&*c.value]).collect();
                self.comprehension(&c.generators, &elts, rules, out);
            }
            Expr::Await(a) => self.expr(&a.value, rules, out),
            Expr::Yield(y) => {
                if let Some(v) = &y.value {
                    self.expr(v, rules, out);
                }
            }
            Expr::YieldFrom(y) => self.expr(&y.value, rules, out),
            Expr::Compare(c) => {
                self.expr(&c.left, rules, out);
                c.comparators.iter().for_each(|e| self.expr(e, rules, out));
            }
            Expr::Call(c) => {
                self.expr(&c.func, rules, out);
                self.arguments(&c.arguments, rules, out);
            }
            Expr::FString(f) => {
                for e in f.value.elements() {
                    if let ast::InterpolatedStringElement::Interpolation(i) = e {
                        self.expr(&i.expression, rules, out);
                    }
                }
            }
            Expr::Attribute(a) => self.expr(&a.value, rules, out),
            Expr::Subscript(s) => {
                self.expr(&s.value, rules, out);
                self.expr(&s.slice, rules, out);
            }
            Expr::Starred(s) => self.expr(&s.value, rules, out),
            Expr::Slice(s) => {
                for e in s.lower.iter().chain(&s.upper).chain(&s.step) {
                    self.expr(e, rules, out);
                }
            }
            _ => {}
        }
        self.parents.pop();
        self.depth -= 1;
    }

    /// The rules with a [`Rule::calls`] list that read `call`, whose canonical callee name is
    /// `callee`.
    fn readers_of_call(&self, call: &ast::ExprCall, callee: Option<&str>) -> u32 {
        let last = match (callee, &*call.func) {
            (Some(q), _) => q.rsplit('.').next().unwrap_or(q),
            (None, Expr::Attribute(a)) => a.attr.as_str(),
            (None, Expr::Name(n)) => n.id.as_str(),
            _ => return 0,
        };
        self.call_names.iter().filter(|(n, _)| *n == last).fold(0, |bits, (_, b)| bits | b)
    }

    /// The test of an `if`, `elif`, `while` or `assert`: shown to the rules that read tests, then
    /// walked.
    fn test(&mut self, test: &'a Expr, rules: &mut Rules, out: &mut Vec<Finding>) {
        rules.test(self.test_readers, self, test, out);
        self.expr(test, rules, out);
    }

    fn comprehension(
        &mut self,
        generators: &'a [ast::Comprehension],
        elts: &[&'a Expr],
        rules: &mut Rules,
        out: &mut Vec<Finding>,
    ) {
        for g in generators {
            self.expr(&g.iter, rules, out);
            self.expr(&g.target, rules, out);
            for c in &g.ifs {
                self.expr(c, rules, out);
            }
        }
        for e in elts {
            self.expr(e, rules, out);
        }
    }

    /// `torch.device(..)` and `torch.no_grad()` as context managers (also as decorators).
    fn context_manager(&self, e: &Expr) -> Option<ContextManager> {
        let func = match e {
            Expr::Call(c) => &*c.func,
            other => other,
        };
        match self.model.canonical_name(func)?.as_ref() {
            "torch.device" => Some(ContextManager::Device),
            q if super::model::is_no_grad_name(q) => Some(ContextManager::NoGrad),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ContextManager {
    Device,
    NoGrad,
}

struct Saved {
    function: Option<FunctionId>,
    loops: Vec<LoopId>,
    in_except: usize,
    gated: usize,
    opt_in: usize,
    device_block: usize,
    no_grad: usize,
}

/// `if __name__ == "__main__":`
fn is_main_guard(test: &Expr) -> bool {
    let Expr::Compare(c) = test else { return false };
    let is_name = |e: &Expr| matches!(e, Expr::Name(n) if n.id.as_str() == "__name__");
    let is_main = |e: &Expr| matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "__main__");
    c.comparators.len() == 1
        && ((is_name(&c.left) && is_main(&c.comparators[0]))
            || (is_main(&c.left) && is_name(&c.comparators[0])))
}

/// The names in the expression `.backward()` is called on (`loss.backward()`, `(a + b).backward()`)
/// and, through their assignments, the terms they add up (`loss = p_loss + lam * n_loss`): parts
/// of the autograd graph, where the model is.
fn losses(model: &Model<'_>, types: &Types<'_, '_>) -> FxHashSet<BindingId> {
    let mut found: FxHashSet<BindingId> = FxHashSet::default();
    let mut terms: Vec<&Expr> = backward_receivers(model).collect();
    while let Some(t) = terms.pop() {
        match t {
            Expr::BinOp(o) if matches!(o.op, ast::Operator::Add | ast::Operator::Sub) => {
                terms.push(&o.left);
                terms.push(&o.right);
            }
            // `lam * reg`, `loss / accum_steps`: a factor that is a setting is a number.
            Expr::BinOp(o) if matches!(o.op, ast::Operator::Mult | ast::Operator::Div) => {
                terms.extend([&*o.left, &*o.right].into_iter().filter(|f| !is_setting(model, types, f)));
            }
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::USub => terms.push(&u.operand),
            // `scaler.scale(loss).backward()`: a gradient scaler's loss.
            Expr::Call(c)
                if matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "scale")
                    && c.arguments.args.len() == 1
                    && c.arguments.keywords.is_empty() =>
            {
                terms.push(&c.arguments.args[0]);
            }
            Expr::Name(n) => {
                let Some(b) = model.binding_of(n) else { continue };
                if found.insert(b)
                    && let BindingKind::Assignment { value, part: Part::Whole, .. } = model.binding(b).kind
                {
                    terms.push(value);
                }
            }
            _ => {}
        }
    }
    found
}

/// What `.backward()` is called on: `loss` in `loss.backward()`, `(a + b)` in `(a + b).backward()`;
/// and the loss a trainer object backpropagates (`accelerator.backward(loss)`,
/// `fabric.backward(loss)`, `model_engine.backward(loss)`, `controlnet.backward(loss)`).
fn backward_receivers<'m, 'a>(model: &'m Model<'a>) -> impl Iterator<Item = &'a Expr> + 'm {
    model.calls.iter().filter_map(|s| match &*s.call.func {
        Expr::Attribute(a) if a.attr.as_str() == "backward" && s.call.arguments.args.len() <= 1 => {
            let trainer = match &*a.value {
                Expr::Name(n) => Some(n.id.as_str()),
                Expr::Attribute(x) => Some(x.attr.as_str()),
                _ => None,
            }
            .is_some_and(|name| {
                name_words(name).any(|w| {
                    w.eq_ignore_ascii_case("accelerator")
                        || w.eq_ignore_ascii_case("fabric")
                        || w.eq_ignore_ascii_case("engine")
                })
            });
            // `controlnet.backward(loss)` of a DeepSpeed engine whatever its name: the one
            // argument is named for a loss (a tensor's own `backward` takes a gradient).
            let named_loss = |e: &Expr| {
                matches!(e, Expr::Name(n) if name_words(n.id.as_str()).any(|w| w.eq_ignore_ascii_case("loss")))
            };
            match (&s.call.arguments.args[..], trainer) {
                ([loss], true) => Some(loss),
                ([loss], false) if named_loss(loss) => Some(loss),
                (_, true) => None,
                _ => Some(&*a.value),
            }
        }
        _ => None,
    })
}

/// The names `.backward()` is called on: `loss` in `loss.backward()`.
fn backward_roots(model: &Model<'_>) -> FxHashSet<BindingId> {
    backward_receivers(model)
        .filter_map(|e| match e {
            Expr::Name(n) => model.binding_of(n),
            _ => None,
        })
        .collect()
}

/// A factor that is most often a number rather than a tensor: a literal, a parameter of the
/// function, a configuration value (`self.alpha`, `args.lam`, `cfg["w"]`), or a name bound to one
/// — unless it is known to be a tensor (`self.ent_coef_tensor`).
fn is_setting(model: &Model<'_>, types: &Types<'_, '_>, e: &Expr) -> bool {
    let config = |v: &Expr| {
        matches!(v, Expr::NumberLiteral(_) | Expr::Attribute(_) | Expr::Subscript(_))
            && types.kind(v) != Kind::Tensor
    };
    match e {
        Expr::Name(n) => {
            types.kind(e) != Kind::Tensor
                && model.binding_of(n).is_some_and(|b| match model.binding(b).kind {
                    BindingKind::Parameter { .. } => true,
                    BindingKind::Assignment { value, .. } => config(value),
                    _ => false,
                })
        }
        e => config(e),
    }
}

/// The bindings the losses (`backward`, [`losses`]) are computed from through tensor
/// operations: the receivers of tensor methods and the operands of arithmetic and comparison
/// methods, the input (first argument) of `torch` functions and their other arguments known to
/// be tensors, and the terms of sums and products (not the factors that are settings), followed
/// through assignments. Each must be on the loss's device (a tensor operation takes its tensors on
/// one device), so where the loss is, they are. Sizes, dims and exponents are not followed.
fn loss_inputs(
    model: &Model<'_>,
    types: &Types<'_, '_>,
    backward: &FxHashSet<BindingId>,
) -> FxHashSet<BindingId> {
    let mut found: FxHashSet<BindingId> = FxHashSet::default();
    let mut work: Vec<&Expr> = Vec::new();
    for &b in backward {
        if let BindingKind::Assignment { value, part: Part::Whole, .. } = model.binding(b).kind {
            work.push(value);
        }
    }
    let tensor = |a: &&Expr| types.kind(a) == Kind::Tensor;
    // Each binding is entered once, so the walk is linear in the expressions it reaches.
    while let Some(e) = work.pop() {
        match e {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) if crate::python::api::tensor_method_returns_tensor(a.attr.as_str()) => {
                    work.push(&a.value);
                    if super::rules::helpers::is_operand_method(a.attr.as_str()) {
                        work.extend(c.arguments.args.iter().filter(|a| !is_setting(model, types, a)));
                    } else {
                        work.extend(c.arguments.args.iter().filter(tensor));
                    }
                }
                func if model
                    .canonical_name(func)
                    .is_some_and(|q| crate::python::api::returns_tensor(&q)) =>
                {
                    work.extend(c.arguments.args.first());
                    work.extend(c.arguments.args.iter().skip(1).filter(tensor));
                }
                _ => {}
            },
            Expr::BinOp(o) if matches!(o.op, ast::Operator::Add | ast::Operator::Sub) => {
                work.push(&o.left);
                work.push(&o.right);
            }
            Expr::BinOp(o)
                if matches!(o.op, ast::Operator::Mult | ast::Operator::Div | ast::Operator::MatMult) =>
            {
                work.extend([&*o.left, &*o.right].into_iter().filter(|f| !is_setting(model, types, f)));
            }
            Expr::UnaryOp(u) => work.push(&u.operand),
            Expr::Name(n) => {
                let Some(b) = model.binding_of(n) else { continue };
                if !backward.contains(&b)
                    && found.insert(b)
                    && let BindingKind::Assignment { value, part: Part::Whole, .. } = model.binding(b).kind
                {
                    work.push(value);
                }
            }
            _ => {}
        }
    }
    found
}

/// Does the statement end the loop or the function for good: `break`, `return`, `raise`, or a
/// call that ends the process (`sys.exit(1)`)?
pub(crate) fn leaves_for_good(model: &Model<'_>, s: &Stmt) -> bool {
    match s {
        Stmt::Break(_) | Stmt::Return(_) | Stmt::Raise(_) => true,
        Stmt::Expr(e) => matches!(&*e.value, Expr::Call(c) if model.canonical_name(&c.func).is_some_and(|q| {
            matches!(q.as_ref(), "sys.exit" | "os._exit" | "builtins.exit" | "builtins.quit")
        })),
        _ => false,
    }
}

/// A branch taken now and then, not at every step: a modulo (`step % 100 == 0`), a comparison
/// with a number (`if i == 0`), or a flag or counter about logging, debugging, evaluation or
/// checkpoints (`if args.verbose`, `if step % log_every`, `if should_log`).
pub(crate) fn is_gate(test: &Expr) -> bool {
    // A branch for a value gone bad (`if torch.isnan(k).any():`, `if not isfinite(loss):`) is
    // taken when something went wrong; its other side is the normal path.
    if let Some(bad) = tests_for_bad_values(test) {
        return bad;
    }
    if let Some(every_nth) = modulo_branches(test) {
        return every_nth;
    }
    match test {
        Expr::BinOp(b) => is_gate(&b.left) || is_gate(&b.right),
        Expr::BoolOp(b) => b.values.iter().any(is_gate),
        // `if not args.debug:`, `if not self.visualize:`: the body runs while the switch is off,
        // as it is by default; its `else` is the gate ([`clause_is_gated`]).
        Expr::UnaryOp(u) => !negated_switch(test) && is_gate(&u.operand),
        Expr::Compare(c) => {
            let number = |e: &Expr| matches!(e, Expr::NumberLiteral(_));
            let eq = c.ops.iter().all(|op| matches!(op, ast::CmpOp::Eq));
            // `if rank == 0:`, `if dist.get_rank() == 0:`: the main process, which takes the
            // branch at every step.
            if std::iter::once(&*c.left).chain(&c.comparators).any(names_a_rank) {
                return false;
            }
            // `if self.log_writer is not None:`: whether there is a logger (often on the main
            // process only), which, once there, logs at every step.
            if matches!(c.ops[..], [ast::CmpOp::IsNot])
                && matches!(c.comparators[..], [Expr::NoneLiteral(_)])
                && match &*c.left {
                    Expr::Name(n) => names_logging(n.id.as_str()),
                    Expr::Attribute(a) => names_logging(a.attr.as_str()),
                    _ => false,
                }
            {
                return false;
            }
            (eq && (number(&c.left) || c.comparators.iter().any(number)))
                || is_modulo(&c.left)
                || c.comparators.iter().any(is_modulo)
                || is_gate(&c.left)
                || c.comparators.iter().any(is_gate)
        }
        Expr::Name(n) => is_gate_word(n.id.as_str()),
        Expr::Attribute(a) => is_gate_word(a.attr.as_str()) || is_gate(&a.value),
        Expr::Call(c) => is_gate(&c.func) || c.arguments.args.iter().any(is_gate),
        _ => false,
    }
}

/// `not args.debug`, `not self.verbose`: a switch for extra output, off by default, negated. (Not
/// other gate words: `not is_valid`, `not self.use_checkpoint` or `not self.log_writer` say
/// nothing of which side a run takes.)
fn negated_switch(test: &Expr) -> bool {
    static SWITCHES: NameWords =
        NameWords::new(&["verbose", "debug", "display", "visual", "vis_", "plot", "print"]);
    matches!(test, Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not && match &*u.operand {
        Expr::Name(n) => SWITCHES.in_name(n.id.as_str()),
        Expr::Attribute(a) => SWITCHES.in_name(a.attr.as_str()),
        _ => false,
    })
}

/// `step % n`.
fn is_modulo(e: &Expr) -> bool {
    matches!(e, Expr::BinOp(b) if b.op == ast::Operator::Mod)
}

/// A test of a counter modulo an interval, by the side taken at every step but every Nth:
/// `Some(true)` when the body is the now-and-then side (`step % 50 == 0`, `not step % 50`),
/// `Some(false)` when it runs at the other steps (`if step % 50:`, `step % 50 != 0`, `> 0`; its
/// `else` is the gate), `None` for other tests (`step % n == n - 1` is left to [`is_gate`]).
fn modulo_branches(test: &Expr) -> Option<bool> {
    let zero = |e: &Expr| matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ast::Number::Int(i) if i.as_u8() == Some(0)));
    match test {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => modulo_branches(&u.operand).map(|b| !b),
        e if is_modulo(e) => Some(false),
        Expr::Compare(c) if c.comparators.len() == 1 => {
            let (left, right) = (&*c.left, &c.comparators[0]);
            let (op, counter_left) = match (is_modulo(left) && zero(right), zero(left) && is_modulo(right)) {
                (true, _) => (c.ops[0], true),
                (_, true) => (c.ops[0], false),
                _ => return None,
            };
            match op {
                ast::CmpOp::Eq => Some(true),
                ast::CmpOp::NotEq => Some(false),
                ast::CmpOp::Gt if counter_left => Some(false),
                ast::CmpOp::Lt if !counter_left => Some(false),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `Some(true)` for a test that holds when a value has gone bad (`isnan(x).any()`,
/// `not isfinite(x)`), `Some(false)` for its negation, `None` for other tests.
fn tests_for_bad_values(test: &Expr) -> Option<bool> {
    // The callee a chain of reductions starts from: `isnan` in `torch.isnan(x).any()`.
    fn check(e: &Expr) -> Option<&str> {
        match e {
            // `torch.any(torch.isnan(x))`: as `torch.isnan(x).any()`.
            Expr::Call(c)
                if matches!(&*c.func, Expr::Attribute(a) if matches!(a.attr.as_str(), "any" | "all")
                    && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "torch")) =>
            {
                check(c.arguments.args.first()?)
            }
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) if matches!(a.attr.as_str(), "any" | "all" | "item") => check(&a.value),
                Expr::Attribute(a) => Some(a.attr.as_str()),
                Expr::Name(n) => Some(n.id.as_str()),
                _ => None,
            },
            _ => None,
        }
    }
    match test {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => tests_for_bad_values(&u.operand).map(|bad| !bad),
        _ => match check(test)? {
            "isnan" | "isinf" | "isneginf" | "isposinf" => Some(true),
            "isfinite" => Some(false),
            _ => None,
        },
    }
}

/// Is the test a check for a value gone bad (`torch.isnan(loss)`, `not math.isfinite(v)`, either
/// side of `torch.isnan(x).any() or torch.isinf(x).any()`)?
pub(crate) fn checks_for_bad_values(test: &Expr) -> bool {
    match test {
        Expr::BoolOp(b) => b.values.iter().any(checks_for_bad_values),
        _ => tests_for_bad_values(test).is_some(),
    }
}

/// Does a word of a name speak of training (`train`, `pretrain`, `finetune`, `sft`, `fit`)?
pub(crate) fn names_training(word: &str) -> bool {
    word.contains("train") || word.contains("finetune") || matches!(word, "sft" | "fit" | "tune" | "tuning")
}

/// A process's rank: `rank`, `args.local_rank`, `RANK`, `dist.get_rank()`.
fn names_a_rank(e: &Expr) -> bool {
    let name = match e {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.as_str(),
        Expr::Call(c) => return names_a_rank(&c.func),
        _ => return false,
    };
    name_words(name).any(|w| w.eq_ignore_ascii_case("rank"))
}

fn is_gate_word(name: &str) -> bool {
    static WORDS: NameWords = NameWords::new(&[
        "verbose",
        "debug",
        "print",
        "display",
        "interval",
        "freq",
        "every",
        "report",
        "eval",
        "valid",
        "save",
        "checkpoint",
        "ckpt",
        "visual",
        "vis_",
        "plot",
        "monitor",
    ]);
    WORDS.in_name(name) || names_logging(name)
}

/// Does a name speak of logging (`log`, `log_every`, `logger`, `should_log`, `args.logging`) rather
/// than of a logarithm (`log_prob`, `log_std`, `self.log_ent_coef`, `logits`, `logvar`)?
fn names_logging(name: &str) -> bool {
    const MATH: [&str; 24] = [
        "prob",
        "probs",
        "std",
        "alpha",
        "ent",
        "var",
        "sigma",
        "scale",
        "softmax",
        "likelihood",
        "det",
        "p",
        "q",
        "pi",
        "density",
        "ratio",
        "coef",
        "z",
        "beta",
        "temp",
        "temperature",
        "norm",
        "sum",
        "lik",
    ];
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(['_', '.']).filter(|w| !w.is_empty()).collect();
    words.iter().enumerate().any(|(i, w)| match *w {
        "log" | "logs" => words.get(i + 1).is_none_or(|next| !MATH.contains(next)),
        w => w.starts_with("logg") || w == "logdir",
    })
}

impl Facts {
    /// Does a call in `function`'s own body (not a nested `def`'s; `None`: the module's top
    /// level) read a wall clock?
    pub fn reads_clock_in(&self, function: Option<FunctionId>) -> bool {
        match function {
            Some(f) => self.clock_in.get(f.index()).copied().unwrap_or(false),
            None => self.clock_at_top,
        }
    }

    fn gather(model: &Model<'_>, types: &Types<'_, '_>, kind: FileKind, path: &std::path::Path) -> Facts {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stem_words = || name_words(file_name.strip_suffix(".py").unwrap_or(file_name));
        let n = model.functions().count();
        let loops = model.loops().count();
        let mut forward = vec![false; n];
        for (id, f) in model.functions() {
            forward[id.index()] = f.class.is_some_and(|c| types.is_module_class(c) == Truth::Yes)
                && (f.name() == "forward" || f.name().starts_with("forward_"))
                || framework_step(model, &types.project(), id);
        }
        // Which calls queue device work, and which call functions of this file.
        let mut function_work = vec![false; n];
        let mut loop_work = vec![false; loops];
        // Marking a loop marks every loop around it, so a marked loop ends the walk outwards.
        let mark_out = |flags: &mut Vec<bool>, from: Option<LoopId>| {
            let mut at = from;
            while let Some(l) = at {
                if flags[l.index()] {
                    break;
                }
                flags[l.index()] = true;
                at = model.loop_(l).parent;
            }
        };
        let mut edges: Vec<Edge> = Vec::new();
        // Loops that move their loop variable to the device, with its name ([`moves_its_items`]).
        let mut moved_items: Vec<(LoopId, &str)> = Vec::new();
        let mut sets_default_device = false;
        let mut calls_to: Vec<Vec<usize>> = vec![Vec::new(); n];
        // Calls in loops of a method of another file that takes one training step
        // (`dqn.learn(mem)` with `dqn = Agent(args)`): the loop steps the training.
        let steps_elsewhere: FxHashSet<usize> = model
            .calls
            .iter()
            .enumerate()
            .filter(|(_, site)| site.in_loop.is_some() && project_step_method(model, types, site.call))
            .map(|(i, _)| i)
            .collect();
        let mut device_taken_from = FxHashSet::default();
        let mut clock_in = vec![false; n];
        let mut clock_at_top = false;
        let mut uses_accelerator = false;
        let mut parses_args = false;
        for (i, site) in model.calls.iter().enumerate() {
            let q = model.canonical_name(&site.call.func);
            if let Some(q) = q.as_deref() {
                match q {
                    "torch.set_default_device" | "torch.set_default_tensor_type" => {
                        sets_default_device = true
                    }
                    "argparse.ArgumentParser" => parses_args = true,
                    _ => {}
                }
                if api::is_clock(q) {
                    match site.function {
                        Some(f) => clock_in[f.index()] = true,
                        None => clock_at_top = true,
                    }
                }
            }
            uses_accelerator = uses_accelerator || moves_to_accelerator(q.as_deref(), site.call);
            // Only a move or a creation takes it (`x.to(t.device)`, `device=t.device`), not a log
            // line that prints it.
            if let Some(f) = site.function {
                let args = &site.call.arguments;
                let moves = matches!(&*site.call.func, Expr::Attribute(m) if m.attr.as_str() == "to");
                let taken = args.args.iter().filter(|_| moves).chain(
                    args.keywords
                        .iter()
                        .filter(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "device"))
                        .map(|k| &k.value),
                );
                for a in taken {
                    if let Expr::Attribute(d) = a
                        && d.attr.as_str() == "device"
                        && let Expr::Name(n) = &*d.value
                    {
                        device_taken_from.insert((f, n.id.clone()));
                    }
                }
            }
            // Only a call that would mark something new is asked about: one at the top level
            // outside loops marks nothing, and nor does one whose function and loop are marked.
            let marks = site.function.is_some_and(|f| !function_work[f.index()])
                || site.in_loop.is_some_and(|l| !loop_work[l.index()]);
            if marks && (queues_device_work(model, types, site.call) || steps_elsewhere.contains(&i)) {
                if let Some(f) = site.function {
                    function_work[f.index()] = true;
                }
                mark_out(&mut loop_work, site.in_loop);
            } else if let Some(l) = site.in_loop
                && !loop_work[l.index()]
                && let Some(moved) = moves_its_items(model, l, q.as_deref(), site.call)
            {
                moved_items.push((l, moved));
            }
            let callee = match model.callee(site.call, site.function) {
                Some(Callee::Function(f)) => {
                    calls_to[f.index()].push(i);
                    Some(f)
                }
                // Making an instance runs the class's `__init__`.
                Some(Callee::Class(c)) => {
                    model.method(c, "__init__").inspect(|&f| calls_to[f.index()].push(i))
                }
                // Calling a module of this file runs its `forward`.
                // The `forward` of a same-file class is looked up first: most calls have none,
                // and then what the callee holds need not be worked out.
                None => types
                    .forward_of(&site.call.func)
                    .filter(|_| types.kind(&site.call.func) == Kind::Module)
                    .or_else(|| {
                        instance_method(model, types, site.call).inspect(|&f| calls_to[f.index()].push(i))
                    })
                    // `DINBase.forward(self, feed)`, `super().forward(x)`: a base class's method
                    // runs where the caller runs.
                    .or_else(|| model.base_method_call(site.call, site.function)),
            };
            if let Some(callee) = callee {
                edges.push(Edge {
                    caller: site.function,
                    callee,
                    in_loop: site.in_loop,
                    at: site.call.range(),
                });
                // A method left to subclasses runs one of their overrides.
                for over in model.overrides(callee) {
                    edges.push(Edge {
                        caller: site.function,
                        callee: over,
                        in_loop: site.in_loop,
                        at: site.call.range(),
                    });
                }
            }
            // Functions the call runs besides its callee: one defined in the loop's body and
            // handed to the call (`gpu_timer(train_step)`, `optimizer.step(closure)`) runs at
            // that iteration; a call through a table of functions runs one of them.
            let mut handed: Vec<FunctionId> = Vec::new();
            if let Some(l) = site.in_loop {
                let loop_range = model.loop_(l).stmt.range();
                let args = site
                    .call
                    .arguments
                    .args
                    .iter()
                    .chain(site.call.arguments.keywords.iter().map(|k| &k.value));
                for a in args {
                    if let Expr::Name(n) = a
                        && let Some(b) = model.binding_of(n)
                        && let BindingKind::FunctionDef(f) = model.binding(b).kind
                        && loop_range.contains_range(model.function(f).def.range())
                    {
                        handed.push(f);
                    }
                }
            }
            // A function mapped over items (`map(self.encode, xs)`, mmdet's
            // `multi_apply(self.loss_single, cls_scores, ..)`) runs where the call does.
            if is_mapping_call(&site.call.func)
                && let Some(first) = site.call.arguments.args.first()
                && let Some(Callee::Function(f)) = model.callee_of(first, site.function)
            {
                handed.push(f);
            }
            if callee.is_none() {
                handed.extend(model.dispatched(&site.call.func, site.function));
            }
            for f in handed {
                calls_to[f.index()].push(i);
                edges.push(Edge {
                    caller: site.function,
                    callee: f,
                    in_loop: site.in_loop,
                    at: site.call.range(),
                });
            }
        }
        // A loop that moves what it iterates over to the device and hands it to a call there
        // (`loss = box.forward_process(x, y)`): a loop of steps. One that only collects what it
        // moved (`staged.append(x)`) is not.
        if !moved_items.is_empty() {
            let moved: FxHashSet<(LoopId, &str)> = moved_items.iter().copied().collect();
            for site in &model.calls {
                let Some(l) = site.in_loop else { continue };
                if loop_work[l.index()] || !hands_on(model, site.call, |name| moved.contains(&(l, name))) {
                    continue;
                }
                mark_out(&mut loop_work, Some(l));
            }
        }
        // A call to a function that queues work queues work; a loop whose body runs a loop that
        // queues work (here or in a function it calls) is an outer loop. Each is spread once
        // along the call graph from where it starts (a worklist), so a long chain of helpers
        // costs one visit per call, however the file orders them.
        let mut by_callee: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, e) in edges.iter().enumerate() {
            by_callee[e.callee.index()].push(i);
        }
        spread_to_callers(&mut function_work, &by_callee, &edges);
        for e in &edges {
            if function_work[e.callee.index()] {
                mark_out(&mut loop_work, e.in_loop);
            }
        }
        let mut work_loop_inside = vec![false; n];
        let mut outer_loop = vec![false; loops];
        for (id, l) in model.loops() {
            // (Not a loop over the optimizer's parameter groups, which sets learning rates: a
            // step's warm-up `for param in optimizer.param_groups: param["lr"] = ..`; nor one over
            // a model's parameters, which updates each within a step: an EMA's
            // `for p, q in zip(net.parameters(), ema.parameters()): q.mul_(m).add_(..)`.)
            if loop_work[id.index()] && !over_parameters(l) {
                // Every loop around a working loop is an outer loop, and its function runs one.
                mark_out(&mut outer_loop, l.parent);
                if let Some(f) = l.function {
                    work_loop_inside[f.index()] = true;
                }
            }
        }
        // A function of another file that runs a training or evaluation loop (`train_epoch`):
        // the loop that calls it is over epochs.
        if !types.project().is_empty() {
            for site in &model.calls {
                if model.callee(site.call, site.function).is_none()
                    && model.canonical_name(&site.call.func).is_some_and(|q| types.project().runs_loop(&q))
                {
                    mark_out(&mut outer_loop, site.in_loop);
                    if let Some(f) = site.function {
                        work_loop_inside[f.index()] = true;
                    }
                }
            }
        }
        spread_to_callers(&mut work_loop_inside, &by_callee, &edges);
        for e in &edges {
            if work_loop_inside[e.callee.index()] {
                mark_out(&mut outer_loop, e.in_loop);
            }
        }
        // A loop whose own body steps the training (`loss.backward()`, `optimizer.step()`) runs
        // once per step, whatever else it calls: a helper that loops over the batch's images,
        // an evaluation every N steps.
        // So does a loop that calls a function of this file that steps the training once, with
        // no loop of its own (full-batch training: `for epoch in range(n): train(epoch)`).
        let mut steps_once = vec![false; n];
        let mut steps_here = vec![false; loops];
        // Per function: a loop inside steps the training (here or in a function it calls).
        let mut stepping_loop_inside = vec![false; n];
        for (i, site) in model.calls.iter().enumerate() {
            if steps_training(site.call) || steps_elsewhere.contains(&i) {
                match site.in_loop {
                    Some(l) => {
                        outer_loop[l.index()] = false;
                        steps_here[l.index()] = true;
                        if let Some(f) = site.function {
                            stepping_loop_inside[f.index()] = true;
                        }
                    }
                    None => {
                        if let Some(f) = site.function {
                            steps_once[f.index()] = true;
                        }
                    }
                }
            }
        }
        for e in &edges {
            if e.in_loop.is_some()
                && steps_once[e.callee.index()]
                && let Some(c) = e.caller
            {
                stepping_loop_inside[c.index()] = true;
            }
        }
        spread_to_callers(&mut stepping_loop_inside, &by_callee, &edges);
        // A loop that calls a function stepping the training once, with no loop of steps inside
        // it, steps the training itself, whatever other loops that function runs (over the masks
        // of a batch, the terms of a loss, an EMA's parameters). (Not one that steps inside a loop
        // of its own: a helper that steps once per epoch to flush accumulated gradients leaves its
        // caller a loop over epochs.)
        for e in &edges {
            if let Some(l) = e.in_loop
                && steps_once[e.callee.index()]
                && !stepping_loop_inside[e.callee.index()]
            {
                outer_loop[l.index()] = false;
                steps_here[l.index()] = true;
            }
        }
        // A loop named for epochs runs a loop of steps somewhere it cannot see (a trainer's
        // `fit`), unless it is seen to step the training itself.
        for (id, l) in model.loops() {
            if !steps_here[id.index()] && loop_is_over_epochs(model, l) {
                outer_loop[id.index()] = true;
            }
        }
        // Forward passes reach the functions they call (a worklist: the calls of a file come in
        // no useful order, and a pass per link of a long chain would take quadratic time).
        // (Not through a call in a branch taken now and then, or only in evaluation: `else:` of
        // `if self.training:`.)
        let mut callees: Vec<Vec<FunctionId>> = vec![Vec::new(); n];
        let mut gates = GateCache::default();
        for e in &edges {
            if let Some(c) = e.caller
                && !call_is_gated(
                    model,
                    types,
                    &model.function(c).def.body,
                    e.at.start(),
                    &loop_work,
                    &mut gates,
                )
            {
                callees[c.index()].push(e.callee);
            }
        }
        let mut todo: Vec<FunctionId> =
            model.functions().map(|(id, _)| id).filter(|f| forward[f.index()]).collect();
        while let Some(c) = todo.pop() {
            for &callee in &callees[c.index()] {
                if !forward[callee.index()] {
                    forward[callee.index()] = true;
                    todo.push(callee);
                }
            }
        }
        let mut facts = Facts {
            forward,
            hot: vec![None; n],
            loop_work,
            outer_loop,
            steps_training: steps_here,
            application: !kind.is_library() || is_script(model, types, file_name, parses_args),
            self_check_main: types.project().is_imported()
                && !reads_a_command_line(model.source)
                && !named_for_running(file_name)
                && model.classes().any(|(c, _)| types.is_module_class(c) == Truth::Yes),
            sets_default_device,
            uses_accelerator,
            project_uses_accelerator: uses_accelerator
                || (types.project().uses_accelerator()
                    && !standalone_script(model, types, file_name, parses_args)),
            file_named_for_cuda: stem_words().any(|w| names_accelerator(w, false)),
            file_named_for_evaluation: stem_words().map(str::to_ascii_lowercase).any(|w| {
                matches!(
                    w.as_str(),
                    "val"
                        | "valid"
                        | "validate"
                        | "validation"
                        | "eval"
                        | "evaluate"
                        | "evaluation"
                        | "evaluator"
                        | "evaler"
                        | "test"
                        | "tester"
                )
            }) && !stem_words().any(|w| names_training(&w.to_ascii_lowercase())),
            trains: model.calls.iter().any(|site| steps_training(site.call)),
            file_named_for_mps: stem_words().any(|w| names_accelerator(w, true)),
            in_tests_folder: kind.is_test_like() && crate::source::in_tests_folder(path),
            checks_by_hand: stem_words()
                .any(|w| w.eq_ignore_ascii_case("test") || w.eq_ignore_ascii_case("tests"))
                && compares_by_hand(model.source),
            clock_in,
            clock_at_top,
            loss_inputs: FxHashSet::default(),
            backward_roots: backward_roots(model),
            backward: losses(model, types),
            calls_to,
            device_taken_from,
            elsewhere: types.project().called_from().to_vec(),
            latent: Vec::new(),
            unreferenced: unreferenced_functions(model, types),
        };
        facts.loss_inputs = loss_inputs(model, types, &facts.backward);
        facts.latent = latent_functions(model, types, &edges, &by_callee, &facts.unreferenced);
        // A file whose functions another file calls at every step runs on that file's device.
        facts.uses_accelerator |= !facts.elsewhere.is_empty();
        facts.project_uses_accelerator |= facts.uses_accelerator;
        // Hot loops reach the functions called inside them, and through them, their callees: a
        // breadth-first walk from the calls in hot loops, so each function is hot by its shortest
        // chain of calls from a loop (the first such call in the file, among equals), and is
        // visited once.
        let mut by_caller: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, e) in edges.iter().enumerate() {
            if e.in_loop.is_none()
                && let Some(c) = e.caller
            {
                by_caller[c.index()].push(i);
            }
        }
        // A call in a branch taken now and then (`if step % 100 == 0: log_stats(..)`) does not make
        // its callee run at every step, as a read there is not one at every step.
        let gates = std::cell::RefCell::new(GateCache::default());
        let gated = |e: &Edge| {
            e.caller.is_some_and(|c| {
                call_is_gated(
                    model,
                    types,
                    &model.function(c).def.body,
                    e.at.start(),
                    &facts.loop_work,
                    &mut gates.borrow_mut(),
                )
            })
        };
        // (A method that takes one training step, `.backward()` and an optimizer's `.step()`, is a
        // training step however often a counter lets it run: `if T % replay_frequency == 0:
        // agent.learn(mem)` learns at every step of learning. Not under other gates: a warm-up
        // flag, a branch that leaves the loop.)
        let one_step: FxHashSet<FunctionId> = one_step_functions(model).into_iter().map(|(f, _)| f).collect();
        let lifted = |e: &Edge| {
            one_step.contains(&e.callee)
                && !stepping_loop_inside[e.callee.index()]
                && e.caller.is_some_and(|c| {
                    gated_by_counter_only(model, types.project(), &model.function(c).def.body, e.at.start())
                })
        };
        let mut queue = std::collections::VecDeque::new();
        for e in &edges {
            if let Some(l) = e.in_loop
                && facts.hot_loop(model, l).is_some()
                && facts.hot[e.callee.index()].is_none()
                && !facts.forward[e.callee.index()]
                && (!gated(e) || lifted(e))
            {
                facts.hot[e.callee.index()] = Some(Hot::CalledInLoop(e.at));
                queue.push_back(e.callee);
            }
        }
        // Top-level functions, and methods of top-level classes (`Class.method`), that another
        // file calls at every step.
        for (i, called) in facts.elsewhere.iter().enumerate() {
            let top = match called.function.split_once('.') {
                None => model
                    .functions()
                    .find(|(_, f)| f.class.is_none() && f.parent.is_none() && f.name() == called.function),
                Some((class, method)) => model.functions().find(|(_, f)| {
                    f.name() == method
                        && f.parent.is_none()
                        && f.class.is_some_and(|c| model.class(c).def.name.as_str() == class)
                }),
            };
            if let Some((id, _)) = top
                && facts.hot[id.index()].is_none()
                && !facts.forward[id.index()]
            {
                facts.hot[id.index()] = Some(Hot::CalledElsewhere(i));
                queue.push_back(id);
            }
        }
        // Methods that take one training step and that nothing the project shows calls: a
        // trainer's framework calls them, once per step.
        for (id, step) in one_step_functions(model) {
            if facts.hot[id.index()].is_none()
                && !facts.forward[id.index()]
                && facts.calls_to[id.index()].is_empty()
                && !called_by_name(model, types, id)
            {
                facts.hot[id.index()] = Some(Hot::Step(step));
                queue.push_back(id);
            }
        }
        while let Some(f) = queue.pop_front() {
            for &i in &by_caller[f.index()] {
                let e = &edges[i];
                if facts.hot[e.callee.index()].is_none()
                    && !facts.forward[e.callee.index()]
                    && (!gated(e) || lifted(e))
                {
                    facts.hot[e.callee.index()] = Some(Hot::CalledInLoop(e.at));
                    queue.push_back(e.callee);
                }
            }
        }
        facts
    }

    /// The loop (from `innermost` outwards) that makes code in `innermost` run at every step: the
    /// first one that queues device work at each iteration, unless an outer loop (over epochs) comes
    /// first. Loops that only post-process results (no module calls, no `backward()`) do not count.
    fn hot_loop(&self, model: &Model<'_>, innermost: LoopId) -> Option<LoopId> {
        match self.loop_heat(model, innermost) {
            Heat::Work(l) => Some(l),
            Heat::Outer | Heat::Cold => None,
        }
    }

    /// What the loops around a place (from the innermost outwards) make of it.
    fn loop_heat(&self, model: &Model<'_>, innermost: LoopId) -> Heat {
        let mut at = Some(innermost);
        while let Some(l) = at {
            if self.outer_loop[l.index()] {
                return Heat::Outer;
            }
            if self.loop_work[l.index()] {
                return Heat::Work(l);
            }
            at = model.loop_(l).parent;
        }
        Heat::Cold
    }
}

/// What [`body_is_gated`] said of each `if` (by where it starts, and whether it is in a loop): a
/// function's calls share their `if`s, and each `if` is looked through once, not once per call
/// (a gate holding tens of thousands of calls would otherwise take quadratic time).
type GateCache = FxHashMap<(ruff_text_size::TextSize, bool), bool>;

/// Is the call at `at`, in a function whose body is `body`, inside a branch taken now and then
/// ([`is_gate`], or one that leaves the loop or the function for good) with no loop of steps
/// between the branch and the call, or on a branch the default options never take
/// ([`opt_in_at`])? Found along [`way_to`].
fn call_is_gated(
    model: &Model<'_>,
    types: &Types<'_, '_>,
    body: &[Stmt],
    at: ruff_text_size::TextSize,
    loop_work: &[bool],
    gates: &mut GateCache,
) -> bool {
    // A branch the default options never take holds whatever loops are inside it.
    if types.project().has_options() && opt_in_at(model, types.project(), body, at) {
        return true;
    }
    let Some(way) = way_to(body, at) else { return false };
    let (mut gated, mut in_loop) = (false, false);
    for step in way {
        match step {
            Step::Loop(s) => {
                in_loop = true;
                // Inside a loop of steps, the branches outside it say nothing.
                if model.loop_of_stmt(s).is_some_and(|l| loop_work.get(l.index()).copied().unwrap_or(false)) {
                    gated = false;
                }
            }
            Step::If(i, None) => {
                gated |= *gates
                    .entry((i.start(), in_loop))
                    .or_insert_with(|| body_is_gated(model, types.project(), i, in_loop));
            }
            Step::If(i, Some(c)) => gated |= clause_is_gated(model, i, c),
            Step::Other => {}
        }
    }
    gated
}

/// Is every branch that gates the place at `at` a test of a counter modulo an interval
/// (`if T % replay_frequency == 0:`), taken at every Nth step ([`modulo_branches`])? Not a branch
/// the default options never take, nor a flag, a warm-up or a way out of the loop.
fn gated_by_counter_only(
    model: &Model<'_>,
    project: View<'_>,
    body: &[Stmt],
    at: ruff_text_size::TextSize,
) -> bool {
    if project.has_options() && opt_in_at(model, project, body, at) {
        return false;
    }
    let Some(way) = way_to(body, at) else { return false };
    way.iter().all(|step| match step {
        Step::If(i, None) => counter_test(&i.test) || !body_is_gated(model, project, i, true),
        Step::If(i, Some(c)) => !clause_is_gated(model, i, c),
        Step::Loop(_) | Step::Other => true,
    })
}

/// `T % N == 0`, also beside tests that are no gates (`and len(self.memory) > batch_size`).
fn counter_test(test: &Expr) -> bool {
    match test {
        Expr::BoolOp(b) if b.op == ast::BoolOp::And => {
            b.values.iter().any(|v| modulo_branches(v) == Some(true))
                && b.values.iter().all(|v| modulo_branches(v) == Some(true) || !is_gate(v))
        }
        t => modulo_branches(t) == Some(true),
    }
}

/// A compound statement on the way from a function's body down to a place in it
/// ([`way_to`]): a loop, an `if` with the block that holds the place (its body, `None`, or an
/// `elif`/`else` clause), or another block statement (`with`, `try`, `match`).
enum Step<'s> {
    Loop(&'s Stmt),
    If(&'s ast::StmtIf, Option<&'s ast::ElifElseClause>),
    Other,
}

/// The compound statements from `body` down to the statement that holds `at`, outermost first,
/// each block searched by offset; `None` when a nested `def` or class is on the way (it runs
/// when it is called, in its own context).
fn way_to(body: &[Stmt], at: ruff_text_size::TextSize) -> Option<SmallVec<[Step<'_>; 8]>> {
    let mut way = SmallVec::new();
    let mut stmts = body;
    for _ in 0..MAX_DEPTH {
        let i = stmts.partition_point(|s| s.end() <= at);
        let Some(s) = stmts.get(i).filter(|s| s.range().contains(at)) else { break };
        let inner: Option<&[Stmt]> = match s {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return None,
            Stmt::If(i) => {
                if block_holds(&i.body, at) {
                    way.push(Step::If(i, None));
                    Some(&i.body[..])
                } else {
                    let clause = i.elif_else_clauses.iter().find(|c| block_holds(&c.body, at));
                    if let Some(c) = clause {
                        way.push(Step::If(i, Some(c)));
                    }
                    clause.map(|c| &c.body[..])
                }
            }
            _ => {
                let block = super::rules::helpers::blocks(s).into_iter().find(|b| block_holds(b, at));
                if block.is_some() {
                    way.push(if matches!(s, Stmt::For(_) | Stmt::While(_)) {
                        Step::Loop(s)
                    } else {
                        Step::Other
                    });
                }
                block
            }
        };
        match inner {
            Some(b) => stmts = b,
            None => break,
        }
    }
    Some(way)
}

/// Is the call at `at`, in a function whose body is `body`, on a branch a run with the project's
/// default options never takes (`if args.gail:`, an `elif args.mode == "rare":`)
/// ([`super::options`])? Found along [`way_to`].
fn opt_in_at(model: &Model<'_>, project: View<'_>, body: &[Stmt], at: ruff_text_size::TextSize) -> bool {
    way_to(body, at).is_some_and(|way| {
        way.iter().any(|step| match step {
            Step::If(i, None) => {
                project.opt_in(&i.test, is_switch(model, i)) == Some(true)
                    || opt_in_through_name(model, project, &i.test) == Some(true)
            }
            Step::If(i, Some(c)) => {
                project.opt_in(&i.test, is_switch(model, i)) == Some(false)
                    || c.test.as_ref().is_some_and(|t| project.opt_in(t, true) == Some(true))
            }
            Step::Loop(_) | Step::Other => false,
        })
    })
}

/// `if vis is not None:` where `vis = Visualizer(..) if opts.enable_vis else None`, bound once:
/// as the option's own test (`Some(true)` when the body runs only with an option a run leaves
/// off).
fn opt_in_through_name(model: &Model<'_>, project: View<'_>, test: &Expr) -> Option<bool> {
    let Expr::Compare(c) = test else { return None };
    let (Expr::Name(n), [op @ (ast::CmpOp::Is | ast::CmpOp::IsNot)], [Expr::NoneLiteral(_)]) =
        (&*c.left, &c.ops[..], &c.comparators[..])
    else {
        return None;
    };
    let b = model.binding_of(n)?;
    let binding = model.binding(b);
    if binding.shadowed.is_some() {
        return None;
    }
    let BindingKind::Assignment { value: Expr::If(made), part: Part::Whole, .. } = binding.kind else {
        return None;
    };
    if !matches!(&*made.orelse, Expr::NoneLiteral(_)) {
        return None;
    }
    // Not `None` exactly when the option's test holds.
    let held = project.opt_in(&made.test, false)?;
    Some(if *op == ast::CmpOp::IsNot { held } else { !held })
}

/// Is the place at `at`, in a function whose body is `body`, on a branch only another accelerator
/// than CUDA (and not the CPU) takes ([`device_branch`]): `if state.device.type == "neuron":`?
/// Found along [`way_to`].
fn on_another_accelerator(body: &[Stmt], at: ruff_text_size::TextSize) -> bool {
    way_to(body, at).is_some_and(|way| {
        way.iter().any(|step| match step {
            Step::If(i, None) => device_branch(&i.test) == Some((true, false)),
            Step::If(i, Some(c)) => {
                device_branch(&i.test) == Some((false, false))
                    || c.test.as_ref().and_then(device_branch) == Some((true, false))
            }
            Step::Loop(_) | Step::Other => false,
        })
    })
}

/// Does the text name an accelerator other than CUDA (`"xpu"`, `is_torch_xla_available`,
/// `torch.backends.mps`)? Only such a file can have branches [`on_another_accelerator`] finds.
fn names_another_accelerator(text: &str) -> bool {
    let bytes = text.as_bytes();
    // As a word of its own (`"xpu"`, `is_torch_xla_available`, `DistributedType.XLA`), not inside
    // another (`input`, `output`, `timestamps`).
    let alone = |at: usize, len: usize| {
        !at.checked_sub(1).is_some_and(|i| bytes[i].is_ascii_alphanumeric())
            && !bytes.get(at + len).is_some_and(u8::is_ascii_alphanumeric)
    };
    [
        "xpu", "npu", "mps", "hpu", "neuron", "xla", "tpu", "mlu", "musa", "XPU", "NPU", "MPS", "HPU",
        "NEURON", "XLA", "TPU",
    ]
    .iter()
    .any(|w| memchr::memmem::find_iter(bytes, w.as_bytes()).any(|at| alone(at, w.len())))
}

/// Does the `if` offer something in place of its body: it has `elif`/`else` clauses, or its
/// body ends by leaving the function (then what follows is its other side)?
fn is_switch(model: &Model<'_>, i: &ast::StmtIf) -> bool {
    !i.elif_else_clauses.is_empty() || i.body.last().is_some_and(|s| leaves_for_good(model, s))
}

/// Per function of the file: does no run the repository makes reach it? Either it is (or is
/// inside) a top-level function or class nothing in the repository names
/// ([`super::references`]), or every known call of it is opt-in — on a branch a run with the
/// project's default options never takes ([`opt_in_at`]), or made by a function no run reaches —
/// with at least one such call. Calls from other files count as the index reports them
/// ([`View::opt_in_callers`]); a function nothing is seen to call is otherwise reached (another
/// project, or a part not linted, may call it). Worked out from those functions outwards, each
/// call looked at once more for each of its caller's changes.
fn latent_functions(
    model: &Model<'_>,
    types: &Types<'_, '_>,
    edges: &[Edge],
    by_callee: &[Vec<usize>],
    unreferenced: &[bool],
) -> Vec<bool> {
    let n = by_callee.len();
    let mut only = unreferenced.to_vec();
    let project = types.project();
    let devices = names_another_accelerator(model.source);
    if !project.has_options() && !project.has_unreferenced() && !devices {
        return only;
    }
    // What other files' calls say of each function: every one opt-in, or not.
    let mut outside: Vec<Option<bool>> = vec![None; n];
    for (name, every) in project.opt_in_callers() {
        if let Some(f) = top_level_function(model, name) {
            outside[f.index()] = Some(*every);
        }
    }
    let site_opt_in: Vec<bool> = edges
        .iter()
        .map(|e| {
            e.caller.is_some_and(|c| {
                let body = &model.function(c).def.body;
                (project.has_options() && opt_in_at(model, project, body, e.at.start()))
                    // (Only a private function: another file may call a public one on CUDA,
                    // and without options the index does not record other files' calls.)
                    || (devices
                        && model.function(e.callee).name().starts_with('_')
                        && on_another_accelerator(body, e.at.start()))
            })
        })
        .collect();
    let method: Vec<bool> = model.functions().map(|(_, f)| f.class.is_some()).collect();
    let names: Vec<&str> = model.functions().map(|(_, f)| f.name()).collect();
    // A function named more often than it is called and defined is used as a value too (a
    // callback, `mp.spawn(worker, ..)`, a table of functions): its calls are not all it does.
    // (Not asked of methods: `self.stats.update(..)` names another class's `update`.)
    let used_as_value = |f: usize| {
        if method[f] {
            return false;
        }
        let bytes = model.source.as_bytes();
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let named = memchr::memmem::find_iter(bytes, names[f].as_bytes())
            .filter(|&at| {
                !at.checked_sub(1).is_some_and(|i| word(bytes[i]))
                    && !bytes.get(at + names[f].len()).is_some_and(|&b| word(b))
            })
            .take(by_callee[f].len() + 2)
            .count();
        named > by_callee[f].len() + 1
    };
    let settled = |f: usize, only: &[bool]| {
        if outside[f] == Some(false) || used_as_value(f) {
            return false;
        }
        // A function's calls of itself do not reach it.
        let mut calls =
            by_callee[f].iter().filter(|&&i| edges[i].caller.is_none_or(|c| c.index() != f)).peekable();
        if outside[f].is_none() && calls.peek().is_none() {
            return false;
        }
        // A method may also be called through a receiver whose class is not known (`self.model.
        // loss_function(..)`): calls from code nothing names say nothing of it.
        calls.all(|&i| {
            site_opt_in[i]
                || edges[i].caller.is_some_and(|c| only[c.index()] && !(method[f] && unreferenced[c.index()]))
        })
    };
    let mut by_caller: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, e) in edges.iter().enumerate() {
        if let Some(c) = e.caller {
            by_caller[c.index()].push(i);
        }
    }
    let mut todo: Vec<usize> = (0..n).collect();
    while let Some(f) = todo.pop() {
        if only[f] || !settled(f, &only) {
            continue;
        }
        only[f] = true;
        todo.extend(by_caller[f].iter().map(|&i| edges[i].callee.index()).filter(|&c| !only[c]));
    }
    only
}

/// Per function of the file: is it (or is it inside) a top-level function or class nothing in the
/// repository names ([`super::references`])?
fn unreferenced_functions(model: &Model<'_>, types: &Types<'_, '_>) -> Vec<bool> {
    let project = types.project();
    let mut out = vec![false; model.functions().count()];
    if !project.has_unreferenced() {
        return out;
    }
    for (id, _) in model.functions() {
        let top =
            std::iter::successors(Some(id), |g| model.function(*g).parent).last().map(|g| model.function(g));
        let name = top.map(|t| match t.class {
            Some(c) => model.class(c).def.name.as_str(),
            None => t.name(),
        });
        out[id.index()] = name.is_some_and(|name| project.is_unreferenced(name));
    }
    out
}

/// The function of the file a name of the index names: a top-level function (`ddpm_steps`) or
/// a method of a top-level class (`Discriminator.update`).
fn top_level_function(model: &Model<'_>, name: &str) -> Option<FunctionId> {
    match name.split_once('.') {
        None => model
            .functions()
            .find(|(_, f)| f.class.is_none() && f.parent.is_none() && f.name() == name)
            .map(|(id, _)| id),
        Some((class, method)) => model
            .functions()
            .find(|(_, f)| {
                f.name() == method
                    && f.parent.is_none()
                    && f.class.is_some_and(|c| model.class(c).def.name.as_str() == class)
            })
            .map(|(id, _)| id),
    }
}

/// Is the body of the `if` a branch taken now and then: its test is a gate ([`is_gate`]), it
/// runs only in evaluation (`if not self.training:`), or it leaves the loop or the function for
/// good (then it runs once). A `return` outside any loop (`in_loop`) is just how the function
/// ends, at every call (`if world_size > 1: return reduced.item()`). The `__main__` guard is not.
/// `if not should_log: return`, `if step % log_every: continue`: an `if` with no other clause
/// that skips the rest of the block unless a gate holds ([`is_gate`]), so the rest is the gate's
/// body. (`if not torch.isfinite(loss): return`, whose rest is the normal path, is no gate.)
fn leaves_unless_gated(model: &Model<'_>, project: View<'_>, s: &Stmt) -> bool {
    let Stmt::If(i) = s else { return false };
    // (Skips the rest: `raise` in `if dim % 4 != 0: raise ValueError(..)` checks an argument.)
    if !i.elif_else_clauses.is_empty() || !matches!(i.body.last(), Some(Stmt::Continue(_) | Stmt::Return(_)))
    {
        return false;
    }
    match &*i.test {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => {
            tests_for_bad_values(&u.operand).is_none()
                && is_gate(&u.operand)
                && !modulo_by_one(model, project, &u.operand)
        }
        test => modulo_branches(test) == Some(false) && !modulo_by_one(model, project, test),
    }
}

fn body_is_gated(model: &Model<'_>, project: View<'_>, i: &ast::StmtIf, in_loop: bool) -> bool {
    let leaves =
        i.body.iter().any(|s| leaves_for_good(model, s) && (in_loop || !matches!(s, Stmt::Return(_))));
    // `if (step + 1) % accumulation == 0: optimizer.step()` is gradient accumulation: its body
    // runs at every optimizer step, which is the training step.
    let accumulates = || steps_the_optimizer(&i.body, 0);
    !is_main_guard(&i.test)
        && ((is_gate(&i.test) && !accumulates() && !modulo_by_one(model, project, &i.test))
            || leaves
            || evaluation_branches(&i.test) == Some(true)
            || export_branches(model, &i.test) == Some(true)
            || device_branch(&i.test).is_some_and(|(body, _)| body)
            || clears_its_flag(model, &i.test, &i.body))
}

/// `if step % log_interval == 0:` (or `if not step % log_interval:`) with `log_interval = 1`
/// given once in the module's body, or an option that is 1 in every run: a modulo by one holds at
/// every step, so the branch is no gate. A name the file may rebind ([`Model::may_rebind_global`]), a function's local (which the
/// function may reassign as it goes) and a parameter keep the gate.
fn modulo_by_one(model: &Model<'_>, project: View<'_>, test: &Expr) -> bool {
    let int = |e: &Expr, v: u8| matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ast::Number::Int(i) if i.as_u8() == Some(v)));
    let zero = |e: &Expr| int(e, 0);
    let modulo = match test {
        Expr::Compare(c) if matches!(c.ops[..], [ast::CmpOp::Eq]) => match (&*c.left, &c.comparators[..]) {
            (Expr::BinOp(b), [z]) | (z, [Expr::BinOp(b)]) if zero(z) => b,
            _ => return false,
        },
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => match &*u.operand {
            Expr::BinOp(b) => b,
            _ => return false,
        },
        _ => return false,
    };
    if modulo.op != ast::Operator::Mod {
        return false;
    }
    let one = |e: &Expr| int(e, 1);
    match &*modulo.right {
        e if one(e) => true,
        // `i % args.n_report_steps` with `--n_report_steps` 1 by default, which no run script
        // changes.
        e if project.option_is_one(e) => true,
        Expr::Name(n) => {
            let name = n.id.as_str();
            model.binding_of(n).is_some_and(|b| {
                let b = model.binding(b);
                b.shadowed.is_none()
                    && matches!(b.kind, BindingKind::Assignment { value, part: Part::Whole, .. }
                        if one(value) && at_module_level(model.source, name, value.start().to_usize()))
            }) && !model.may_rebind_global(name)
        }
        _ => false,
    }
}

/// Is the method called where the file's call graph does not resolve it: through an attribute
/// of something else outside any loop (`self.agent.update(batch)`, `agent.update(..)`: a call the
/// file makes once), or from another file of the project?
fn called_by_name(model: &Model<'_>, types: &Types<'_, '_>, f: FunctionId) -> bool {
    let fun = model.function(f);
    let name = fun.name();
    let here = model.calls.iter().any(|site| {
        site.in_loop.is_none() && matches!(&*site.call.func, Expr::Attribute(a) if a.attr.as_str() == name)
    });
    let class = fun.class.map(|c| model.class(c).def.name.as_str());
    here || types.project().opt_in_callers().iter().any(|(called, _)| {
        called == name
            || class.is_some_and(|c| called.strip_prefix(c).and_then(|r| r.strip_prefix('.')) == Some(name))
    })
}

/// The methods that take one training step each time they run: `.backward()` and an
/// optimizer's `.step()` (not a scheduler's) called in the method's own body, outside any loop
/// (`def update(self, batch): loss = ..; loss.backward(); self.optim.step()`), each with its
/// `backward()` call. (A plain function doing so is a script's or a test's one step as often as
/// a trainer's: left alone.)
fn one_step_functions(model: &Model<'_>) -> Vec<(FunctionId, TextRange)> {
    let mut backward: FxHashMap<FunctionId, TextRange> = FxHashMap::default();
    let mut steps: FxHashSet<FunctionId> = FxHashSet::default();
    for site in &model.calls {
        let (Some(f), None) = (site.function, site.in_loop) else { continue };
        if model.function(f).class.is_none() {
            continue;
        }
        let Expr::Attribute(a) = &*site.call.func else { continue };
        match a.attr.as_str() {
            "backward" => {
                backward.entry(f).or_insert(site.call.range());
            }
            "step" if !super::project::steps_scheduler(&a.value) && steps_training(site.call) => {
                steps.insert(f);
            }
            _ => {}
        }
    }
    let mut out: Vec<(FunctionId, TextRange)> =
        backward.into_iter().filter(|(f, _)| steps.contains(f)).collect();
    out.sort_by_key(|(f, _)| f.index());
    out
}

/// Is the assignment whose value starts at `at` a statement of the module's own body (`name = ..`
/// in the first column)? A function's local of that name is another variable, reassigned as the
/// function likes.
fn at_module_level(source: &str, name: &str, at: usize) -> bool {
    let line_start = source.get(..at).and_then(|before| before.rfind('\n')).map_or(0, |i| i + 1);
    source.get(line_start..at).is_some_and(|line| {
        line.strip_prefix(name).is_some_and(|rest| rest.trim_start().starts_with(['=', ':']))
    })
}

/// Does the block step the optimizer (`optimizer.step()`, `scaler.step(opt)`; not a scheduler,
/// `opt_scheduler.step()`), directly or in its inner `if`/`with`/`try` blocks (not its loops)?
fn steps_the_optimizer(body: &[Stmt], depth: usize) -> bool {
    depth < 8
        && body.iter().any(|s| match s {
            Stmt::Expr(e) => matches!(&*e.value, Expr::Call(c)
                if matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "step"
                    && !super::project::steps_scheduler(&a.value))
                    && steps_training(c)),
            Stmt::For(_) | Stmt::While(_) => false,
            _ => super::rules::helpers::blocks(s).into_iter().any(|b| steps_the_optimizer(b, depth + 1)),
        })
}

/// Is an `elif`/`else` clause of the `if` a branch taken now and then: its own test is a gate,
/// or it runs only in evaluation (the other side of `if self.training:`)?
fn clause_is_gated(model: &Model<'_>, i: &ast::StmtIf, clause: &ast::ElifElseClause) -> bool {
    clause.test.as_ref().is_some_and(is_gate)
        || (clause.test.is_none() && negated_switch(&i.test))
        || (modulo_branches(&i.test) == Some(false) && !steps_the_optimizer(&clause.body, 0))
        || device_branch(&i.test).is_some_and(|(body, _)| !body)
        || clause.test.as_ref().and_then(device_branch).is_some_and(|(body, _)| body)
        || evaluation_branches(&i.test) == Some(false)
        || export_branches(model, &i.test) == Some(false)
}

/// A test that holds only while a model is exported or scripted, never in an eager run:
/// `Some(true)` for `if torch.onnx.is_in_onnx_export():` (its body is for the export),
/// `Some(false)` for `if not torch.jit.is_scripting():` (its other branches are), `None` for
/// other tests.
fn export_branches(model: &Model<'_>, test: &Expr) -> Option<bool> {
    match test {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => export_branches(model, &u.operand).map(|b| !b),
        // `if torch.jit.is_scripting() or torch.jit.is_tracing():`
        Expr::BoolOp(b) if b.op == ast::BoolOp::Or => {
            b.values.iter().all(|v| export_branches(model, v) == Some(true)).then_some(true)
        }
        Expr::Call(c) if c.arguments.is_empty() => model
            .canonical_name(&c.func)
            .is_some_and(|q| {
                matches!(
                    q.as_ref(),
                    "torch.onnx.is_in_onnx_export" | "torch.jit.is_scripting" | "torch.jit.is_tracing"
                )
            })
            .then_some(true),
        _ => None,
    }
}

/// `if self.need_sync: ..; self.need_sync = False`: a branch that turns its own flag off runs
/// once, not at every step — unless something turns it on again (an attribute of that name set
/// to anything but an off value outside `__init__`, in any class of the file). So does the fill
/// of an empty attribute (`if self.cache is None: self.cache = ..`), unless something empties it
/// again.
fn clears_its_flag(model: &Model<'_>, test: &Expr, body: &[Stmt]) -> bool {
    fn same(a: &Expr, b: &Expr) -> bool {
        match (a, b) {
            (Expr::Name(x), Expr::Name(y)) => x.id == y.id,
            (Expr::Attribute(x), Expr::Attribute(y)) => {
                x.attr.as_str() == y.attr.as_str() && same(&x.value, &y.value)
            }
            _ => false,
        }
    }
    let off = |v: &Expr| {
        matches!(v, Expr::BooleanLiteral(b) if !b.value)
            || matches!(v, Expr::NoneLiteral(_))
            || matches!(v, Expr::NumberLiteral(n) if matches!(n.value, ast::Number::Int(ref i) if i.as_u8() == Some(0)))
    };
    let rearmed = || match test {
        Expr::Attribute(a) => model.classes().any(|(_, class)| {
            class
                .attr(a.attr.as_str())
                .any(|x| model.function(x.method).name() != "__init__" && !x.value.is_some_and(&off))
        }),
        _ => false,
    };
    // `if self.flag_tensor is None: self.flag_tensor = torch.tensor(0, device=d)`: an attribute
    // filled once, unless something empties it again outside `__init__`.
    // `attn = None` before a loop, then `if attn is None: attn = torch.empty(..).to(x)` in it: a
    // local filled once, at the first step, unless the loop empties it again.
    if let Expr::Compare(c) = test
        && matches!(c.ops[..], [ast::CmpOp::Is])
        && matches!(c.comparators[..], [Expr::NoneLiteral(_)])
        && let Expr::Name(name) = &*c.left
    {
        return fills_local_once(model, name, test, body);
    }
    if let Expr::Compare(c) = test
        && matches!(c.ops[..], [ast::CmpOp::Is])
        && matches!(c.comparators[..], [Expr::NoneLiteral(_)])
        && let Expr::Attribute(attr) = &*c.left
    {
        let fills = body.iter().any(|s| {
            matches!(s, Stmt::Assign(a) if !matches!(*a.value, Expr::NoneLiteral(_))
                && a.targets.iter().any(|t| same(t, &c.left)))
        });
        let emptied = || {
            model.classes().any(|(_, class)| {
                class.attr(attr.attr.as_str()).any(|x| {
                    model.function(x.method).name() != "__init__"
                        && x.value.is_some_and(|v| matches!(v, Expr::NoneLiteral(_)))
                })
            }) || model.emptied_from_outside(attr.attr.as_str())
        };
        return fills && !emptied();
    }
    matches!(test, Expr::Name(_) | Expr::Attribute(_))
        && body
            .iter()
            .any(|s| matches!(s, Stmt::Assign(a) if off(&a.value) && a.targets.iter().any(|t| same(t, test))))
        && !rearmed()
}

/// [`clears_its_flag`] for a local: does `body` (of `if name is None:`) fill the name, and does
/// nothing in the innermost loop around the test set it to `None` again? A name bound to
/// `None` before the loop is then filled at the first step only.
fn fills_local_once(model: &Model<'_>, name: &ast::ExprName, test: &Expr, body: &[Stmt]) -> bool {
    let fills = body.iter().any(|s| {
        matches!(s, Stmt::Assign(a) if !matches!(*a.value, Expr::NoneLiteral(_))
            && a.targets.iter().any(|t| matches!(t, Expr::Name(n) if n.id == name.id)))
    });
    if !fills {
        return false;
    }
    let Some((_, around)) = model
        .loops()
        .filter(|(_, l)| l.stmt.range().contains_range(test.range()))
        .min_by_key(|(_, l)| l.stmt.range().len())
    else {
        return false;
    };
    let scope =
        around.function.and_then(|f| model.function(f).scope).unwrap_or(super::model::ScopeId::MODULE);
    // Every binding of the name in its scope, latest first.
    let mut at = model.lookup(scope, name.id.as_str());
    let mut seen = 0;
    while let Some(id) = at {
        seen += 1;
        if seen > 64 {
            return false;
        }
        let binding = model.binding(id);
        if let BindingKind::Assignment { value, .. } = binding.kind
            && matches!(value, Expr::NoneLiteral(_))
            && around.stmt.range().contains_range(value.range())
        {
            return false;
        }
        at = binding.shadowed;
    }
    true
}

/// A test on a module's training mode: `Some(false)` for `if self.training:` (its body trains,
/// the other branches run in evaluation), `Some(true)` for `if not self.training:` (its body runs
/// in evaluation), `None` for other tests.
fn evaluation_branches(test: &Expr) -> Option<bool> {
    match test {
        Expr::Attribute(a) if a.attr.as_str() == "training" => Some(false),
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => evaluation_branches(&u.operand).map(|b| !b),
        _ => None,
    }
}

/// A branch a CUDA run never takes: its test asks for another device. `Some((true, cpu))` when the
/// body is that branch (`if state.device.type == "xpu":`, `if is_torch_xla_available():`,
/// `if x.device.type == "cpu":`, `if not torch.cuda.is_available():`), `Some((false, cpu))` when
/// the other clauses are (`if x.is_cuda: .. else: ..`); `cpu` says whether that side may be
/// the CPU (a CPU run is one a checkpoint's `map_location` still matters to). `None` for other
/// tests.
pub(crate) fn device_branch(test: &Expr) -> Option<(bool, bool)> {
    /// Devices a CUDA run is not on, by the words code names them with.
    const OTHER: [&str; 10] = ["cpu", "xpu", "npu", "mps", "hpu", "neuron", "xla", "tpu", "mlu", "musa"];
    let device = |word: &str| -> Option<bool> {
        let word = word.split(':').next().unwrap_or(word);
        if word.eq_ignore_ascii_case("cuda") {
            Some(false)
        } else {
            OTHER.iter().any(|o| word.eq_ignore_ascii_case(o)).then_some(true)
        }
    };
    // An expression that holds a device or its kind: `x.device.type`, `state.device`,
    // `args.accelerator`, `self.backend`.
    static HOLDS: NameWords = NameWords::new(&["device", "type", "accelerator", "backend", "platform"]);
    let holds_device = |e: &Expr| match e {
        Expr::Name(n) => HOLDS.in_name(n.id.as_str()),
        Expr::Attribute(a) => HOLDS.in_name(a.attr.as_str()),
        _ => false,
    };
    // `"xpu"`, `DistributedType.XLA`: `Some(true)` for another device, `Some(false)` for CUDA.
    let named = |e: &Expr| match e {
        Expr::StringLiteral(s) => device(s.value.to_str()),
        Expr::Attribute(a) if a.attr.as_str().bytes().all(|b| b.is_ascii_uppercase()) => {
            device(a.attr.as_str())
        }
        _ => None,
    };
    let cpu = |e: &Expr| matches!(e, Expr::StringLiteral(s) if s.value.to_str().eq_ignore_ascii_case("cpu"));
    match test {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => device_branch(&u.operand).map(|(b, cpu)| (!b, cpu)),
        // `if is_xpu and n > 1:` runs only on that device.
        Expr::BoolOp(b) if b.op == ast::BoolOp::And => {
            b.values.iter().filter_map(device_branch).find(|(body, _)| *body)
        }
        // `if xla or npu:`: only on those devices.
        Expr::BoolOp(b) => {
            let sides: Vec<_> = b.values.iter().map(device_branch).collect();
            sides
                .iter()
                .all(|s| s.is_some_and(|(body, _)| body))
                .then(|| (true, sides.iter().flatten().any(|(_, cpu)| *cpu)))
        }
        Expr::Compare(c) if c.comparators.len() == 1 => {
            let (left, right) = (&*c.left, &c.comparators[0]);
            // A mode compared with the CPU's string (`if mode == "cpu":`, YOLOX's label assignment
            // redone on the host after running out of memory) holds a device too; not an offload
            // setting (`offload_mode == "cpu"` runs on GPU runs), nor any name compared with
            // another word that may mean something else (`ansatz == "mps"`).
            let cpu_mode = |e: &Expr, value: &Expr| {
                let name = match e {
                    Expr::Name(n) => n.id.as_str(),
                    Expr::Attribute(a) => a.attr.as_str(),
                    _ => return false,
                };
                let words = || super::rules::helpers::name_words(name);
                cpu(value)
                    && words().any(|w| w.eq_ignore_ascii_case("mode"))
                    && !words()
                        .any(|w| ["offload", "placement", "policy"].iter().any(|o| w.eq_ignore_ascii_case(o)))
            };
            let value = match (named(right), named(left)) {
                (Some(_), _) if holds_device(left) || cpu_mode(left, right) => right,
                (_, Some(_)) if holds_device(right) || cpu_mode(right, left) => left,
                _ => match (c.ops[0], right) {
                    // `device.type in ("xpu", "npu")`
                    (ast::CmpOp::In | ast::CmpOp::NotIn, Expr::Tuple(_) | Expr::List(_) | Expr::Set(_))
                        if holds_device(left) =>
                    {
                        let items: Vec<&Expr> = match right {
                            Expr::Tuple(t) => t.elts.iter().collect(),
                            Expr::List(l) => l.elts.iter().collect(),
                            Expr::Set(s) => s.elts.iter().collect(),
                            _ => Vec::new(),
                        };
                        let others = !items.is_empty() && items.iter().all(|i| named(i) == Some(true));
                        let with_cpu = items.iter().any(|i| cpu(i));
                        return others.then_some((c.ops[0] == ast::CmpOp::In, with_cpu));
                    }
                    _ => return None,
                },
            };
            let other_device = named(value)?;
            // The side a CUDA run does not take may be the CPU: a test for the CPU, or against CUDA.
            let with_cpu = cpu(value) || !other_device;
            match c.ops[0] {
                ast::CmpOp::Eq | ast::CmpOp::Is => Some((other_device, with_cpu)),
                ast::CmpOp::NotEq | ast::CmpOp::IsNot => Some((!other_device, with_cpu)),
                _ => None,
            }
        }
        // `if x.is_cuda:`, `if t.is_cpu:`; a flag named for another accelerator (`if mps_available:`,
        // `if self.use_xla:`; not one named for the CPU, `cpu_offload` runs on GPU runs too).
        Expr::Attribute(_) | Expr::Name(_) => {
            let name = match test {
                Expr::Attribute(a) => a.attr.as_str(),
                Expr::Name(n) => n.id.as_str(),
                _ => return None,
            };
            match name {
                "is_cuda" => Some((false, true)),
                "is_cpu" => Some((true, true)),
                _ => super::rules::helpers::name_words(name)
                    .any(|w| !w.eq_ignore_ascii_case("cpu") && device(w) == Some(true))
                    .then_some((true, false)),
            }
        }
        // `torch.cuda.is_available()`, `torch.backends.mps.is_available()`, `is_torch_xla_available()`,
        // `is_npu_available(check_device=True)`.
        Expr::Call(call) => {
            let words: Vec<&str> = match &*call.func {
                Expr::Name(n) => super::rules::helpers::name_words(n.id.as_str()).collect(),
                Expr::Attribute(a) if a.attr.as_str() == "is_available" => match &*a.value {
                    Expr::Attribute(m) => vec![m.attr.as_str(), "available"],
                    Expr::Name(m) => vec![m.id.as_str(), "available"],
                    _ => return None,
                },
                Expr::Attribute(a) => super::rules::helpers::name_words(a.attr.as_str()).collect(),
                _ => return None,
            };
            if !words.iter().any(|w| w.eq_ignore_ascii_case("available")) {
                return None;
            }
            let devices: Vec<bool> = words.iter().filter_map(|w| device(w)).collect();
            match devices[..] {
                [false] => Some((false, true)),
                [true] => Some((true, false)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Does the block hold the offset?
fn block_holds(block: &[Stmt], at: ruff_text_size::TextSize) -> bool {
    matches!((block.first(), block.last()), (Some(first), Some(last)) if first.start() <= at && at < last.end())
}

/// Spreads `flags` (one per function) from callees to their callers until nothing changes: a
/// worklist, so each call is followed once. `by_callee` lists each function's incoming calls.
fn spread_to_callers(flags: &mut [bool], by_callee: &[Vec<usize>], edges: &[Edge]) {
    let mut work: Vec<usize> = (0..flags.len()).filter(|&f| flags[f]).collect();
    while let Some(f) = work.pop() {
        for &i in &by_callee[f] {
            if let Some(c) = edges[i].caller
                && !flags[c.index()]
            {
                flags[c.index()] = true;
                work.push(c.index());
            }
        }
    }
}

/// `loss.backward()`, `optimizer.step()`, `scaler.step(opt)`: a call made once per training
/// step. (A scheduler's `step()` is as often made once per epoch.)
fn steps_training(call: &ast::ExprCall) -> bool {
    let Expr::Attribute(a) = &*call.func else { return false };
    match a.attr.as_str() {
        "backward" => true,
        "step" => super::project::steps_optimizer(&a.value),
        _ => false,
    }
}

/// Does the loop walk an optimizer's parameter groups (`for g in opt.param_groups:`,
/// `enumerate(self.optimizer.param_groups)`) or a model's parameters or buffers
/// (`zip(net.parameters(), ema.parameters())`, `model.named_parameters()`)?
fn over_parameters(l: &crate::python::model::Loop<'_>) -> bool {
    l.for_parts().is_some_and(|(_, iter)| {
        super::rules::helpers::any_subexpr_is(iter, |e| match e {
            Expr::Attribute(a) => a.attr.as_str() == "param_groups",
            Expr::Call(c) => matches!(&*c.func, Expr::Attribute(a)
                if matches!(a.attr.as_str(), "parameters" | "named_parameters" | "buffers" | "named_buffers")),
            _ => false,
        })
    })
}

/// Is the function a step that a training framework calls at every training step with the batch
/// already on the device ([`api::training_framework`]): a Lightning module's `training_step`, a
/// Transformers `Trainer`'s `training_step` or `compute_loss` (trl's trainers), an optimizer's
/// `step` (a class deriving from `torch.optim.Optimizer`: the loop calls it once per step)? It
/// runs as a forward pass does.
pub(crate) fn framework_step(model: &Model<'_>, project: &View<'_>, f: FunctionId) -> bool {
    let fun = model.function(f);
    matches!(fun.name(), "training_step" | "compute_loss" | "step")
        && fun
            .class
            .and_then(|c| class_framework(model, project, c))
            .is_some_and(|w| w.calls_at_every_step(fun.name()))
}

/// A framework's step that is handed the batch on the device ([`framework_step`]; not an
/// optimizer's `step`, which is handed nothing of the batch).
pub(crate) fn batch_step(model: &Model<'_>, project: &View<'_>, f: FunctionId) -> bool {
    framework_step(model, project, f) && !optimizer_method(model, project, f)
}

/// Is the function a method of an optimizer (a class deriving from one of `torch.optim`'s): its
/// `step`, or a method that runs for it at every training step?
pub(crate) fn optimizer_method(model: &Model<'_>, project: &View<'_>, f: FunctionId) -> bool {
    model.function(f).class.and_then(|c| class_framework(model, project, c))
        == Some(api::Framework::Optimizer)
}

/// The framework a class derives from: it or one of its bases in this file (`TrainModel(
/// ValidateModel)`, `ValidateModel(BaseModel)`, `BaseModel(LightningModule)`) names the
/// framework's class, or a class of another file of the project that derives from it.
pub(crate) fn class_framework(
    model: &Model<'_>,
    project: &View<'_>,
    class: crate::python::model::ClassId,
) -> Option<api::Framework> {
    let mut classes = vec![class];
    let mut seen = 0;
    while let Some(c) = classes.pop() {
        seen += 1;
        if seen > 32 {
            return None;
        }
        for b in model.class(c).bases() {
            if let Some(local) = model.local_class(b) {
                classes.push(local);
                continue;
            }
            let framework = model
                .canonical_name(b)
                .and_then(|q| api::training_framework(&q).or_else(|| project.framework(&q)));
            if framework.is_some() {
                return framework;
            }
        }
    }
    None
}

/// The call that makes the instance a name or an attribute of `self` holds, when every
/// assignment of it calls the same callee (`crit = Loss(..)`, `self.loss = Loss(..)`); or an item
/// of a container of `self` filled item by item with one callee (`self.models[kind]`, or a name
/// bound to one: `model = self.models[kind]`).
pub(crate) fn instance_made_by<'a>(
    model: &Model<'a>,
    types: &Types<'_, 'a>,
    instance: &Expr,
) -> Option<&'a ast::ExprCall> {
    match instance {
        Expr::Name(n) => {
            let b = model.binding_of(n)?;
            match model.binding(b).kind {
                BindingKind::Assignment { value: Expr::Call(made), part: Part::Whole, .. } => {
                    Some(made_before_moves(made))
                }
                // `model = self.models[kind]`: an element of a container of `self`.
                BindingKind::Assignment {
                    value: element @ Expr::Subscript(_), part: Part::Whole, ..
                } => instance_made_by(model, types, element),
                _ => None,
            }
        }
        // `self.models[kind]`, where the class fills the container item by item
        // (`self.models[kind] = Net(..)`), each time with the same class, and otherwise only
        // empties it (`self.models = {}`).
        Expr::Subscript(s) => {
            let Expr::Attribute(field) = &*s.value else { return None };
            let class = types.receiver_class(&field.value)?;
            let empty = |e: &Expr| match e {
                Expr::Dict(d) => d.items.is_empty(),
                Expr::List(l) => l.elts.is_empty(),
                Expr::Call(c) => {
                    c.arguments.is_empty()
                        && model.canonical_name(&c.func).is_some_and(|q| {
                            matches!(
                                q.as_ref(),
                                "builtins.dict" | "builtins.list" | "collections.OrderedDict"
                            )
                        })
                }
                _ => false,
            };
            let mut first: Option<&'a ast::ExprCall> = None;
            for x in types.class_attrs_upto(class, field.attr.as_str(), MAX_FILLS)? {
                match (x.how, x.value) {
                    (AttrHow::Assign, Some(v)) if empty(v) => {}
                    (AttrHow::Update, Some(Expr::Call(c))) => {
                        let c = made_before_moves(c);
                        match first {
                            None => first = Some(c),
                            Some(f) if model.text(f.func.range()) == model.text(c.func.range()) => {}
                            Some(_) => return None,
                        }
                    }
                    _ => return None,
                }
            }
            first
        }
        Expr::Attribute(field) => {
            let class = types.receiver_class(&field.value)?;
            let assigns = types.class_attrs(class, field.attr.as_str());
            // (`self.criterion = None` in `__init__`, filled later, holds no other instance.)
            let mut made =
                assigns.iter().filter(|x| !matches!(x.value, Some(Expr::NoneLiteral(_)))).map(|x| {
                    match x.value {
                        Some(Expr::Call(c)) => Some(made_before_moves(c)),
                        _ => None,
                    }
                });
            let first = made.next()??;
            // The same callee, as spelt (a class of this file has no qualified name).
            let name = model.text(first.func.range());
            made.all(|c| c.is_some_and(|c| model.text(c.func.range()) == name)).then_some(first)
        }
        _ => None,
    }
}

/// A container of `self` filled item by item more times than this is not followed
/// ([`instance_made_by`]).
const MAX_FILLS: usize = 64;

/// The call that makes an instance, seen through the methods of `nn.Module` that return the
/// instance itself: `Discriminator(n).to(device)`, `Net().cuda().eval()`.
fn made_before_moves(call: &ast::ExprCall) -> &ast::ExprCall {
    let mut at = call;
    for _ in 0..MAX_DEPTH {
        match &*at.func {
            Expr::Attribute(a)
                if super::project::RETURNS_ITSELF.contains(&a.attr.as_str())
                    && let Expr::Call(inner) = &*a.value =>
            {
                at = inner;
            }
            _ => break,
        }
    }
    at
}

/// The method of a class of this file that a call on one of its instances runs
/// (`self.ema.update(x)` with `self.ema = Ema()`, `crit(x, y)` with `crit = Loss()` and a
/// `__call__`); not a module's call, which runs its `forward`.
fn instance_method(model: &Model<'_>, types: &Types<'_, '_>, call: &ast::ExprCall) -> Option<FunctionId> {
    let method_of = |instance: &Expr, name: &str| {
        let made = instance_made_by(model, types, instance)?;
        let class = model.local_class(&made.func)?;
        if types.is_module_class(class) == Truth::Yes {
            return None;
        }
        model.method(class, name)
    };
    match &*call.func {
        // `self.ema.update(x)`; or `self.crit(x)`, an instance kept on `self` and called.
        Expr::Attribute(a) => {
            method_of(&a.value, a.attr.as_str()).or_else(|| method_of(&call.func, "__call__"))
        }
        instance => method_of(instance, "__call__"),
    }
}

/// Does the call run a method of another file's class that takes one training step
/// (`dqn.learn(mem)` where `dqn = Agent(args, env)` and `Agent.learn` calls `.backward()` and
/// an optimizer's `.step()` in its own body)?
fn project_step_method(model: &Model<'_>, types: &Types<'_, '_>, call: &ast::ExprCall) -> bool {
    let Expr::Attribute(a) = &*call.func else { return false };
    if !matches!(&*a.value, Expr::Name(_) | Expr::Attribute(_))
        || api::tensor_method_returns_tensor(a.attr.as_str())
        || matches!(a.attr.as_str(), "append" | "item" | "backward" | "step" | "to" | "cuda" | "cpu")
    {
        return false;
    }
    let project = types.project();
    if project.is_empty() {
        return false;
    }
    let Some(made) = instance_made_by(model, types, &a.value) else { return false };
    let name = match project.star_name(&made.func, |n| model.binding_of(n).is_some()) {
        Some(name) => name,
        None => match model.canonical_name(&made.func) {
            Some(q) => q.into_owned(),
            None => return false,
        },
    };
    let class = project.factory_class(&name).unwrap_or(name);
    project.method(&class, a.attr.as_str()).is_some_and(|q| project.method_steps_once(&q))
}

/// A call in the call graph: who calls whom, inside which loop, where.
struct Edge {
    caller: Option<FunctionId>,
    callee: FunctionId,
    in_loop: Option<LoopId>,
    at: TextRange,
}

/// A call that queues work on the device at every iteration of its loop: a module (or a value
/// holding one, such as a `model` parameter) called, `loss.backward()`, `optimizer.step()`.
fn queues_device_work(model: &Model<'_>, types: &Types<'_, '_>, call: &ast::ExprCall) -> bool {
    if let Expr::Attribute(a) = &*call.func
        && (matches!(a.attr.as_str(), "backward" | "step" | "forward" | "generate") && call.arguments.args.len() <= 1
            // `self.model.forward(tokens, pos)`: a module's forward pass, whatever it takes.
            || a.attr.as_str() == "forward")
    {
        return true;
    }
    types.kind(&call.func) == Kind::Module || calls_a_value(model, types, call)
}

/// Is the callee a value rather than a function or class named by a `def`, `class` or import: a
/// parameter or variable (`model(x)`), an attribute of `self` (`self.net(x)`)? Such a callable
/// is almost always a module.
pub(crate) fn calls_a_value(model: &Model<'_>, types: &Types<'_, '_>, c: &ast::ExprCall) -> bool {
    match &*c.func {
        Expr::Name(n) => model.binding_of(n).is_some_and(|b| match model.binding(b).kind {
            // A parameter of unknown kind (`def train(model, ..)`), or a loop over layers.
            super::model::BindingKind::Parameter { .. } => types.binding_kind(b).may_be_tensor(),
            // `model = model.to(device)` (or `.eval()`, ..) of such a parameter, then called.
            BindingKind::Assignment { value: Expr::Call(c), part: Part::Whole, .. }
                if types.binding_kind(b) != Kind::Module =>
            {
                matches!(&*c.func, Expr::Attribute(a) if api::module_method_returns_self(a.attr.as_str())
                && matches!(&*a.value, Expr::Name(p) if model.binding_of(p).is_some_and(|pb| {
                    matches!(model.binding(pb).kind, BindingKind::Parameter { .. })
                        && types.binding_kind(pb).may_be_tensor()
                })))
            }
            // `net_g, net_d = nets` (or `nets[1]`) of such a parameter: one of the models a
            // training function is handed together.
            BindingKind::Assignment { value, part: Part::Element(_), .. }
                if types.binding_kind(b).may_be_tensor() && is_unknown_parameter(model, types, value) =>
            {
                true
            }
            BindingKind::Assignment { value: Expr::Subscript(s), part: Part::Whole, .. }
                if types.binding_kind(b).may_be_tensor() && is_unknown_parameter(model, types, &s.value) =>
            {
                true
            }
            super::model::BindingKind::LoopVar { .. } | super::model::BindingKind::Assignment { .. } => {
                types.binding_kind(b) == Kind::Module
            }
            _ => false,
        }),
        // `self.net(x)`: an attribute assigned a module (or something unknown), not a method.
        Expr::Attribute(a) => types.receiver_class(&a.value).is_some_and(|class| {
            let name = a.attr.as_str();
            model.method(class, name).is_none()
                && !types.class_attrs(class, name).is_empty()
                && matches!(types.attr_kind(class, name), Kind::Module | Kind::Unknown)
        }),
        _ => false,
    }
}

/// Is `e` a name of a parameter of unknown kind (`def train(nets, ..)`)?
fn is_unknown_parameter(model: &Model<'_>, types: &Types<'_, '_>, e: &Expr) -> bool {
    matches!(e, Expr::Name(n) if model.binding_of(n).is_some_and(|b| {
        matches!(model.binding(b).kind, BindingKind::Parameter { .. }) && types.binding_kind(b).may_be_tensor()
    }))
}

/// `for x, y in loader: x = x.to(device)`: the loop moves what it iterates over to the
/// accelerator, one batch each time: the moved name, for [`hands_on`] to find where it goes.
fn moves_its_items<'a>(
    model: &Model<'a>,
    l: super::model::LoopId,
    callee: Option<&str>,
    call: &'a ast::ExprCall,
) -> Option<&'a str> {
    let Expr::Attribute(a) = &*call.func else { return None };
    if !matches!(a.attr.as_str(), "to" | "cuda") || !moves_to_accelerator(callee, call) {
        return None;
    }
    let (_, iter) = model.loop_(l).for_parts()?;
    match &*a.value {
        Expr::Name(n)
            if model.binding_of(n).is_some_and(|b| {
                matches!(model.binding(b).kind, BindingKind::LoopVar { iter: bound, .. } if std::ptr::eq(bound, iter))
            }) =>
        {
            Some(n.id.as_str())
        }
        _ => None,
    }
}

/// Does the call hand a name `moved` accepts to something that computes with it: a model, a
/// function, an object's method (`box.forward_process(x, y)`), not a container that keeps it
/// (`staged.append(x)`) or a builtin that prints or measures it?
fn hands_on(model: &Model<'_>, call: &ast::ExprCall, moved: impl Fn(&str) -> bool) -> bool {
    let keeps = match &*call.func {
        Expr::Attribute(a) => {
            matches!(a.attr.as_str(), "append" | "extend" | "insert" | "add" | "put" | "setdefault")
        }
        func => model.canonical_name(func).is_some_and(|q| q.starts_with("builtins.")),
    };
    !keeps
        && call
            .arguments
            .args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
            .any(|a| matches!(a, Expr::Name(n) if moved(n.id.as_str())))
}

/// A call that shows the file puts things on an accelerator: `.cuda()`, `torch.cuda.*`,
/// `torch.device(..)`, `.to(device)` with a device that is not the CPU, `device=..` that is not
/// the CPU, a trainer object that places the model (`Accelerator()`). `callee` is the call's canonical callee name.
fn moves_to_accelerator(callee: Option<&str>, call: &ast::ExprCall) -> bool {
    static DEV: NameWords = NameWords::new(&["dev"]);
    let cpu = |e: &Expr| matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "cpu");
    if let Some(q) = callee {
        if q == "torch.device" {
            return !call.arguments.args.first().is_some_and(cpu);
        }
        // A trainer object that puts the model and each batch on the accelerator for the code
        // (`Accelerator()`, Lightning's `Fabric()`, `deepspeed.initialize(..)`), unless told to
        // keep to the CPU (`Accelerator(cpu=True)`, `Fabric(accelerator="cpu")`).
        if matches!(
            q,
            "accelerate.Accelerator"
                | "lightning.Fabric"
                | "lightning.fabric.Fabric"
                | "lightning_fabric.Fabric"
                | "deepspeed.initialize"
        ) {
            let on_cpu = call.arguments.keywords.iter().any(|k| {
                k.arg.as_ref().is_some_and(|a| a.as_str() == "cpu")
                    && matches!(k.value, Expr::BooleanLiteral(ref l) if l.value)
                    || k.arg.as_ref().is_some_and(|a| a.as_str() == "accelerator") && cpu(&k.value)
            });
            return !on_cpu;
        }
        if ["torch.cuda.", "torch.mps.", "torch.xpu.", "torch.backends.mps.", "torch_xla."]
            .iter()
            .any(|p| q.starts_with(p))
        {
            return true;
        }
    }
    if let Some(k) = call.arguments.find_keyword("device") {
        return !cpu(&k.value) && !matches!(k.value, Expr::NoneLiteral(_));
    }
    match &*call.func {
        Expr::Attribute(a) if a.attr.as_str() == "cuda" => true,
        Expr::Attribute(a) if a.attr.as_str() == "to" => {
            call.arguments.args.first().is_some_and(|t| match t {
                Expr::StringLiteral(s) => s.value.to_str() != "cpu",
                Expr::Name(n) => DEV.in_name(n.id.as_str()),
                Expr::Attribute(d) => DEV.in_name(d.attr.as_str()),
                _ => false,
            })
        }
        _ => false,
    }
}

/// `for epoch in range(..)`: once per epoch, not per step.
fn loop_is_over_epochs(model: &Model<'_>, l: &super::model::Loop<'_>) -> bool {
    let Some((target, iter)) = l.for_parts() else { return false };
    let mut names = Vec::new();
    super::rules::helpers::target_names(target, &mut names);
    static EPOCH: NameWords = NameWords::new(&["epoch"]);
    // `for iter_epoch, (x, y) in enumerate(loader)`: whatever the index is called, a loop over a
    // loader's batches runs at every step.
    names.iter().any(|n| EPOCH.in_name(n)) && !super::rules::helpers::named_for_loader(model, iter)
}

/// Does the file read a command line (`argparse`, `tyro.cli(..)`, `click`, `fire`, `sys.argv`,
/// Hydra, absl flags, `HfArgumentParser`)?
/// Does the call apply its first argument, a function, to items (`map(f, xs)`, `starmap`,
/// `multi_apply(f, *lists)` of detection code bases)?
fn is_mapping_call(func: &Expr) -> bool {
    let name = match func {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.as_str(),
        _ => return false,
    };
    matches!(name, "map" | "starmap" | "multi_apply")
}

/// Does the file compare results as a test does (`torch.allclose(out, ref)`,
/// `gradcheck(fn, inputs)`, `torch.testing.assert_close`)?
fn compares_by_hand(text: &str) -> bool {
    ["allclose(", "gradcheck(", "assert_close(", "assert_allclose("]
        .iter()
        .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// Does the text read a command line (argparse, click, typer, fire, Hydra, ..)?
pub(crate) fn reads_a_command_line(text: &str) -> bool {
    [
        "typer",
        "ArgumentParser",
        "tyro.",
        "import click",
        "click.",
        "fire.Fire",
        "sys.argv",
        "hydra",
        "absl",
        "jsonargparse",
        "docopt",
    ]
    .iter()
    .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// A script of its own (`Char01 DQN/DQN_CartPole-v0.py` beside other chapters' scripts): it runs
/// as a program, imports nothing of the project, no file of the project imports from it, and no
/// training framework runs its steps. Where its tensors are is its own to say: `.cuda()` in
/// another chapter's script says nothing of it.
fn standalone_script(model: &Model<'_>, types: &Types<'_, '_>, file_name: &str, parses_args: bool) -> bool {
    let project = types.project();
    // (Its own models included: a script may define the network it trains.)
    !project.is_empty()
        && (named_for_running(file_name) || runs_as_program(model, parses_args))
        && !project.imports_project()
        && !project.is_imported()
        && !model.functions().any(|(f, _)| batch_step(model, &project, f))
}

/// A script: its name says what it runs (`train.py`, `eval_imagenet.py`, `demo.py`, ...), or it
/// defines no module and has an `if __name__ == "__main__":` block, parses a command line or
/// loops at its top level (a library runs no loop when imported; a model file's self-test block
/// is not enough to make the model an application). `parses_args`: the file calls
/// `argparse.ArgumentParser`.
fn is_script(model: &Model<'_>, types: &Types<'_, '_>, file_name: &str, parses_args: bool) -> bool {
    if named_for_running(file_name) {
        return true;
    }
    let defines_module = model.classes().any(|(c, _)| types.is_module_class(c) == Truth::Yes);
    !defines_module && runs_as_program(model, parses_args)
}

/// The truth of a test written as a constant (`False`, `True`, `0`, `1`), if it is one.
fn constant_truth(e: &Expr) -> Option<bool> {
    match e {
        Expr::BooleanLiteral(b) => Some(b.value),
        Expr::NumberLiteral(n) => match &n.value {
            ast::Number::Int(i) => Some(i.as_u64() != Some(0)),
            _ => None,
        },
        _ => None,
    }
}

/// Does the file run as a program: it parses a command line, loops at its top level (or calls
/// there a function of its own that loops: `def train(): for episode in ..`, then `train()`) or
/// has an `if __name__ == "__main__":` block?
fn runs_as_program(model: &Model<'_>, parses_args: bool) -> bool {
    if parses_args || model.loops().any(|(_, l)| l.function.is_none()) || model.source.contains("__main__") {
        return true;
    }
    let looping: FxHashSet<&str> = model
        .loops()
        .filter_map(|(_, l)| l.function)
        .map(|f| model.function(f))
        .filter(|f| f.class.is_none() && f.parent.is_none())
        .map(|f| f.name())
        .collect();
    // A call whose value is kept (`SQUARES = _squares(16)`: a library's table filled at import) is
    // not a run; one called for what it does is (`main()`, `sys.exit(main())`, under `try:`).
    let kept = |start: usize| {
        let line = model.source.get(..start).and_then(|before| before.rsplit('\n').next()).unwrap_or("");
        let line = line.trim_end();
        line.ends_with('=') && !["==", "!=", "<=", ">="].iter().any(|op| line.ends_with(op))
    };
    !looping.is_empty()
        && model.calls.iter().any(|site| {
            site.function.is_none()
                && matches!(&*site.call.func, Expr::Name(n) if looping.contains(n.id.as_str()))
                && !kept(site.call.range().start().to_usize())
        })
}

/// Is the file named for what it runs (`train.py`, `eval_coco.py`, `run_glue.py`, `main.py`)?
pub(crate) fn named_for_running(file_name: &str) -> bool {
    const SCRIPT_NAMES: [&str; 21] = [
        "cli",
        "train",
        "eval",
        "test",
        "demo",
        "run",
        "main",
        "inference",
        "infer",
        "predict",
        "sample",
        "generate",
        "finetune",
        "fine_tune",
        "pretrain",
        "benchmark",
        "bench",
        "export",
        "app",
        "evaluate",
        "launch",
    ];
    let stem = file_name.strip_suffix(".py").unwrap_or(file_name).to_ascii_lowercase();
    let named = |n: &str| {
        stem == n
            || stem.strip_prefix(n).is_some_and(|rest| rest.starts_with('_'))
            || stem.strip_suffix(n).is_some_and(|rest| rest.ends_with('_'))
    };
    SCRIPT_NAMES.iter().any(|n| named(n))
}
