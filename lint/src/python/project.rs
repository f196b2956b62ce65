//! The repository index: which classes of the linted Python files are `nn.Module`s, so that a
//! file that imports one from a sibling (`from .layers import Block`, `from models import Net`)
//! knows what it holds. Without it, `class Net(BaseModel)` with `BaseModel` defined in another
//! file is not known to be a module (D004 and the `forward` rules skip it), and
//! `model = Net()` followed by `model(x)` in a training loop is not known to queue device work
//! (D005 stays silent there).
//!
//! Each file tells the index its top-level classes (with their base classes, as the file's
//! imports name them) and the names it re-exports (`from .layers import Block` in an
//! `__init__.py`); the index then answers "is `pkg.models.Net` a module?" once for every class,
//! before any file is checked, so the answer is the same whichever thread asks. A name is found
//! by any dotted suffix of its file's path (`src/pkg/models.py` defines `pkg.models.Net` and
//! `models.Net`), since which folder is on `sys.path` is not known.

use std::path::{Component, Path, PathBuf};

use ruff_python_ast::{self as ast, Expr, Stmt};
use rustc_hash::{FxHashMap, FxHashSet};

use super::api;
use super::typing::Truth;

/// Re-exports and base classes are followed this deep.
const MAX_CHAIN: usize = 16;
/// The keyword arguments of the calls to one function that are told apart by name.
const MAX_KEYWORDS: usize = 64;
/// The names one file's star imports bind, at most (a package's `__init__.py` re-exports a few
/// hundred).
const MAX_STAR_NAMES: usize = 512;
/// Dotted suffixes longer than this are not indexed (a path is rarely imported by more).
const MAX_SUFFIX: usize = 8;

/// What the linted Python files say about their classes, for every file of the run.
#[derive(Debug, Default)]
pub(crate) struct Project {
    /// Every indexed dotted name (each suffix of `pkg.models.Net` with two or more parts) → the
    /// classes it may name.
    classes: FxHashMap<String, Vec<usize>>,
    /// Every indexed dotted name a file re-exports → the names it stands for.
    aliases: FxHashMap<String, Vec<String>>,
    /// Per class: is it an `nn.Module`, worked out when the index was built.
    truth: Vec<Truth>,
    /// Per class: the training framework it derives from ([`api::training_framework`]), worked
    /// out when the index was built.
    framework: Vec<Option<api::Framework>>,
    /// Every indexed dotted name of a top-level function → the files that define it.
    functions: FxHashMap<String, Vec<usize>>,
    /// Every indexed dotted name of a method of a top-level class (`pkg.utils.Logger.update`) →
    /// the files that define it.
    methods: FxHashMap<String, Vec<usize>>,
    /// What the methods do once each time they run towards a training step ([`StepFacts`]): by
    /// each one's file and its name as `Class.method`; only methods that do something of it.
    method_steps: FxHashMap<(usize, String), StepFacts>,
    /// Every indexed dotted name of a class attribute bound by an assignment in the class's body
    /// (`compute_all_losses = VAE_Baseline.compute_losses_on_device`, `__call__ = forward`): a
    /// method of that name is overridden by a value the index does not follow.
    class_values: FxHashSet<String>,
    /// The indexed dotted names of the top-level functions that run a loop of steps themselves
    /// (a training or evaluation loop: `.backward()`, `.step()` or a call of a parameter in it).
    loop_runners: FxHashSet<String>,
    /// The indexed dotted names of the top-level functions whose every result is on the host
    /// ([`returns_host`]).
    host_returners: FxHashSet<String>,
    /// The indexed dotted names of the top-level functions whose every result is moved to the
    /// device ([`returns_device`]).
    device_returners: FxHashSet<String>,
    /// The indexed dotted names of the top-level functions whose every result is made on the
    /// host at each call ([`returns_host_made`]) → the device parameter that would change it.
    host_makers: FxHashMap<String, Unless>,
    /// The indexed dotted names of the top-level functions that return an instance of one class
    /// (a factory, `def create_loss(cfg): return DualLoss(cfg)`) → that class's absolute name.
    factories: FxHashMap<String, String>,
    /// The files that import none of torch's libraries but import the repository's own modules
    /// that do ([`Project::uses_torch_code`]).
    torch_users: FxHashSet<PathBuf>,
    /// Per class: its bases, as [`Project::new`] read them.
    class_bases: Vec<Vec<Base>>,
    /// Per class: its absolute dotted name and its file.
    class_names: Vec<(String, usize)>,
    /// The indexed files, in the order given.
    paths: Vec<PathBuf>,
    /// Per file: its absolute path, module parts and whether it is a package's `__init__.py`,
    /// for a name several files define ([`Project::nearest_file`]).
    roots: Vec<(PathBuf, Vec<String>, bool)>,
    /// Per file (as indexed): its functions that another file calls at every step
    /// ([`Project::set_called_from`]).
    called_from: FxHashMap<PathBuf, Vec<CalledFrom>>,
    /// Some file of the project chooses the CPU, or lets its user choose the device
    /// ([`super::rules::names_cpu_path`]).
    cpu_path: bool,
    /// Some file of the project names an accelerator (`cuda`, `mps`, `xla`).
    accelerator: bool,
    /// Some file of the project turns off the argument checks of `torch.distributions`
    /// (`Distribution.set_default_validate_args(False)`).
    validation_off: bool,
    /// Where the project's files say it runs ([`Placement`]).
    placement: Placement,
    /// The configuration declares the code CUDA-only (`target = "cuda"`).
    cuda_only: bool,
    /// The configuration declares that the code must also run without a GPU (`target = "any"`).
    gpu_optional: bool,
    /// The command-line options the project declares ([`super::options`]).
    options: super::options::Options,
    /// Per file (as indexed): its functions that other files call, each with whether every such
    /// call is on a branch a run with the default options never takes
    /// ([`Project::set_opt_in_callers`]).
    opt_in_callers: FxHashMap<PathBuf, Vec<(String, bool)>>,
    /// The names of the top-level functions and classes, decorated ones left out.
    defined: FxHashSet<String>,
    /// Those of them defined only in files other files import from by name ([`Project::imported`]):
    /// whether anything reaches them is judged ([`super::references`]); a definition elsewhere
    /// may be a script's or a library's entry, and counts as reached.
    judged: FxHashSet<String>,
    /// Those of them nothing in the repository names ([`super::references`]).
    unreferenced: FxHashSet<String>,
    /// The names of top-level functions that appear in the project's Python files that are not
    /// analysed (only indexed, or importing no torch): a call there is not seen, so such a
    /// function may be called on a default path ([`Project::set_opt_in_callers`]).
    unseen: FxHashSet<String>,
    /// The files another file imports a top-level function or class from by name
    /// (`from eli5_utils import embed_questions`), and none star-imports.
    imported: FxHashSet<PathBuf>,
    /// The files no file imports a definition from by name (or that a file star-imports): each
    /// with its top-level names, whether a file star-imports it, and whether it may run by itself
    /// ([`Project::judge_unimported`]).
    unimported: Vec<(PathBuf, Vec<String>, bool, bool)>,
    /// Those of them whose definitions are judged all the same ([`Project::judge_unimported`]).
    judged_unimported: FxHashSet<PathBuf>,
    /// The files that import a module of the project, or something from one ([`importers`]).
    importers: FxHashSet<PathBuf>,
    /// The attributes some class's `_apply` override moves ([`applied_attributes`]).
    applied: Vec<Applied>,
    /// Per file and method (`Class.method`): what the method keeps of its parameters
    /// ([`kept_parameters`]).
    kept: FxHashMap<(PathBuf, String), Vec<(String, usize)>>,
}

/// What a method keeps of its parameters: each attribute of `self` it assigns from one of them,
/// directly or through another such attribute (`self.val = val`, `self.sum += val * n`, then
/// `self.avg = self.sum / self.count`), with the parameter's position after `self`. An
/// assignment that converts the value (`.item()`, `float(..)`, `.cpu()`, `.tolist()`,
/// `.numpy()`) keeps a number or a host copy, and is left out.
pub(crate) fn kept_parameters(f: &ast::StmtFunctionDef) -> Vec<(String, usize)> {
    use super::rules::helpers::{any_subexpr, any_subexpr_is, each_stmt};
    /// The assignments looked at: a method's, not generated code's thousands.
    const MAX_ASSIGNMENTS: usize = 64;
    let mut params: Vec<&str> = f
        .parameters
        .posonlyargs
        .iter()
        .chain(&f.parameters.args)
        .skip(1)
        .map(|p| p.parameter.name.as_str())
        .collect();
    if params.is_empty() {
        return Vec::new();
    }
    fn own(e: &Expr) -> Option<&str> {
        match e {
            Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
                Some(a.attr.as_str())
            }
            _ => None,
        }
    }
    let mut assigned: Vec<(&str, &Expr)> = Vec::new();
    let mut too_many = false;
    each_stmt(&f.body, &mut |s| {
        let (targets, value): (&[Expr], &Expr) = match s {
            Stmt::Assign(a) => (&a.targets, &a.value),
            Stmt::AugAssign(a) => (std::slice::from_ref(&*a.target), &a.value),
            Stmt::AnnAssign(ast::StmtAnnAssign { target, value: Some(v), .. }) => {
                (std::slice::from_ref(&**target), v)
            }
            _ => return,
        };
        for t in targets {
            match t {
                Expr::Attribute(_) => {
                    if let Some(attr) = own(t) {
                        too_many |= assigned.len() >= MAX_ASSIGNMENTS;
                        assigned.push((attr, value));
                    }
                }
                // A parameter rebound (`val = val.item()`): what the method keeps is no longer
                // what it was given.
                Expr::Name(n) => params.retain(|p| *p != n.id.as_str()),
                _ => {}
            }
        }
    });
    if too_many || params.is_empty() {
        return Vec::new();
    }
    let converts = |e: &Expr| {
        any_subexpr_is(e, |sub| match sub {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) => matches!(a.attr.as_str(), "item" | "cpu" | "tolist" | "numpy"),
                Expr::Name(n) => matches!(n.id.as_str(), "float" | "int" | "bool"),
                _ => false,
            },
            _ => false,
        })
    };
    // An attribute ever assigned a converted value (`self.avg = float(self.avg)`) holds a number.
    let converted: Vec<&str> = assigned.iter().filter(|(_, v)| converts(v)).map(|(a, _)| *a).collect();
    let mut kept: Vec<(String, usize)> = Vec::new();
    // Twice: an attribute computed from another one kept later in the method (`self.avg` from
    // `self.sum`) is found on the second pass. Each parameter it is computed from counts
    // (`self.sum += n * val`).
    for _ in 0..2 {
        for (attr, value) in &assigned {
            if converted.contains(attr) {
                continue;
            }
            let mut from: Vec<usize> = Vec::new();
            any_subexpr(value, &mut |sub| {
                match sub {
                    Expr::Name(n) => from.extend(params.iter().position(|p| *p == n.id.as_str())),
                    e => {
                        if let Some(o) = own(e) {
                            from.extend(kept.iter().filter(|(k, _)| k == o).map(|(_, i)| *i));
                        }
                    }
                }
                true
            });
            for i in from {
                if !kept.iter().any(|(k, j)| k == attr && *j == i) {
                    kept.push(((*attr).to_string(), i));
                }
            }
        }
    }
    kept
}

/// Does the module turn off the argument checks of `torch.distributions`: a call of
/// `Distribution.set_default_validate_args(False)` (or `value=False`) anywhere in it? (The text
/// is searched first: most files never name it.)
pub(crate) fn turns_validation_off(text: &str, body: &[Stmt]) -> bool {
    use ruff_python_ast::visitor::{Visitor, walk_expr, walk_stmt};
    struct Find {
        found: bool,
        depth: usize,
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if self.found || self.depth > super::model::MAX_DEPTH {
                return;
            }
            self.depth += 1;
            walk_stmt(self, s);
            self.depth -= 1;
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if self.found || self.depth > super::model::MAX_DEPTH {
                return;
            }
            if let Expr::Call(c) = e {
                let named = match &*c.func {
                    Expr::Attribute(a) => a.attr.as_str() == "set_default_validate_args",
                    Expr::Name(n) => n.id.as_str() == "set_default_validate_args",
                    _ => false,
                };
                let value =
                    c.arguments.args.first().or_else(|| c.arguments.find_keyword("value").map(|k| &k.value));
                let off = match value {
                    Some(Expr::BooleanLiteral(b)) => !b.value,
                    Some(Expr::NumberLiteral(n)) => {
                        matches!(&n.value, ast::Number::Int(i) if i.as_u64() == Some(0))
                    }
                    _ => false,
                };
                if named && off {
                    self.found = true;
                    return;
                }
            }
            self.depth += 1;
            walk_expr(self, e);
            self.depth -= 1;
        }
    }
    if memchr::memmem::find(text.as_bytes(), b"set_default_validate_args").is_none() {
        return false;
    }
    let mut find = Find { found: false, depth: 0 };
    for s in body {
        find.visit_stmt(s);
    }
    find.found
}

/// What a project's text says about where it runs, for D002: whether a hard-coded `"cuda"`
/// bites on a GPU run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// It offers an accelerator other than CUDA (`"mps"`, `torch.backends.mps`, XLA, `xpu`,
    /// `npu`): a run there fails where the code says `"cuda"`.
    pub other_accelerator: bool,
    /// It runs one process per GPU (`init_process_group`, `DistributedDataParallel`,
    /// `LOCAL_RANK`): an explicit `"cuda:0"` puts every process's tensors on GPU 0.
    pub multi_process: bool,
    /// It gives each process its GPU (`torch.cuda.set_device(..)`, or a trainer that does:
    /// Accelerate, a `Trainer`, Lightning, DeepSpeed): a bare `"cuda"` or `.cuda()` lands there.
    pub sets_device: bool,
    /// The configuration declares the code CUDA-only (`target = "cuda"`).
    pub cuda_only: bool,
    /// This file is built for CUDA alone: it talks NCCL (and no other backend), launches Triton
    /// kernels, orders work on CUDA streams, captures CUDA graphs, or runs as a Ray actor given
    /// GPUs. Said of the file
    /// itself, never of the project ([`Placement::union`] leaves it out).
    pub built_for_cuda: bool,
    /// This file runs as a Ray actor given its own GPUs (`@ray.remote(num_gpus=1)`): Ray shows it
    /// only those, so its `cuda:0` is its own GPU. Said of the file itself.
    pub own_gpus: bool,
}

impl Placement {
    /// What one file's text says, in so many words.
    pub(crate) fn of_text(text: &str) -> Placement {
        let has = |words: &[&str]| {
            words.iter().any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
        };
        // `@ray.remote(num_gpus=1)`, `num_gpus=0.5`, `num_gpus=args.gpus`; not `num_gpus=0`.
        let ray_gpu_actor = has(&["ray.remote"])
            && memchr::memmem::find_iter(text.as_bytes(), b"num_gpus").any(|at| {
                let value = text[at + "num_gpus".len()..].trim_start_matches([' ', '\t']);
                let Some(value) = value.strip_prefix('=') else { return false };
                let value = value.trim_start_matches([' ', '\t']);
                let number: String = value.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                if number.is_empty() {
                    !value.is_empty()
                } else {
                    number.parse::<f64>().is_ok_and(|n| n > 0.0)
                }
            });
        // An optional Triton (`try: import triton` / `except ImportError:`) has a fallback for
        // other devices.
        let triton = has(&["import triton", "from triton"])
            && !has(&["except ImportError", "except ModuleNotFoundError", "except Exception"]);
        Placement {
            // A copy of PyTorch's own code (a vendored DataLoader importing `torch._utils`) handles
            // every device PyTorch supports: it says nothing of where the project runs.
            // Nor does a file copied from Hugging Face's libraries (their license header): their
            // MPS and XLA workarounds come with the copy (`if torch.backends.mps.is_available():`
            // in a Diffusers pipeline), whatever the project runs on.
            other_accelerator: !copies_pytorch_internals(text)
                && !copies_hugging_face(text)
                && (offers_mps(text)
                    || has(&[
                        "backends.mps",
                        "torch_xla",
                        "xla_device",
                        "torch.xpu",
                        "\"xpu",
                        "'xpu",
                        "torch_npu",
                        "\"npu",
                        "'npu",
                    ])),
            multi_process: has(&["init_process_group", "DistributedDataParallel", "LOCAL_RANK"]),
            // Trainers that start the processes give each its GPU themselves.
            sets_device: has(&[
                "cuda.set_device(",
                "Accelerator(",
                "Trainer(",
                "LightningModule",
                "deepspeed.initialize",
            ]),
            cuda_only: false,
            built_for_cuda: (has(&["\"nccl\"", "'nccl'", "PyNcclCommunicator"])
                && !has(&["gloo", "xccl", "hccl", "\"ccl\"", "'ccl'", "\"mpi\""]))
                || triton
                || has(&["torch.cuda.current_stream", "torch.cuda.Stream("])
                // It captures CUDA graphs (an inference engine's model runner).
                || has(&["torch.cuda.CUDAGraph(", "torch.cuda.graph(", "make_graphed_callables("])
                || ray_gpu_actor,
            own_gpus: ray_gpu_actor,
        }
    }

    /// What a file of tests says: of other accelerators, only where it puts something on one
    /// (`.to("mps")`, `device="xpu"`, `torch.device("npu")`) or asks PyTorch for one
    /// (`torch.backends.mps.is_available()`, `torch.xpu`): a helper copied from a library that
    /// runs everywhere (`get_accelerator().device_name() == "npu"`) says nothing of where the
    /// project's own code runs.
    pub(crate) fn of_test(self, text: &str) -> Placement {
        let places = ["mps", "xpu", "npu"].iter().any(|d| {
            [
                format!(".to(\"{d}"),
                format!(".to('{d}"),
                format!("device=\"{d}"),
                format!("device='{d}"),
                format!("device(\"{d}"),
                format!("device('{d}"),
            ]
            .iter()
            .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
        }) || ["torch.backends.mps", "torch.xpu.", "torch_npu", "torch_xla"]
            .iter()
            .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some());
        Placement { other_accelerator: self.other_accelerator && places, ..self }
    }

    fn union(self, other: Placement) -> Placement {
        Placement {
            other_accelerator: self.other_accelerator || other.other_accelerator,
            multi_process: self.multi_process || other.multi_process,
            sets_device: self.sets_device || other.sets_device,
            cuda_only: self.cuda_only || other.cuda_only,
            built_for_cuda: false,
            own_gpus: false,
        }
    }
}

/// Does the text name `"mps"` other than to set it aside (`device_type != "mps"`, the autocast
/// workaround model files copy from Transformers' rotary embeddings)?
fn offers_mps(text: &str) -> bool {
    ["\"mps\"", "'mps'"].iter().any(|w| {
        memchr::memmem::find_iter(text.as_bytes(), w.as_bytes())
            .any(|at| !text[..at].trim_end_matches([' ', '\t']).ends_with("!="))
    })
}

/// Does the file's license header (its first 2 KB) name Hugging Face as the author, or a comment
/// there cite one of its repositories as the source (`# From https://raw.githubusercontent.com/
/// huggingface/diffusers/..`): a file copied from Transformers or Diffusers?
fn copies_hugging_face(text: &str) -> bool {
    let head = &text.as_bytes()[..text.len().min(2048)];
    let licensed =
        ["Copyright", "copyright"].iter().any(|c| memchr::memmem::find(head, c.as_bytes()).is_some())
            && ["HuggingFace Inc", "HuggingFace Team", "Hugging Face Inc", "The HuggingFace"]
                .iter()
                .any(|w| memchr::memmem::find(head, w.as_bytes()).is_some());
    licensed
        || head.split(|&b| b == b'\n').any(|line| {
            line.trim_ascii_start().starts_with(b"#") && memchr::memmem::find(line, b"huggingface/").is_some()
        })
}

/// Does the file import PyTorch's private modules (`from torch._utils import ..`,
/// `torch.utils.data._utils`): a copy of PyTorch's own code rather than the project's?
fn copies_pytorch_internals(text: &str) -> bool {
    ["from torch._", "import torch._", "torch.utils.data._utils"]
        .iter()
        .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// A call, at every step (in a hot loop, or in a function that runs in one), to a top-level
/// function of another file of the project: what the caller's file tells the callee's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HotCall {
    /// The callee's absolute dotted name, as the caller imports it.
    pub callee: String,
    /// Where the call is in the caller's file (a byte offset; its line once the file is
    /// reported).
    pub offset: usize,
    pub line: usize,
    /// In a notebook, the cell the call is in (and `line` is the line in it).
    pub cell: Option<usize>,
    /// Per positional argument: is it on the accelerator, as far as the caller knows? (For a
    /// method, the first is its receiver's place, never a tensor.)
    pub args: Vec<bool>,
    /// Per keyword argument, by name: is it on the accelerator?
    pub keywords: Vec<(String, bool)>,
    /// Is some `*args` or `**kwargs` argument on the accelerator?
    pub spread: bool,
    /// Does the caller need the returned value on the host at once (a decision), rather than
    /// log or accumulate it?
    pub result_needed: bool,
    /// How the call runs at every step, for messages: "in a loop", or "at every training step"
    /// (a Lightning `training_step`), "at every forward pass".
    pub how: &'static str,
    /// The callee is a method its class leaves to subclasses (`self.loss(batch)` where `loss` is
    /// an `@abstractmethod`): the call runs their overrides, in whichever file they are.
    pub dispatched: bool,
}

/// A call to a function of another file of the project, and whether it is on a branch that a
/// run with the default options never takes (`if args.gail:`), or in a function only such
/// branches call ([`super::options`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProjectCall {
    /// The callee's absolute dotted name, as for [`HotCall::callee`].
    pub callee: String,
    pub opt_in: bool,
}

/// What one file's lint tells the others through the index: its calls to their functions.
#[derive(Debug, Default, Clone)]
pub(crate) struct Calls {
    /// The calls at every step.
    pub hot: Vec<HotCall>,
    /// Every call (when the project declares options), once per callee and opt-in-ness.
    pub elsewhere: Vec<ProjectCall>,
    /// The file's own top-level functions and methods (`Class.method`) that no run reaches
    /// (only opt-in calls, or nothing names them), as its lint judged them.
    pub latent: Vec<String>,
}

/// A function of a file that another file calls at every step, and the first such call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CalledFrom {
    pub function: String,
    /// The caller's file as diagnostics show it, and the call's line.
    pub caller: String,
    pub line: usize,
    /// Per positional parameter: does some caller pass a tensor on the accelerator?
    pub args: Vec<bool>,
    /// Per keyword argument some caller passes, by name: is one on the accelerator?
    pub keywords: Vec<(String, bool)>,
    /// Does some caller pass a `*args` or `**kwargs` argument on the accelerator?
    pub spread: bool,
    /// Does some caller need the returned value on the host at once?
    pub result_needed: bool,
    /// How the call shown runs at every step ([`HotCall::how`]).
    pub how: &'static str,
}

/// A parameter of a function, as [`CalledFrom::passes`] asks about it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'n> {
    Named { position: usize, name: &'n str },
    Args,
    Kwargs,
}

impl CalledFrom {
    /// Does some caller pass a tensor on the accelerator for the parameter: a named one at its
    /// position (`usize::MAX` for a keyword-only one) or by its name; `*args` for a positional
    /// argument past the `positional` named ones; `**kwargs` for a keyword no parameter in
    /// `named` takes, or a spread `**d`?
    pub(crate) fn passes(&self, param: Param<'_>, positional: usize, named: &[&str]) -> bool {
        match param {
            Param::Named { position, name } => {
                self.args.get(position).copied().unwrap_or(false)
                    || self.keywords.iter().any(|(k, on)| *on && k == name)
            }
            Param::Args => self.spread || self.args.iter().skip(positional).any(|a| *a),
            Param::Kwargs => {
                self.spread || self.keywords.iter().any(|(k, on)| *on && !named.contains(&k.as_str()))
            }
        }
    }

    /// Does the call pass anything on the accelerator?
    fn passes_any(args: &[bool], keywords: &[(String, bool)], spread: bool) -> bool {
        spread || args.iter().any(|a| *a) || keywords.iter().any(|(_, on)| *on)
    }

    /// Adds another call to what is known; the place shown becomes the first call that passes a
    /// tensor on the accelerator, if the first call did not.
    fn absorb(&mut self, call: &CalledFrom) {
        if !Self::passes_any(&self.args, &self.keywords, self.spread)
            && Self::passes_any(&call.args, &call.keywords, call.spread)
        {
            self.caller = call.caller.clone();
            self.line = call.line;
            self.how = call.how;
        }
        if self.args.len() < call.args.len() {
            self.args.resize(call.args.len(), false);
        }
        for (k, a) in self.args.iter_mut().zip(&call.args) {
            *k |= *a;
        }
        for (name, on) in &call.keywords {
            match self.keywords.iter_mut().find(|(k, _)| k == name) {
                Some((_, known)) => *known |= *on,
                None => self.keywords.push((name.clone(), *on)),
            }
        }
        // Thousands of distinct keywords (generated code): the rest count as a spread, so
        // merging stays linear.
        if self.keywords.len() > MAX_KEYWORDS {
            self.spread |= self.keywords[MAX_KEYWORDS..].iter().any(|(_, on)| *on);
            self.keywords.truncate(MAX_KEYWORDS);
        }
        self.spread |= call.spread;
        self.result_needed |= call.result_needed;
    }
}

/// What one file gives the index.
#[derive(Debug, Default)]
pub(crate) struct FileEntry {
    /// The file's module path (`pkg/models/net.py` → `pkg.models.net`; an `__init__.py` is its
    /// package).
    module: Vec<String>,
    /// Each top-level class: its name and its base classes as absolute dotted names.
    classes: Vec<(String, Vec<Base>)>,
    /// Each top-level name bound to another name (an import, `Model = Net`) → what it names.
    aliases: Vec<(String, String)>,
    /// The top-level functions, and what the index knows of each.
    functions: Vec<(String, FunctionFacts)>,
    /// The methods of the top-level classes, as `Class.method`.
    methods: Vec<String>,
    /// The names the top-level classes' bodies bind by assignment, as `Class.name`.
    class_values: Vec<String>,
    /// What the methods do towards a training step ([`StepFacts`]), as `Class.method`.
    step_facts: Vec<(String, StepFacts)>,
    /// What those methods keep of their parameters ([`kept_parameters`]), where they keep some.
    kept: Vec<(String, Vec<(String, usize)>)>,
    /// Its `from module import *` lines: how many aliases came before each, and the module as
    /// an absolute dotted name.
    stars: Vec<(usize, String)>,
    /// The names a literal `__all__` lists: what a star import of it binds.
    all: Option<Vec<String>>,
    path: PathBuf,
    /// The file chooses the CPU, or lets its user choose the device.
    pub(crate) cpu_path: bool,
    /// The file names an accelerator.
    pub(crate) accelerator: bool,
    /// The file turns off the argument checks of `torch.distributions`.
    pub(crate) validation_off: bool,
    /// Where the file says the code runs.
    pub(crate) placement: Placement,
    /// The command-line options it declares ([`super::options::declared`]).
    pub(crate) options: Vec<super::options::Declared>,
    /// Its decorated top-level functions and classes (kept in registries, or wrapped).
    decorated: Vec<String>,
    /// What its top level imports by name (`a.b.c` for `from a.b import c`), absolute.
    imports: Vec<String>,
    /// The modules its top level imports whole (`import models`, `import pkg.utils`).
    modules_imported: Vec<String>,
    /// Its top level imports torch or a library that runs on it ([`super::model::is_torch_library`]).
    imports_torch: bool,
    /// The attributes its classes' `_apply` overrides move ([`applied_attributes`]).
    applied: Vec<Applied>,
    /// It may run by itself: it has a `__main__` block, reads a command line, or is named for
    /// what it runs (`train.py`) or for a tool (`setup.py`, `conftest.py`).
    pub(crate) runs_itself: bool,
}

/// A base class as the file names it.
#[derive(Debug, Clone)]
enum Base {
    /// An absolute dotted name (`torch.nn.Module`, `pkg.layers.Block`, `builtins.object`).
    Named(String),
    /// `Generic[T]` and other subscripts: says nothing either way.
    Neutral,
    /// A call or other expression: not known.
    Unknown,
}

impl Project {
    /// Builds the index from each file's entry ([`FileEntry::of`]).
    pub(crate) fn new(mut files: Vec<FileEntry>) -> Project {
        let mut project = Project::default();
        let mut bases: Vec<Vec<Base>> = Vec::new();
        let (mut imports, mut starred) = (FxHashSet::default(), FxHashSet::default());
        let mut definitions: Vec<(usize, Vec<String>, Vec<String>)> = Vec::new();
        let mut runs_itself: Vec<bool> = Vec::new();
        star_exports(&mut files);
        project.torch_users = torch_users(&files);
        project.importers = importers(&files);
        for file in files {
            let file_id = project.paths.len();
            let absolute = std::path::absolute(&file.path).unwrap_or_else(|_| file.path.clone());
            let package = file.path.file_name().is_some_and(|n| n == "__init__.py");
            project.roots.push((absolute, file.module.clone(), package));
            project.paths.push(file.path);
            project.cpu_path |= file.cpu_path;
            project.accelerator |= file.accelerator;
            project.validation_off |= file.validation_off;
            for (method, kept) in file.kept {
                project.kept.insert((project.paths[file_id].clone(), method), kept);
            }
            project.placement = project.placement.union(file.placement);
            for declared in file.options {
                project.options.declare(declared);
            }
            imports.extend(file.imports.iter().cloned());
            for a in file.applied {
                if !project.applied.contains(&a) {
                    project.applied.push(a);
                }
            }
            starred.extend(file.stars.iter().map(|(_, m)| m.clone()));
            runs_itself.push(file.runs_itself);
            definitions.push((
                file_id,
                file.module.clone(),
                file.functions
                    .iter()
                    .map(|(n, _)| n.clone())
                    .chain(file.classes.iter().map(|(n, _)| n.clone()))
                    .collect::<Vec<_>>(),
            ));
            project.defined.extend(
                file.functions
                    .iter()
                    .map(|(name, _)| name)
                    .chain(file.classes.iter().map(|(name, _)| name))
                    .filter(|name| !file.decorated.contains(name))
                    .cloned(),
            );
            for (name, facts) in file.functions {
                for key in suffixes(&file.module, &name) {
                    if facts.runs_loop {
                        project.loop_runners.insert(key.clone());
                    }
                    if facts.returns_host {
                        project.host_returners.insert(key.clone());
                    }
                    if facts.returns_device {
                        project.device_returners.insert(key.clone());
                    }
                    if let Some(unless) = &facts.host_made {
                        project.host_makers.insert(key.clone(), unless.clone());
                    }
                    if let Some(class) = &facts.makes {
                        project.factories.insert(key.clone(), class.clone());
                    }
                    project.functions.entry(key).or_default().push(file_id);
                }
            }
            for name in file.methods {
                for key in suffixes(&file.module, &name) {
                    project.methods.entry(key).or_default().push(file_id);
                }
            }
            for name in file.class_values {
                project.class_values.extend(suffixes(&file.module, &name));
            }
            project.method_steps.extend(file.step_facts.into_iter().map(|(m, facts)| ((file_id, m), facts)));
            for (name, class_bases) in file.classes {
                let id = bases.len();
                bases.push(class_bases);
                let mut absolute = file.module.join(".");
                if !absolute.is_empty() {
                    absolute.push('.');
                }
                absolute.push_str(&name);
                project.class_names.push((absolute, file_id));
                for key in suffixes(&file.module, &name) {
                    project.classes.entry(key).or_default().push(id);
                }
            }
            for (name, target) in file.aliases {
                for key in suffixes(&file.module, &name) {
                    let targets = project.aliases.entry(key).or_default();
                    if !targets.contains(&target) {
                        targets.push(target.clone());
                    }
                }
            }
        }
        // Each class's answer, with a memo shared by all; a class met again while its own answer is
        // being worked out (a cycle of bases) is unknown.
        let mut memo: Vec<Option<Truth>> = vec![None; bases.len()];
        for id in 0..bases.len() {
            project.class_truth(id, &bases, &mut memo, 0);
        }
        project.truth = memo.into_iter().map(|t| t.unwrap_or(Truth::Unknown)).collect();
        let mut memo: Vec<Option<Option<api::Framework>>> = vec![None; bases.len()];
        for id in 0..bases.len() {
            project.class_framework(id, &bases, &mut memo, 0);
        }
        project.framework = memo.into_iter().map(Option::flatten).collect();
        project.class_bases = bases;
        // The files other files import a definition from by name, and that no file star-imports.
        let mut entries: FxHashSet<&str> = FxHashSet::default();
        for (file, module, names) in &definitions {
            let suffixes = || (0..module.len()).map(|i| module[i..].join("."));
            let named = suffixes().any(|m| names.iter().any(|n| imports.contains(&format!("{m}.{n}"))));
            let star_imported = suffixes().any(|m| starred.contains(&m));
            if named && !star_imported {
                project.imported.insert(project.paths[*file].clone());
            } else {
                entries.extend(names.iter().map(String::as_str));
                project.unimported.push((
                    project.paths[*file].clone(),
                    names.clone(),
                    star_imported,
                    runs_itself[*file],
                ));
            }
        }
        project.judged = project.defined.iter().filter(|n| !entries.contains(n.as_str())).cloned().collect();
        project
    }

    /// Is the class an absolute dotted name names an `nn.Module`? `Unknown` when the name is not
    /// a class of the project (or names several that disagree).
    pub(crate) fn is_module(&self, name: &str) -> Truth {
        self.lookup(name, &|id| self.truth.get(id).copied().unwrap_or(Truth::Unknown))
    }

    /// Does the project define or re-export anything under this absolute dotted name?
    fn binds(&self, name: &str) -> bool {
        let key = indexed_key(name);
        self.classes.contains_key(key) || self.functions.contains_key(key) || self.aliases.contains_key(key)
    }

    /// Is the project empty (a single text, or no Python file)?
    pub(crate) fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.functions.is_empty()
    }

    /// The one file of the project that defines the top-level function an absolute dotted name
    /// names (directly or through re-exports), and the function's own name; `None` when no file
    /// or several do.
    pub(crate) fn function_file<'s>(&'s self, name: &'s str) -> Option<(&'s Path, &'s str)> {
        self.one_file(self.function_candidates(name)?.into_iter())
    }

    /// The files (and own names) that may define the top-level function `name` names; `None`
    /// when a file binds the name to something outside the project.
    fn function_candidates<'s>(&'s self, name: &'s str) -> Option<Vec<(usize, &'s str)>> {
        let reached = self.names_reached(name);
        // A file that binds the name to something outside the project (`from sklearn.metrics
        // import accuracy_score as accuracy` in another `utils.py`): which one is meant is not known.
        if reached.iter().any(|n| {
            self.aliases.get(*n).is_some_and(|targets| {
                targets.iter().any(|t| {
                    let t = indexed_key(t);
                    !self.functions.contains_key(t) && !self.aliases.contains_key(t)
                })
            })
        }) {
            return None;
        }
        Some(
            reached
                .into_iter()
                .flat_map(|candidate| {
                    let own = candidate.rsplit('.').next().unwrap_or(candidate);
                    self.functions.get(candidate).into_iter().flatten().map(move |&file| (file, own))
                })
                .collect(),
        )
    }

    /// The one file of the project that defines the method an absolute dotted name names
    /// (`pkg.utils.Logger.update`), and the method as `Class.method`; `None` when no file or
    /// several do.
    pub(crate) fn method_file<'s>(&'s self, name: &'s str) -> Option<(&'s Path, &'s str)> {
        self.one_file(self.method_candidates(name)?.into_iter())
    }

    /// The files (and `Class.method` names) that may define the method `name` names; `None` when
    /// a file binds the class's name to a class outside the project.
    fn method_candidates<'s>(&'s self, name: &'s str) -> Option<Vec<(usize, &'s str)>> {
        let (class, method) = name.rsplit_once('.')?;
        let reached = self.names_reached(class);
        // A file that binds the class's name to a class outside the project (`from logging import
        // Logger` in one file, `class Logger` in another): which one is meant is not known.
        if reached
            .iter()
            .any(|n| self.aliases.get(*n).is_some_and(|targets| targets.iter().any(|t| !self.binds(t))))
        {
            return None;
        }
        // The class through its re-exports (`utils.Logger` → `utils.misc.Logger`).
        let own: Vec<(usize, &'s str)> =
            reached.into_iter().flat_map(|reached| self.defined(reached, method)).collect();
        if !own.is_empty() {
            return Some(own);
        }
        // A method the class inherits from a base of the project (`RNN_VAE(VAE_Baseline)`, whose
        // `compute_all_losses` another file defines): the definition Python runs ([`Project::inherited`]).
        // (Not a special method: a base's `__call__` most often hands over to a method each
        // subclass defines, `self.forward(..)`, and which subclass is not followed from there.)
        if method.starts_with("__") && method.ends_with("__") {
            return Some(Vec::new());
        }
        Some(self.inherited(class, method))
    }

    /// The methods `class.method` names, defined in the class itself: each one's file and its name
    /// as `Class.method`.
    fn defined<'s>(&'s self, class: &str, method: &str) -> Vec<(usize, &'s str)> {
        let entry = self.methods.get_key_value(format!("{class}.{method}").as_str());
        entry
            .into_iter()
            .flat_map(|(key, files)| {
                let own = match key.rmatch_indices('.').nth(1) {
                    Some((at, _)) => &key[at + 1..],
                    None => key.as_str(),
                };
                files.iter().map(move |&file| (file, own))
            })
            .collect()
    }

    /// The definitions of `method` a class inherits from its bases of the project: among the
    /// ancestors (each visited once, as far as [`MAX_CHAIN`] bases up) that define it, the one
    /// that derives from all the others, which Python's method resolution order puts first
    /// (`Model(Logged, DeviceLosses)` runs `DeviceLosses`'s override of their common base's
    /// method). None where an ancestor has a base from outside the project, which may define it
    /// first, or where no definer derives from all the others (the order of the bases decides).
    fn inherited<'s>(&'s self, class: &str, method: &str) -> Vec<(usize, &'s str)> {
        let own = self.lookup_ids(class);
        let mut seen: FxHashSet<usize> = FxHashSet::default();
        let mut todo: Vec<(usize, usize)> = own.iter().map(|&id| (id, 0)).collect();
        let mut definers: Vec<(usize, Vec<(usize, &'s str)>)> = Vec::new();
        while let Some((id, depth)) = todo.pop() {
            if depth > MAX_CHAIN || !seen.insert(id) {
                continue;
            }
            // A class attribute of that name (`compute_all_losses = Base.other_method`) is what
            // runs, on this class or above: not followed.
            if let Some((name, _)) = self.class_names.get(id)
                && self.class_values.contains(indexed_key(&format!("{name}.{method}")))
            {
                return Vec::new();
            }
            if !own.contains(&id)
                && let Some((name, _)) = self.class_names.get(id)
            {
                let found = self.defined(indexed_key(name), method);
                if !found.is_empty() {
                    // What it overrides further up does not run.
                    definers.push((id, found));
                    continue;
                }
            }
            for base in self.class_bases.get(id).into_iter().flatten() {
                let Base::Named(q) = base else { continue };
                if api::is_plain_base(q) || api::is_module_class(q) {
                    continue;
                }
                let ids = self.lookup_ids(q);
                // A base from outside the project may define it first: not known.
                if ids.is_empty() {
                    return Vec::new();
                }
                todo.extend(ids.into_iter().map(|b| (b, depth + 1)));
            }
        }
        let mut memo: Vec<Option<bool>> = vec![None; self.class_bases.len()];
        let first = definers.iter().position(|(d, _)| {
            definers.iter().all(|(other, _)| {
                other == d || {
                    memo.iter_mut().for_each(|m| *m = None);
                    self.derives_from(*d, &[*other], &mut memo, 0)
                }
            })
        });
        first.map(|i| definers.swap_remove(i).1).unwrap_or_default()
    }

    /// Does the method an absolute dotted name names (`pkg.agent.Agent.learn`) take one training
    /// step each time it runs ([`StepFacts`]), in every definition it may name? Its calls of the
    /// object's own methods are followed from the class named (`EncDecTrainer.mt_step` calls
    /// `self.optimize(loss)`, which its base `Trainer` defines).
    fn method_steps_once(&self, name: &str) -> bool {
        let Some((class, _)) = name.rsplit_once('.') else { return false };
        // What each definition takes, worked out once per query (a class whose methods all call
        // one another is walked once, not once per path).
        let mut memo: FxHashMap<(usize, String), (bool, bool)> = FxHashMap::default();
        self.method_candidates(name).is_some_and(|candidates| {
            !candidates.is_empty()
                && candidates.iter().all(|&(file, own)| {
                    let (backward, step) = self.method_takes(class, file, own, &mut memo, 0);
                    backward && step
                })
        })
    }

    /// Whether one definition of a method (its file, `Class.method`), with the methods of `class`
    /// it calls on `self`, calls `.backward()` and an optimizer's `.step()`. (A method being
    /// worked out reads as taking nothing: a cycle of calls adds nothing.)
    fn method_takes(
        &self,
        class: &str,
        file: usize,
        own: &str,
        memo: &mut FxHashMap<(usize, String), (bool, bool)>,
        depth: usize,
    ) -> (bool, bool) {
        let key = (file, own.to_string());
        if let Some(&known) = memo.get(&key) {
            return known;
        }
        let Some(facts) = self.method_steps.get(&key) else { return (false, false) };
        memo.insert(key.clone(), (false, false));
        let mut takes = (facts.backward, facts.step);
        // (At most a few dozen of its calls are followed, a few calls deep.)
        for callee in facts.self_calls.iter().take(if depth < 8 { 64 } else { 0 }) {
            if takes.0 && takes.1 {
                break;
            }
            let name = format!("{class}.{callee}");
            for (file, own) in self.method_candidates(&name).unwrap_or_default() {
                let (backward, step) = self.method_takes(class, file, own, memo, depth + 1);
                takes = (takes.0 || backward, takes.1 || step);
            }
        }
        memo.insert(key, takes);
        takes
    }

    /// The file that defines the top-level function `name` names, for a name of the file at
    /// `caller` ([`Project::nearest_file`]).
    pub(crate) fn function_file_from<'s>(
        &'s self,
        name: &'s str,
        caller: &Path,
    ) -> Option<(&'s Path, &'s str)> {
        self.nearest_file(self.function_candidates(name)?, name, caller)
    }

    /// The file that defines the method `name` names, for a name of the file at `caller`
    /// ([`Project::nearest_file`]).
    pub(crate) fn method_file_from<'s>(
        &'s self,
        name: &'s str,
        caller: &Path,
    ) -> Option<(&'s Path, &'s str)> {
        self.nearest_file(self.method_candidates(name)?, name, caller)
    }

    /// The one file among `candidates` that defines `name` for the file at `caller`. Where several
    /// files define it (two sub-projects that each have a `utils/masking.py`), the one Python
    /// imports when the caller's own tree is on its path: the file under the nearest folder above
    /// the caller that holds the name's module (`FEDformer/layers/attn.py` imports
    /// `FEDformer/utils/masking.py`, `layers/attn.py` the top-level `utils/masking.py`).
    fn nearest_file<'s>(
        &'s self,
        candidates: Vec<(usize, &'s str)>,
        name: &str,
        caller: &Path,
    ) -> Option<(&'s Path, &'s str)> {
        if let Some(one) = self.one_file(candidates.iter().copied()) {
            return Some(one);
        }
        let caller = std::path::absolute(caller).ok()?;
        let parts: Vec<&str> = name.split('.').collect();
        // Per candidate: the folder its module hangs from, when the file's path ends with the
        // module parts the name starts with (`…/utils/masking.py` for `utils.masking.X`).
        let mut best: Option<(usize, (usize, &str))> = None;
        let mut tied = false;
        for (file, own) in candidates {
            let Some((path, module, is_package)) = self.roots.get(file) else { continue };
            let Some(k) = (1..=module.len().min(parts.len())).rev().find(|&k| {
                module[module.len() - k..].iter().map(String::as_str).eq(parts[..k].iter().copied())
            }) else {
                continue;
            };
            // (A package's `__init__.py` is one folder deeper than its module's name.)
            let Some(root) = path.ancestors().nth(k + usize::from(*is_package)) else { continue };
            if !caller.starts_with(root) {
                continue;
            }
            let depth = root.components().count();
            match best {
                Some((d, found)) if d == depth => tied |= found != (file, own),
                Some((d, _)) if d > depth => {}
                _ => {
                    best = Some((depth, (file, own)));
                    tied = false;
                }
            }
        }
        match best {
            Some((_, (file, own))) if !tied => Some((self.paths[file].as_path(), own)),
            _ => None,
        }
    }

    /// The file the candidates (file, own name) agree on; `None` when there is none, or they
    /// name different files or definitions.
    fn one_file<'s>(
        &'s self,
        candidates: impl Iterator<Item = (usize, &'s str)>,
    ) -> Option<(&'s Path, &'s str)> {
        let mut found: Option<(usize, &str)> = None;
        for (file, own) in candidates {
            match found {
                Some((f, n)) if f == file && n == own => {}
                Some(_) => return None,
                None => found = Some((file, own)),
            }
        }
        found.map(|(file, own)| (self.paths[file].as_path(), own))
    }

    /// Records, per file, the functions other files call at every step: each file's [`HotCall`]s
    /// (with the file as diagnostics show it) resolved to the one file that defines the callee.
    /// Returns the files whose set changed.
    pub(crate) fn set_called_from(&mut self, calls: &[(String, Vec<HotCall>)]) -> Vec<PathBuf> {
        // Each call as the callee's file will know it, before the calls are resolved: calls of
        // one method left to subclasses from one file are merged first, as they all run the same
        // overrides (a loop may call it in many places, and it may have many overrides).
        let mut direct: Vec<(&HotCall, CalledFrom)> = Vec::new();
        let mut dispatched: Vec<(&str, &str, CalledFrom)> = Vec::new();
        let mut dispatched_at: FxHashMap<(&str, &str, String), usize> = FxHashMap::default();
        for (caller, hot) in calls {
            for call in hot {
                // Where the call is, as diagnostics show a place (`nb.ipynb:cell 3` in a notebook).
                let shown = match call.cell {
                    Some(cell) => format!("{caller}:cell {cell}"),
                    None => caller.clone(),
                };
                let known = CalledFrom {
                    function: String::new(),
                    caller: shown,
                    line: call.line,
                    args: call.args.clone(),
                    keywords: call.keywords.clone(),
                    spread: call.spread,
                    result_needed: call.result_needed,
                    how: call.how,
                };
                if !call.dispatched {
                    direct.push((call, known));
                    continue;
                }
                let key = (call.callee.as_str(), caller.as_str(), known.caller.clone());
                match dispatched_at.get(&key) {
                    Some(&i) => dispatched[i].2.absorb(&known),
                    None => {
                        dispatched_at.insert(key, dispatched.len());
                        dispatched.push((call.callee.as_str(), caller.as_str(), known));
                    }
                }
            }
        }
        let mut next: FxHashMap<PathBuf, Vec<CalledFrom>> = FxHashMap::default();
        let mut at: FxHashMap<(PathBuf, String), usize> = FxHashMap::default();
        let mut add = |file: PathBuf, function: String, known: &CalledFrom| {
            let entry = next.entry(file.clone()).or_default();
            match at.get(&(file.clone(), function.clone())) {
                Some(&i) => entry[i].absorb(known),
                None => {
                    at.insert((file, function.clone()), entry.len());
                    entry.push(CalledFrom { function, ..known.clone() });
                }
            }
        };
        for (call, known) in &direct {
            let caller = Path::new(&known.caller);
            if let Some((file, function)) = self
                .function_file_from(&call.callee, caller)
                .or_else(|| self.method_file_from(&call.callee, caller))
            {
                add(file.to_path_buf(), function.to_string(), known);
            }
        }
        for (callee, caller, known) in &dispatched {
            let Some((class, method)) = callee.rsplit_once('.') else { continue };
            for (file, function) in self.overrides_elsewhere(class, method, Path::new(caller)) {
                add(self.paths[file].clone(), function, known);
            }
        }
        let mut changed: Vec<PathBuf> = next
            .iter()
            .filter(|(path, called)| self.called_from.get(*path) != Some(called))
            .map(|(path, _)| path.clone())
            .chain(self.called_from.keys().filter(|p| !next.contains_key(*p)).cloned())
            .collect();
        changed.sort();
        self.called_from = next;
        changed
    }

    /// Does the project declare command-line options ([`super::options`])?
    pub(crate) fn has_options(&self) -> bool {
        !self.options.is_empty()
    }

    /// Judges, besides the definitions of files other files import from by name, those of an
    /// application's files that nothing imports from, that sit beside a module other files do
    /// import from, and that cannot run by themselves: no `__main__` block, no command line, not
    /// named for what they run, not a package's `__init__.py`, not star-imported, and under no
    /// folder with a `setup.py`, `setup.cfg` or `pyproject.toml` (`libraries`: a library's modules
    /// are its users' to import). A model zoo vendored into an application (BLIP's pretraining
    /// models beside the captioner it uses) is code no run reaches unless something names it
    /// ([`super::references`]); a folder of which nothing is imported may be another
    /// application's, or examples, and is left alone.
    pub(crate) fn judge_unimported(&mut self, libraries: &FxHashSet<&Path>) {
        let mut entries: FxHashSet<&str> = FxHashSet::default();
        // The folders of modules other files import from by name: a file beside them that
        // nothing imports is one the application left out.
        let used: FxHashSet<&Path> = self.imported.iter().filter_map(|p| p.parent()).collect();
        for (path, names, star_imported, runs_itself) in &self.unimported {
            let package = path.file_name().is_some_and(|n| n == "__init__.py");
            let library = path.ancestors().skip(1).any(|a| libraries.contains(a));
            let beside_used = path.parent().is_some_and(|p| used.contains(p));
            if *star_imported || *runs_itself || package || library || !beside_used {
                entries.extend(names.iter().map(String::as_str));
            } else {
                self.judged_unimported.insert(path.clone());
            }
        }
        // A name defined again in a file that stays an entry stays unjudged.
        self.judged = self.defined.iter().filter(|n| !entries.contains(n.as_str())).cloned().collect();
    }

    /// Finds the top-level functions and classes nothing names in the project's texts (its Python
    /// files, run scripts, configuration files and documents: [`super::references`]). A project
    /// of one Python file has none: nothing else could name its code.
    pub(crate) fn find_unreferenced(&mut self, code: &[super::references::Code<'_>], others: &[&str]) {
        if self.paths.len() < 2 {
            return;
        }
        let judged: FxHashSet<&str> = self.judged.iter().map(String::as_str).collect();
        self.unreferenced =
            super::references::unreferenced(&judged, code, others).into_iter().map(String::from).collect();
    }

    /// The names of the project's top-level functions that appear in Python files whose calls are
    /// not seen (not linted, or importing no torch).
    pub(crate) fn set_unseen(&mut self, texts: &[&str]) {
        if !self.has_options() {
            return;
        }
        for text in texts {
            for word in super::references::identifiers(text) {
                // Only the names of top-level functions matter (no string is made for the rest).
                if self.defined.contains(word) && !self.unseen.contains(word) {
                    self.unseen.insert(word.to_string());
                }
            }
        }
    }

    /// What the project's code does to its options besides reading them
    /// ([`super::options::Options::unsettle`]).
    pub(crate) fn unsettle_options(&mut self, texts: &[&str]) {
        self.options.unsettle(texts);
    }

    /// What the project's run scripts pass ([`super::options::passed`]).
    pub(crate) fn pass_options(&mut self, passed: impl Iterator<Item = (String, String)>) {
        for (name, value) in passed {
            self.options.pass(name, value);
        }
    }

    /// Records, per file, the functions other files call and whether every such call is
    /// opt-in ([`ProjectCall`]). Returns the files whose lint that changes: those with a function
    /// that now has only opt-in callers elsewhere, or no longer has, and those with a function
    /// their lint judged unreached (`own`, by file: [`Calls::latent`]) that another file now calls
    /// otherwise, or no longer does.
    pub(crate) fn set_opt_in_callers(
        &mut self,
        calls: &[&[ProjectCall]],
        own: &FxHashMap<&Path, &[String]>,
    ) -> Vec<PathBuf> {
        let mut next: FxHashMap<PathBuf, Vec<(String, bool)>> = FxHashMap::default();
        for call in calls.iter().flat_map(|c| c.iter()) {
            let Some((file, function)) =
                self.function_file(&call.callee).or_else(|| self.method_file(&call.callee))
            else {
                continue;
            };
            // A top-level function named where no call is seen (a file not analysed) may be
            // called there on a default path. (Methods' names, `update`, `step`, are too common
            // to tell anything.)
            let opt_in = call.opt_in && (function.contains('.') || !self.unseen.contains(function));
            let entry = next.entry(file.to_path_buf()).or_default();
            match entry.iter_mut().find(|(f, _)| f == function) {
                Some((_, every)) => *every &= opt_in,
                None => entry.push((function.to_string(), opt_in)),
            }
        }
        for called in next.values_mut() {
            called.sort();
        }
        // What of a file's callers its lint looks at.
        let relevant = |map: &FxHashMap<PathBuf, Vec<(String, bool)>>, path: &Path| -> Vec<(String, bool)> {
            let judged = own.get(path).copied().unwrap_or(&[]);
            map.get(path)
                .into_iter()
                .flatten()
                .filter(|(f, every)| *every || judged.contains(f))
                .cloned()
                .collect()
        };
        let mut changed: Vec<PathBuf> = next
            .keys()
            .chain(self.opt_in_callers.keys())
            .filter(|path| relevant(&next, path) != relevant(&self.opt_in_callers, path))
            .cloned()
            .collect();
        changed.sort();
        changed.dedup();
        self.opt_in_callers = next;
        changed
    }

    /// The functions of the file at `path` (as indexed) that other files call, each with
    /// whether every such call is opt-in.
    pub(crate) fn opt_in_callers(&self, path: &Path) -> &[(String, bool)] {
        self.opt_in_callers.get(path).map_or(&[], Vec::as_slice)
    }

    /// Does some file of the project choose the CPU, or let its user choose the device?
    pub(crate) fn has_cpu_path(&self) -> bool {
        self.cpu_path
    }

    /// Does some file of the project name an accelerator?
    pub(crate) fn uses_accelerator(&self) -> bool {
        self.accelerator
    }

    /// Does some file of the project turn off the argument checks of `torch.distributions`?
    pub(crate) fn validation_off(&self) -> bool {
        self.validation_off
    }

    /// Declares where the code runs (`target` in the configuration).
    pub(crate) fn set_target(&mut self, target: Option<crate::config::Target>) {
        self.cuda_only = target == Some(crate::config::Target::Cuda);
        self.gpu_optional = target == Some(crate::config::Target::Any);
    }

    /// Does the configuration say the code must also run on machines without a GPU?
    pub(crate) fn gpu_optional(&self) -> bool {
        self.gpu_optional
    }

    /// Does the function an absolute dotted name names run a loop of steps itself?
    pub(crate) fn runs_loop(&self, name: &str) -> bool {
        self.names_reached(name).into_iter().any(|n| self.loop_runners.contains(n))
    }

    /// Is every result of the function an absolute dotted name names on the host?
    pub(crate) fn returns_host(&self, name: &str) -> bool {
        let reached = self.names_reached(name);
        !reached.is_empty() && reached.into_iter().all(|n| self.host_returners.contains(n))
    }

    /// Does the function an absolute dotted name names make every result on the host
    /// ([`returns_host_made`]), and unless which parameter is given?
    pub(crate) fn host_maker(&self, name: &str) -> Option<&Unless> {
        match &self.names_reached(name)[..] {
            [one] => self.host_makers.get(*one),
            _ => None,
        }
    }

    /// Is every result of the function an absolute dotted name names moved to the device
    /// ([`returns_device`])?
    pub(crate) fn returns_device(&self, name: &str) -> bool {
        let reached = self.names_reached(name);
        !reached.is_empty() && reached.into_iter().all(|n| self.device_returners.contains(n))
    }

    /// The class whose instances the function an absolute dotted name names makes (a factory
    /// of the project), when every definition it may name agrees.
    pub(crate) fn factory_class(&self, name: &str) -> Option<&str> {
        let mut classes = self
            .names_reached(name)
            .into_iter()
            .filter(|n| self.functions.contains_key(*n))
            .map(|n| self.factories.get(n));
        let first = classes.next()??;
        // A class of the project (not `torch.zeros`, which a helper may return as well).
        (classes.all(|c| c == Some(first)) && self.classes.contains_key(indexed_key(first)))
            .then_some(first.as_str())
    }

    /// Does the file at `path` (as indexed) import none of torch's libraries itself but take
    /// its classes or functions from the repository's modules that do (a trainer subclassing
    /// the repository's `Engine`, whose losses are tensors)? It is analysed as if it imported
    /// torch.
    pub(crate) fn uses_torch_code(&self, path: &Path) -> bool {
        self.torch_users.contains(path)
    }

    /// The functions of the file at `path` (as indexed) that other files call at every step.
    pub(crate) fn called_from(&self, path: &Path) -> &[CalledFrom] {
        self.called_from.get(path).map_or(&[], Vec::as_slice)
    }

    /// The classes `name` names (through re-exports), combined: yes or no when they all agree.
    fn lookup(&self, name: &str, answer: &dyn Fn(usize) -> Truth) -> Truth {
        self.lookup_ids(name)
            .into_iter()
            .fold(None, |acc, id| Some(agree(acc, answer(id))))
            .unwrap_or(Truth::Unknown)
    }

    /// The training framework a class of the project derives from, through the project's classes
    /// (`SFTTrainer(_BaseTrainer)`, `_BaseTrainer(transformers.Trainer)` in another file).
    fn class_framework(
        &self,
        id: usize,
        bases: &[Vec<Base>],
        memo: &mut [Option<Option<api::Framework>>],
        depth: usize,
    ) -> Option<api::Framework> {
        if let Some(f) = memo[id] {
            return f;
        }
        if depth > MAX_CHAIN {
            return None;
        }
        // A cycle of bases derives from nothing.
        memo[id] = Some(None);
        let found = bases[id].iter().find_map(|base| match base {
            Base::Named(q) => api::training_framework(q).or_else(|| {
                self.lookup_ids(q).into_iter().find_map(|i| self.class_framework(i, bases, memo, depth + 1))
            }),
            _ => None,
        });
        memo[id] = Some(found);
        found
    }

    /// The training framework the class an absolute dotted name names derives from, if it is a
    /// class of the project.
    pub(crate) fn framework(&self, name: &str) -> Option<api::Framework> {
        self.lookup_ids(name).into_iter().find_map(|id| self.framework.get(id).copied().flatten())
    }

    fn class_truth(&self, id: usize, bases: &[Vec<Base>], memo: &mut [Option<Truth>], depth: usize) -> Truth {
        if let Some(t) = memo[id] {
            return t;
        }
        if depth > MAX_CHAIN {
            return Truth::Unknown;
        }
        memo[id] = Some(Truth::Unknown);
        let mut unknown = false;
        let mut yes = false;
        for base in &bases[id] {
            match base {
                Base::Neutral => {}
                Base::Unknown => unknown = true,
                Base::Named(q) if api::is_module_class(q) => yes = true,
                Base::Named(q) if api::is_plain_base(q) => {}
                Base::Named(q) => {
                    let t = self
                        .lookup_ids(q)
                        .into_iter()
                        .fold(None, |acc, i| Some(agree(acc, self.class_truth(i, bases, memo, depth + 1))));
                    match t {
                        Some(Truth::Yes) => yes = true,
                        Some(Truth::No) => {}
                        _ => unknown = true,
                    }
                }
            }
            if yes {
                break;
            }
        }
        let t = if yes {
            Truth::Yes
        } else if unknown {
            Truth::Unknown
        } else {
            Truth::No
        };
        memo[id] = Some(t);
        t
    }

    /// The methods named `method` of the classes that derive from `base` (an absolute dotted
    /// name) in other files than `except`: each one's file and its name as `Class.method`.
    fn overrides_elsewhere(&self, base: &str, method: &str, except: &Path) -> Vec<(usize, String)> {
        let targets = self.lookup_ids(base);
        if targets.is_empty() {
            return Vec::new();
        }
        // Per class: does it derive from one of the targets? Worked out from the targets down,
        // each class once.
        let mut derives: Vec<Option<bool>> = vec![None; self.class_bases.len()];
        for &t in &targets {
            derives[t] = Some(false);
        }
        let mut out = Vec::new();
        for id in 0..self.class_bases.len() {
            if !self.derives_from(id, &targets, &mut derives, 0) {
                continue;
            }
            let Some((name, file)) = self.class_names.get(id) else { continue };
            if self.paths.get(*file).is_none_or(|p| p == except) {
                continue;
            }
            let own = name.rsplit('.').next().unwrap_or(name);
            let key = format!("{name}.{method}");
            if self.methods.get(indexed_key(&key)).is_some_and(|files| files.contains(file)) {
                out.push((*file, format!("{own}.{method}")));
            }
        }
        out
    }

    /// Does class `id` derive (through at most [`MAX_CHAIN`] bases) from one of `targets`?
    fn derives_from(&self, id: usize, targets: &[usize], memo: &mut [Option<bool>], depth: usize) -> bool {
        if let Some(known) = memo.get(id).copied().flatten() {
            return known;
        }
        if depth > MAX_CHAIN {
            return false;
        }
        // A cycle of bases meets its own class again: no.
        memo[id] = Some(false);
        let mut yes = false;
        for base in self.class_bases.get(id).into_iter().flatten() {
            let Base::Named(q) = base else { continue };
            if api::is_plain_base(q) || api::is_module_class(q) {
                continue;
            }
            for b in self.lookup_ids(q) {
                if targets.contains(&b) || self.derives_from(b, targets, memo, depth + 1) {
                    yes = true;
                    break;
                }
            }
            if yes {
                break;
            }
        }
        memo[id] = Some(yes);
        yes
    }

    /// The ids of the classes `name` names, directly or through re-exports.
    fn lookup_ids(&self, name: &str) -> Vec<usize> {
        let mut ids: Vec<usize> = self
            .names_reached(name)
            .into_iter()
            .flat_map(|n| self.classes.get(n).into_iter().flatten().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// `name` and every name it stands for through re-exports (`pkg.Model` → `pkg.net.Net`).
    fn names_reached<'s>(&'s self, name: &'s str) -> Vec<&'s str> {
        let mut seen: FxHashSet<&str> = FxHashSet::default();
        let mut out = Vec::new();
        let mut todo: Vec<(&str, usize)> = vec![(indexed_key(name), 0)];
        while let Some((name, depth)) = todo.pop() {
            if depth > MAX_CHAIN || !seen.insert(name) {
                continue;
            }
            out.push(name);
            for target in self.aliases.get(name).into_iter().flatten() {
                todo.push((indexed_key(target), depth + 1));
            }
        }
        out
    }
}

/// The longest suffix of a dotted name that is indexed ([`MAX_SUFFIX`] module parts and the name):
/// a name built from a deep path (`/home/u/src/org/repo/pkg/models/net.py`) is looked up by it.
fn indexed_key(name: &str) -> &str {
    match name.rmatch_indices('.').nth(MAX_SUFFIX) {
        Some((at, _)) => &name[at + 1..],
        None => name,
    }
}

/// Two answers about what may be the same class: known only when they agree.
fn agree(acc: Option<Truth>, t: Truth) -> Truth {
    match acc {
        None => t,
        Some(a) if a == t => t,
        Some(_) => Truth::Unknown,
    }
}

/// `from .logger import *` (in a package's `__init__.py`, say) binds the names `logger.py`
/// exports: those its `__all__` lists, or else its public top-level names (classes, functions,
/// imports, and what its own star imports bind). They become the importing file's aliases, as
/// `from .logger import MetricLogger` would make them; a later star or import of the same name
/// wins over an earlier one, and the file's own definitions over both. Each module's exports are
/// worked out once (a cycle of star imports stops where it closes).
fn star_exports(files: &mut [FileEntry]) {
    if files.iter().all(|f| f.stars.is_empty()) {
        return;
    }
    // Modules by their dotted name and by its last parts (`pkg.logger` from `from pkg.logger
    // import *`, whose file's module is longer); a suffix several files share names none.
    let mut by_name: FxHashMap<String, Option<usize>> = FxHashMap::default();
    for (i, f) in files.iter().enumerate() {
        let n = f.module.len();
        for k in 1..=n.min(MAX_SUFFIX) {
            let key = f.module[n - k..].join(".");
            by_name.entry(key).and_modify(|e| *e = None).or_insert(Some(i));
        }
        by_name.insert(f.module.join("."), Some(i));
    }
    let sources: Vec<Vec<(usize, usize)>> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            f.stars
                .iter()
                .filter_map(|(at, m)| Some((*at, by_name.get(m).copied().flatten().filter(|&j| j != i)?)))
                .collect()
        })
        .collect();
    let mut memo: Vec<Option<Vec<String>>> = vec![None; files.len()];
    let mut on_stack = vec![false; files.len()];
    for i in 0..files.len() {
        exports(files, &sources, i, &mut memo, &mut on_stack, 0);
    }
    for (i, stars) in sources.iter().enumerate() {
        if stars.is_empty() {
            continue;
        }
        // Each name a star binds, with the star's place among the file's imports; a later star
        // replaces an earlier one.
        let mut bound: FxHashMap<String, (usize, String)> = FxHashMap::default();
        for &(at, j) in stars {
            let module = files[j].module.join(".");
            // A bound on what one file's stars bind keeps a ring of modules that star-import
            // each other (every one then binds every name) linear in the repository.
            for name in memo[j].as_deref().unwrap_or(&[]).iter().take(MAX_STAR_NAMES) {
                bound.insert(name.clone(), (at, format!("{module}.{name}")));
            }
        }
        let entry = &mut files[i];
        let own: FxHashSet<&str> = entry
            .classes
            .iter()
            .map(|(n, _)| n.as_str())
            .chain(entry.functions.iter().map(|(n, _)| n.as_str()))
            .collect();
        let mut last_import: FxHashMap<&str, usize> = FxHashMap::default();
        for (k, (name, _)) in entry.aliases.iter().enumerate() {
            last_import.insert(name.as_str(), k);
        }
        let mut replaced: FxHashSet<String> = FxHashSet::default();
        let mut added = Vec::new();
        for (name, (at, target)) in bound {
            if own.contains(name.as_str()) || last_import.get(name.as_str()).is_some_and(|&k| k >= at) {
                continue;
            }
            if last_import.contains_key(name.as_str()) {
                replaced.insert(name.clone());
            }
            added.push((name, target));
        }
        entry.aliases.retain(|(n, _)| !replaced.contains(n));
        added.sort();
        entry.aliases.extend(added);
    }
}

/// The names module `i` exports to a star import ([`star_exports`]), into `memo`.
fn exports(
    files: &[FileEntry],
    sources: &[Vec<(usize, usize)>],
    i: usize,
    memo: &mut Vec<Option<Vec<String>>>,
    on_stack: &mut Vec<bool>,
    depth: usize,
) -> Vec<String> {
    if let Some(done) = &memo[i] {
        return done.clone();
    }
    let f = &files[i];
    if let Some(all) = &f.all {
        memo[i] = Some(all.clone());
        return all.clone();
    }
    let mut names: FxHashSet<String> = f
        .classes
        .iter()
        .map(|(n, _)| n)
        .chain(f.functions.iter().map(|(n, _)| n))
        .chain(f.aliases.iter().map(|(n, _)| n))
        .filter(|n| !n.starts_with('_'))
        .cloned()
        .collect();
    // A module met again while its own exports are being worked out (a cycle of stars), or
    // one too deep, gives its own names only.
    if !on_stack[i] && depth < MAX_CHAIN {
        on_stack[i] = true;
        for &(_, j) in &sources[i] {
            names.extend(exports(files, sources, j, memo, on_stack, depth + 1));
        }
        on_stack[i] = false;
    } else {
        return names.into_iter().collect();
    }
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    memo[i] = Some(names.clone());
    names
}

/// `["Net", "Block"]` (or a tuple): the names a literal `__all__` lists.
fn literal_names(e: &Expr) -> Option<Vec<String>> {
    let (Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. })) = e else {
        return None;
    };
    elts.iter()
        .map(|e| match e {
            Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
            _ => None,
        })
        .collect()
}

/// The dotted names a top-level `name` of a file can be imported by: `pkg.models.Net`,
/// `models.Net` (at least the module's last part and the name).
fn suffixes(module: &[String], name: &str) -> Vec<String> {
    let take = module.len().min(MAX_SUFFIX);
    (1..=take)
        .map(|n| {
            let mut key = module[module.len() - n..].join(".");
            key.push('.');
            key.push_str(name);
            key
        })
        .collect()
}

/// A Python file's module path, from its absolute path: `…/pkg/models/net.py` → `….pkg.models.net`,
/// `…/pkg/__init__.py` → `….pkg`. Parts that cannot be Python names (`..`, a root, `my-repo`) end
/// the path: what is above them is not a package. (Names are matched by their last parts, so what
/// is above the import root does no harm.)
pub(crate) fn module_path(path: &Path) -> (Vec<String>, bool) {
    // From the absolute path, so a relative import resolves the same from any working directory.
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => match part.to_str() {
                Some(p) => parts.push(p.to_string()),
                None => parts.clear(),
            },
            _ => parts.clear(),
        }
    }
    let Some(last) = parts.pop() else { return (Vec::new(), false) };
    let stem = last.strip_suffix(".py").or_else(|| last.strip_suffix(".ipynb")).unwrap_or(&last);
    let is_package = stem == "__init__";
    if !is_package {
        parts.push(stem.to_string());
    }
    // Only the trailing run of parts that are identifiers can be a dotted module name.
    let keep = parts.iter().rev().take_while(|p| is_identifier(p)).count();
    let parts = parts.split_off(parts.len() - keep);
    (parts, is_package)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// `.layers.Block` imported in `pkg/models/net.py` is `pkg.models.layers.Block`; an absolute
/// name is itself. `None` when the dots climb above what is known of the path.
pub(crate) fn absolute(name: &str, module: &[String], is_package: bool) -> Option<String> {
    let rest = name.trim_start_matches('.');
    let level = name.len() - rest.len();
    if level == 0 {
        return Some(name.to_string());
    }
    // The package the file is in: itself for an `__init__.py`, else its parent.
    let package_len = if is_package { module.len() } else { module.len().checked_sub(1)? };
    let keep = package_len.checked_sub(level - 1)?;
    let mut parts: Vec<&str> = module[..keep].iter().map(String::as_str).collect();
    if !rest.is_empty() {
        parts.push(rest);
    }
    if parts.is_empty() { None } else { Some(parts.join(".")) }
}

impl FileEntry {
    /// The top-level classes and re-exports of one parsed file; `path` is relative to the folder
    /// the run walked (or as given).
    pub(crate) fn of(path: &Path, body: &[Stmt]) -> FileEntry {
        let (module, is_package) = module_path(path);
        let mut names = Names { module: &module, is_package, bound: FxHashMap::default(), starred: false };
        let mut entry = FileEntry::default();
        names.statements(body, &mut entry, 0);
        entry.applied = applied_in(body);
        let host = host_functions(body);
        for (name, facts) in &mut entry.functions {
            facts.returns_host = host.contains(name.as_str());
        }
        // Factories, once every top-level name of the file is bound (a class may come after).
        for stmt in body {
            if let Stmt::FunctionDef(f) = stmt
                && let Some(class) = names.made_class(f)
                && let Some((_, facts)) = entry.functions.iter_mut().find(|(n, _)| n == f.name.as_str())
            {
                facts.makes = Some(class);
            }
        }
        entry.module = module.clone();
        entry.path = path.to_path_buf();
        entry
    }
}

/// Each module of the project by every trailing run of its parts (a module's path starts at the
/// file system's root; an import names it from its package: `pkg.base` of `/src/repo/pkg/base.py`).
fn module_names(f: &FileEntry) -> impl Iterator<Item = String> + '_ {
    (0..f.module.len()).map(move |i| f.module[i..].join("."))
}

/// `a.b.c` (imported by name) names the module `a.b.c`, or `c` of the module `a.b`.
fn names_one_of(modules: &FxHashSet<String>, name: &str) -> bool {
    modules.contains(name) || name.rsplit_once('.').is_some_and(|(m, _)| modules.contains(m))
}

/// The files that import a module of the project, or a name from one (`from utils.masking import
/// Mask`, `import models`).
fn importers(files: &[FileEntry]) -> FxHashSet<PathBuf> {
    let modules: FxHashSet<String> = files.iter().flat_map(module_names).collect();
    files
        .iter()
        .filter(|f| {
            f.imports.iter().any(|i| names_one_of(&modules, i))
                || f.modules_imported.iter().any(|m| modules.contains(m))
        })
        .map(|f| f.path.clone())
        .collect()
}

/// The files that import nothing of torch's at their top level but import, from the
/// repository, a module (or a name of one) whose file does, or whose file is such a file itself
/// (a trainer subclassing one that subclasses the repository's torch-using engine), a few links
/// deep.
fn torch_users(files: &[FileEntry]) -> FxHashSet<PathBuf> {
    let mut torch_modules: FxHashSet<String> =
        files.iter().filter(|f| f.imports_torch).flat_map(module_names).collect();
    let mut users = FxHashSet::default();
    let mut user = vec![false; files.len()];
    for _ in 0..MAX_CHAIN {
        if torch_modules.is_empty() {
            break;
        }
        let found: Vec<usize> = files
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                !f.imports_torch && !user[*i] && f.imports.iter().any(|i| names_one_of(&torch_modules, i))
            })
            .map(|(i, _)| i)
            .collect();
        if found.is_empty() {
            break;
        }
        for i in found {
            user[i] = true;
            users.insert(files[i].path.clone());
            torch_modules.extend(module_names(&files[i]));
        }
    }
    users
}

/// An attribute an `_apply` override moves, and the class of the object that holds it where the
/// override's class makes that object itself (`self.detect = Detect(..)`: `Some("Detect")`;
/// `None` when it is not known, as for `m = self.model[-1]`).
pub(crate) type Applied = (String, Option<String>);

/// The attributes an `_apply` override of `class` moves with the function it is given:
/// `self.detect.stride = fn(self.detect.stride)`, `m.grid = list(map(fn, m.grid))` (YOLO's
/// detection heads keep their strides and grids as plain tensors, which the model's `_apply`
/// moves). Another object's attributes only: the class's own (`self.stride`) are its business.
fn applied_attributes(class: &ast::StmtClassDef, f: &ast::StmtFunctionDef, out: &mut Vec<Applied>) {
    let mut params = f.parameters.posonlyargs.iter().chain(&f.parameters.args);
    let (Some(own), Some(func)) = (params.next(), params.next()) else { return };
    let (own, func) = (own.parameter.name.as_str(), func.parameter.name.as_str());
    // The class the override's class makes for `self.<field>`, when its methods agree on one.
    let made_for = |field: &str| -> Option<String> {
        let mut made: Option<String> = None;
        let mut agree = true;
        let methods = class.body.iter().filter_map(|s| match s {
            Stmt::FunctionDef(m) => Some(&m.body[..]),
            _ => None,
        });
        for method in methods {
            super::rules::helpers::each_stmt(method, &mut |s| {
                if let Stmt::Assign(a) = s
                && a.targets.iter().any(|t| {
                    matches!(t, Expr::Attribute(x) if x.attr.as_str() == field && matches!(&*x.value, Expr::Name(n) if n.id.as_str() == own))
                })
            {
                let callee = match &*a.value {
                    Expr::Call(c) => match &*c.func {
                        Expr::Name(n) => Some(n.id.to_string()),
                        Expr::Attribute(x) => Some(x.attr.to_string()),
                        _ => None,
                    },
                    _ => None,
                };
                match (&made, callee) {
                    (_, None) => agree = false,
                    (None, Some(c)) => made = Some(c),
                    (Some(m), Some(c)) if *m != c => agree = false,
                    _ => {}
                }
            }
            });
        }
        made.filter(|_| agree)
    };
    let mut body: Vec<&Stmt> = f.body.iter().collect();
    while let Some(stmt) = body.pop() {
        match stmt {
            Stmt::Assign(a) => {
                let mut uses = false;
                super::rules::helpers::any_subexpr(&a.value, &mut |e| {
                    uses |= matches!(e, Expr::Name(n) if n.id.as_str() == func);
                    !uses
                });
                if !uses {
                    continue;
                }
                for t in &a.targets {
                    let Expr::Attribute(attr) = t else { continue };
                    let holder = match &*attr.value {
                        Expr::Name(n) if n.id.as_str() == own => continue,
                        // `self.detect.stride`.
                        Expr::Attribute(h) if matches!(&*h.value, Expr::Name(n) if n.id.as_str() == own) => {
                            made_for(h.attr.as_str())
                        }
                        _ => None,
                    };
                    let entry = (attr.attr.to_string(), holder);
                    if !out.contains(&entry) {
                        out.push(entry);
                    }
                }
            }
            Stmt::If(i) => {
                body.extend(&i.body);
                body.extend(i.elif_else_clauses.iter().flat_map(|c| &c.body));
            }
            Stmt::For(l) => body.extend(&l.body),
            Stmt::With(w) => body.extend(&w.body),
            _ => {}
        }
    }
}

/// The attributes the `_apply` overrides of a module's top-level classes move
/// ([`applied_attributes`]).
pub(crate) fn applied_in(body: &[Stmt]) -> Vec<Applied> {
    let mut out = Vec::new();
    for stmt in body {
        if let Stmt::ClassDef(c) = stmt {
            for s in &c.body {
                if let Stmt::FunctionDef(f) = s
                    && f.name.as_str() == "_apply"
                {
                    applied_attributes(c, f, &mut out);
                }
            }
        }
    }
    out
}

/// Is the attribute `attr` of an instance of the class named `class` moved by one of the
/// overrides `applied` lists: one that names that class as the holder's, or one whose holder's
/// class is not known?
pub(crate) fn moved_by(applied: &[Applied], attr: &str, class: &str) -> bool {
    applied.iter().any(|(a, holder)| a == attr && holder.as_deref().is_none_or(|h| h == class))
}

/// Python's own names a class may derive from or a file may call without importing them: a bare
/// name a file neither binds nor imports is one of these, not one its star imports bind.
fn is_builtin(name: &str) -> bool {
    const BUILTINS: &[&str] = &[
        "object",
        "type",
        "super",
        "property",
        "staticmethod",
        "classmethod",
        "dict",
        "list",
        "tuple",
        "set",
        "frozenset",
        "str",
        "bytes",
        "bytearray",
        "int",
        "float",
        "complex",
        "bool",
        "slice",
        "range",
        "enumerate",
        "zip",
        "map",
        "filter",
        "reversed",
        "sorted",
        "iter",
        "next",
        "len",
        "sum",
        "min",
        "max",
        "abs",
        "round",
        "any",
        "all",
        "print",
        "open",
        "isinstance",
        "issubclass",
        "getattr",
        "setattr",
        "hasattr",
        "delattr",
        "callable",
        "id",
        "hash",
        "repr",
        "format",
        "vars",
        "dir",
        "Exception",
        "BaseException",
        "ArithmeticError",
        "AssertionError",
        "AttributeError",
        "EOFError",
        "ImportError",
        "IndexError",
        "KeyError",
        "LookupError",
        "MemoryError",
        "NameError",
        "NotImplementedError",
        "OSError",
        "IOError",
        "OverflowError",
        "RecursionError",
        "RuntimeError",
        "StopIteration",
        "TypeError",
        "ValueError",
        "ZeroDivisionError",
        "FileNotFoundError",
        "PermissionError",
        "TimeoutError",
        "Warning",
        "UserWarning",
        "DeprecationWarning",
        "RuntimeWarning",
        "FutureWarning",
    ];
    BUILTINS.contains(&name)
}

/// The names a file's top level binds, as it goes: imports and its own classes.
struct Names<'m> {
    module: &'m [String],
    is_package: bool,
    /// Local name → absolute dotted name.
    bound: FxHashMap<String, String>,
    /// A star import seen so far: a name nothing else binds may be one it binds.
    starred: bool,
}

impl Names<'_> {
    fn statements(&mut self, body: &[Stmt], entry: &mut FileEntry, depth: usize) {
        // `if`/`try` blocks at the top level (optional imports) are read; nothing deeper.
        if depth > 4 {
            return;
        }
        for stmt in body {
            match stmt {
                Stmt::Import(i) => {
                    for alias in &i.names {
                        let full = alias.name.as_str();
                        entry.imports_torch |= super::model::is_torch_library(full);
                        entry.modules_imported.push(full.to_string());
                        match &alias.asname {
                            Some(as_name) => self.bind(as_name.as_str(), full.to_string(), entry),
                            None => {
                                let root = full.split('.').next().unwrap_or(full);
                                self.bound.insert(root.to_string(), root.to_string());
                            }
                        }
                    }
                }
                Stmt::ImportFrom(i) => {
                    let dots = ".".repeat(i.level as usize);
                    let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                    let base = format!("{dots}{module}");
                    entry.imports_torch |= i.level == 0 && super::model::is_torch_library(module);
                    for alias in &i.names {
                        if alias.name.as_str() == "*" {
                            if let Some(m) = absolute(&base, self.module, self.is_package) {
                                entry.stars.push((entry.aliases.len(), m));
                                self.starred = true;
                            }
                            continue;
                        }
                        let full = if base.is_empty() || base.ends_with('.') {
                            format!("{base}{}", alias.name.as_str())
                        } else {
                            format!("{base}.{}", alias.name.as_str())
                        };
                        let Some(full) = absolute(&full, self.module, self.is_package) else { continue };
                        entry.imports.push(full.clone());
                        let bound = alias.asname.as_ref().unwrap_or(&alias.name);
                        self.bind(bound.as_str(), full, entry);
                    }
                }
                Stmt::FunctionDef(f) => {
                    if !f.decorator_list.is_empty() {
                        entry.decorated.push(f.name.as_str().to_string());
                    }
                    entry.functions.push((
                        f.name.as_str().to_string(),
                        FunctionFacts {
                            runs_loop: runs_steps(f),
                            returns_host: false,
                            returns_device: returns_device(f),
                            host_made: returns_host_made(f),
                            makes: None,
                        },
                    ));
                }
                Stmt::ClassDef(c) => {
                    if !c.decorator_list.is_empty() {
                        entry.decorated.push(c.name.as_str().to_string());
                    }
                    let bases = c.bases().iter().map(|b| self.base(b)).collect();
                    let name = c.name.as_str().to_string();
                    let mut own = self.module.to_vec();
                    own.push(name.clone());
                    self.bound.insert(name.clone(), own.join("."));
                    for stmt in &c.body {
                        match stmt {
                            Stmt::FunctionDef(f) => {
                                entry.methods.push(format!("{name}.{}", f.name));
                                let facts = step_facts(f);
                                if facts.backward || facts.step || !facts.self_calls.is_empty() {
                                    entry.step_facts.push((format!("{name}.{}", f.name), facts));
                                }
                                let kept = kept_parameters(f);
                                if !kept.is_empty() {
                                    entry.kept.push((format!("{name}.{}", f.name), kept));
                                }
                            }
                            Stmt::Assign(a) => {
                                entry.class_values.extend(a.targets.iter().filter_map(|t| match t {
                                    Expr::Name(n) => Some(format!("{name}.{}", n.id)),
                                    _ => None,
                                }))
                            }
                            // `compute_all_losses: Callable = Base.other` (not a bare annotation).
                            Stmt::AnnAssign(ast::StmtAnnAssign { target, value: Some(_), .. }) => {
                                if let Expr::Name(n) = &**target {
                                    entry.class_values.push(format!("{name}.{}", n.id));
                                }
                            }
                            _ => {}
                        }
                    }
                    entry.classes.push((name, bases));
                }
                // `__all__ = ["Net", ..]`: what `from module import *` binds.
                Stmt::Assign(a) if matches!(a.targets.as_slice(), [Expr::Name(n)] if n.id.as_str() == "__all__") =>
                {
                    entry.all = literal_names(&a.value);
                }
                Stmt::AugAssign(a) if matches!(&*a.target, Expr::Name(n) if n.id.as_str() == "__all__") => {
                    if let (Some(all), Some(more)) = (entry.all.as_mut(), literal_names(&a.value)) {
                        all.extend(more);
                    }
                }
                // `Model = Net`: another name for a class.
                Stmt::Assign(a) if a.targets.len() == 1 => {
                    if let Expr::Name(target) = &a.targets[0]
                        && let Some(q) = self.dotted(&a.value)
                    {
                        self.bind(target.id.as_str(), q, entry);
                    }
                }
                Stmt::If(s) => {
                    self.statements(&s.body, entry, depth + 1);
                    for clause in &s.elif_else_clauses {
                        self.statements(&clause.body, entry, depth + 1);
                    }
                }
                Stmt::Try(t) => {
                    self.statements(&t.body, entry, depth + 1);
                    for handler in &t.handlers {
                        let ast::ExceptHandler::ExceptHandler(h) = handler;
                        self.statements(&h.body, entry, depth + 1);
                    }
                    self.statements(&t.orelse, entry, depth + 1);
                }
                _ => {}
            }
        }
    }

    fn bind(&mut self, name: &str, full: String, entry: &mut FileEntry) {
        let full = super::model::canonical(full.into()).into_owned();
        entry.aliases.push((name.to_string(), full.clone()));
        self.bound.insert(name.to_string(), full);
    }

    /// `nn.Module`, `layers.Block`, `Base`: the absolute dotted name an expression spells.
    fn dotted(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Name(n) => Some(match self.bound.get(n.id.as_str()) {
                Some(q) => q.clone(),
                // `class ContextCTRModel(CTRModel)` after `from models.BaseModel import *`: the
                // name the star binds in this module, which the index makes an alias of the
                // class it exports ([`star_exports`]).
                None if self.starred && !is_builtin(n.id.as_str()) && !self.module.is_empty() => {
                    format!("{}.{}", self.module.join("."), n.id)
                }
                None => format!("builtins.{}", n.id),
            }),
            Expr::Attribute(a) => {
                let mut attrs = vec![a.attr.as_str()];
                let mut at = &*a.value;
                while let Expr::Attribute(inner) = at {
                    attrs.push(inner.attr.as_str());
                    at = &inner.value;
                    if attrs.len() > MAX_CHAIN {
                        return None;
                    }
                }
                let Expr::Name(root) = at else { return None };
                let mut q = self.bound.get(root.id.as_str())?.clone();
                for attr in attrs.iter().rev() {
                    q.push('.');
                    q.push_str(attr);
                }
                Some(super::model::canonical(q.into()).into_owned())
            }
            _ => None,
        }
    }

    /// The class a factory makes: every `return` of `f` (at least one) returns `Class(..)`, or a
    /// name the function binds only to `Class(..)`, for one class that a top-level name of the
    /// file names (imported or defined; not a builtin). `None` otherwise.
    fn made_class(&self, f: &ast::StmtFunctionDef) -> Option<String> {
        use ruff_python_ast::visitor::{self, Visitor};
        #[derive(Default)]
        struct Walk<'f> {
            returns: Vec<Option<&'f Expr>>,
            assigned: Vec<(&'f str, &'f Expr)>,
            /// Names bound otherwise (loop targets, unpacking, augmented assignment).
            other: Vec<&'f str>,
            depth: usize,
            /// Some statement was too deep to look into: its `return`s are not known.
            too_deep: bool,
        }
        impl<'f> Visitor<'f> for Walk<'f> {
            fn visit_stmt(&mut self, s: &'f Stmt) {
                match s {
                    // Nested functions and classes return for themselves.
                    Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                    Stmt::Return(r) => self.returns.push(r.value.as_deref()),
                    Stmt::Assign(a) => match a.targets.as_slice() {
                        [Expr::Name(n)] => self.assigned.push((n.id.as_str(), &a.value)),
                        targets => targets
                            .iter()
                            .for_each(|t| super::rules::helpers::target_names(t, &mut self.other)),
                    },
                    Stmt::AnnAssign(a) => match (&*a.target, a.value.as_deref()) {
                        (Expr::Name(n), Some(v)) => self.assigned.push((n.id.as_str(), v)),
                        (t, _) => super::rules::helpers::target_names(t, &mut self.other),
                    },
                    Stmt::AugAssign(a) => super::rules::helpers::target_names(&a.target, &mut self.other),
                    Stmt::For(l) => super::rules::helpers::target_names(&l.target, &mut self.other),
                    Stmt::With(w) => w
                        .items
                        .iter()
                        .filter_map(|i| i.optional_vars.as_deref())
                        .for_each(|t| super::rules::helpers::target_names(t, &mut self.other)),
                    _ => {}
                }
                // A pathologically deep body says nothing (the depth estimate bounds real files).
                if self.depth < 64 {
                    self.depth += 1;
                    visitor::walk_stmt(self, s);
                    self.depth -= 1;
                } else {
                    self.too_deep = true;
                }
            }
            // Names bound inside expressions (`:=`, comprehensions) are not followed.
            fn visit_expr(&mut self, _: &'f Expr) {}
        }
        let mut walk = Walk::default();
        for s in &f.body {
            walk.visit_stmt(s);
        }
        if walk.too_deep {
            return None;
        }
        // A parameter may hold what the caller passed (`def make(loss=None): if loss is None:
        // loss = Loss(); return loss`).
        let params = &f.parameters;
        walk.other.extend(
            params
                .posonlyargs
                .iter()
                .chain(&params.args)
                .chain(&params.kwonlyargs)
                .map(|p| p.parameter.name.as_str())
                .chain(params.vararg.iter().chain(&params.kwarg).map(|p| p.name.as_str())),
        );
        let class_of = |e: &Expr| -> Option<String> {
            let Expr::Call(c) = e else { return None };
            let mut c: &ast::ExprCall = c;
            // Through the moves a model is made with (`LatentODE(..).to(device)`).
            for _ in 0..8 {
                match &*c.func {
                    Expr::Attribute(a)
                        if RETURNS_ITSELF.contains(&a.attr.as_str())
                            && let Expr::Call(inner) = &*a.value =>
                    {
                        c = inner;
                    }
                    _ => break,
                }
            }
            self.dotted(&c.func).filter(|q| !q.starts_with("builtins."))
        };
        let mut made: Option<String> = None;
        for r in &walk.returns {
            let value = (*r)?;
            let class = match value {
                Expr::Name(n) => {
                    let name = n.id.as_str();
                    if walk.other.contains(&name) {
                        return None;
                    }
                    // `model = model.to(device)`: the same instance, moved.
                    let moves_itself = |v: &Expr| {
                        let mut e = v;
                        for _ in 0..8 {
                            match e {
                                Expr::Call(c) => match &*c.func {
                                    Expr::Attribute(a) if RETURNS_ITSELF.contains(&a.attr.as_str()) => {
                                        e = &a.value
                                    }
                                    _ => return false,
                                },
                                Expr::Name(m) => return m.id.as_str() == name,
                                _ => return false,
                            }
                        }
                        false
                    };
                    let mut values = walk
                        .assigned
                        .iter()
                        .filter(|(t, v)| *t == name && !moves_itself(v))
                        .map(|(_, v)| class_of(v));
                    let first = values.next()??;
                    if !values.all(|v| v.as_deref() == Some(first.as_str())) {
                        return None;
                    }
                    first
                }
                e => class_of(e)?,
            };
            match &made {
                Some(m) if *m != class => return None,
                _ => made = Some(class),
            }
        }
        made
    }

    fn base(&self, e: &Expr) -> Base {
        if matches!(e, Expr::Subscript(_)) {
            return Base::Neutral;
        }
        match self.dotted(e) {
            Some(q) => Base::Named(q),
            None => Base::Unknown,
        }
    }
}

/// Does a file's text ask for an accelerator in code (not in a comment that mentions CUDA): a
/// `.cuda(` call, a `"cuda"`/`"mps"` device string, `torch.cuda.`, `torch_xla` or `xla_device`?
pub(crate) fn names_an_accelerator(text: &str) -> bool {
    [".cuda(", "\"cuda", "'cuda", "torch.cuda.", "\"mps\"", "'mps'", "torch_xla", "xla_device"]
        .iter()
        .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// For the project's sake (D010 in another file), a file that offers the CPU in so many words:
/// CUDA or MPS checked for, the `"cpu"` device, or a `--device`/`--cpu` option (not
/// `torch.distributed.is_available()`, which says nothing about devices).
pub(crate) fn chooses_the_cpu(text: &str) -> bool {
    [
        "cuda.is_available",
        "mps.is_available",
        "\"cpu\"",
        "'cpu'",
        "\"--device\"",
        "'--device'",
        "\"--cpu\"",
        "'--cpu'",
    ]
    .iter()
    .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// What the index knows of a top-level function.
#[derive(Debug, Clone, Default)]
struct FunctionFacts {
    /// It runs a loop of steps itself ([`runs_steps`]).
    runs_loop: bool,
    /// Every result it returns is on the host ([`returns_host`]).
    returns_host: bool,
    /// Every result it returns is moved to the device ([`returns_device`]).
    returns_device: bool,
    /// Every result it returns is made on the host at each call, unless a device parameter is
    /// given ([`returns_host_made`]).
    host_made: Option<Unless>,
    /// Every result it returns is an instance of one class, made in the function (a factory):
    /// the class's absolute name ([`Names::made_class`]).
    makes: Option<String>,
}

/// Is every value the function returns (or yields) evidently on the host: a read
/// (`.cpu()`, `.numpy()`, `.tolist()`, `.item()`, `.to("cpu")`, `float(..)`), a NumPy result, a
/// literal, nothing at all, or a name (or list filled with `append`) that the function only ever
/// binds to such values? A helper that moves its results to the host (`feats.append(f.cpu())`
/// then `return torch.cat(feats)`) hands its callers host tensors, whatever it was given.
pub(crate) fn returns_host(
    f: &ast::StmtFunctionDef,
    host_function: &dyn Fn(&str) -> bool,
    torch_names: &[String],
) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    #[derive(Default)]
    struct Values<'f> {
        returns: Vec<&'f Expr>,
        /// Each name the function binds (or appends to) → the values it gets (`None`: one not
        /// followed, a loop target or an unpacked value).
        bound: Bound<'f>,
        opaque: bool,
        /// A `with` block that may set the default device ([`Host::device_block`]).
        device_block: bool,
        /// Names the function itself gives torch (`import torch as T` in its body).
        torch_names: Vec<&'f str>,
    }
    impl<'f> Values<'f> {
        fn bind(&mut self, target: &'f Expr, value: Option<&'f Expr>) {
            match target {
                Expr::Name(n) => self.bound.entry(n.id.as_str()).or_default().push(value),
                Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                    elts.iter().for_each(|e| self.bind(e, None));
                }
                Expr::Starred(s) => self.bind(&s.value, None),
                // `out[i] = value`: the container holds the value.
                Expr::Subscript(s) => {
                    if let (Expr::Name(n), Some(v)) = (&*s.value, value) {
                        self.bound.entry(n.id.as_str()).or_default().push(Some(v));
                    }
                }
                _ => {}
            }
        }
    }
    impl<'f> Visitor<'f> for Values<'f> {
        fn visit_stmt(&mut self, stmt: &'f Stmt) {
            match stmt {
                // A nested function or class is its own.
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                Stmt::Return(r) => self.returns.extend(r.value.as_deref()),
                Stmt::Import(i) => self.torch_names.extend(
                    i.names
                        .iter()
                        .filter(|a| a.name.as_str() == "torch")
                        .filter_map(|a| a.asname.as_ref().map(|n| n.as_str())),
                ),
                Stmt::Assign(a) => {
                    for t in &a.targets {
                        match (t, &*a.value) {
                            // `total, count = 0.0, 0`: each name its own value.
                            (Expr::Tuple(names), Expr::Tuple(values))
                                if names.elts.len() == values.elts.len() =>
                            {
                                for (n, v) in names.elts.iter().zip(&values.elts) {
                                    self.bind(
                                        n,
                                        matches!(n, Expr::Name(_) | Expr::Subscript(_)).then_some(v),
                                    );
                                }
                            }
                            _ => self.bind(
                                t,
                                matches!(t, Expr::Name(_) | Expr::Subscript(_)).then_some(&*a.value),
                            ),
                        }
                    }
                }
                Stmt::AnnAssign(a) => self.bind(&a.target, a.value.as_deref()),
                Stmt::AugAssign(a) => self.bind(&a.target, Some(&a.value)),
                Stmt::For(f) => self.bind(&f.target, None),
                Stmt::With(w) => {
                    for item in &w.items {
                        if let Some(v) = &item.optional_vars {
                            self.bind(v, None);
                        }
                        // `with torch.device(ref.device):`, `with device:`: not a context of
                        // the host's, as far as this can tell.
                        self.device_block |= match &item.context_expr {
                            Expr::Call(c) => {
                                matches!(&*c.func, Expr::Attribute(a) if matches!(a.attr.as_str(), "device" | "cuda"))
                            }
                            Expr::Name(_) | Expr::Attribute(_) => true,
                            _ => false,
                        };
                    }
                }
                _ => {}
            }
            visitor::walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'f Expr) {
            match expr {
                Expr::Yield(y) => self.returns.extend(y.value.as_deref()),
                Expr::YieldFrom(_) => self.opaque = true,
                Expr::Call(c) => {
                    if let Expr::Attribute(a) = &*c.func
                        && matches!(a.attr.as_str(), "append" | "extend" | "insert")
                        && let Expr::Name(n) = &*a.value
                        && let Some(v) = c.arguments.args.last()
                    {
                        self.bound.entry(n.id.as_str()).or_default().push(Some(v));
                    }
                }
                Expr::Named(n) => self.bind(&n.target, Some(&n.value)),
                // A lambda's names are its own.
                Expr::Lambda(_) => return,
                _ => {}
            }
            visitor::walk_expr(self, expr);
        }
    }
    let mut values = Values::default();
    // A parameter is what the caller passed (`batch["x"] = batch["x"].cpu()` fills it in place):
    // not known to be on the host, whatever the function puts into it.
    for p in f.parameters.iter() {
        values.bound.entry(p.name().as_str()).or_default().push(None);
    }
    values.visit_body(&f.body);
    if values.opaque {
        return false;
    }
    let mut visiting = Vec::new();
    let local: Vec<String>;
    let torch_names = if values.torch_names.is_empty() {
        torch_names
    } else {
        local = torch_names.iter().cloned().chain(values.torch_names.iter().map(|n| n.to_string())).collect();
        &local
    };
    let host = Host {
        bound: &values.bound,
        function: host_function,
        steps: std::cell::Cell::new(4096),
        device_block: values.device_block,
        torch_names,
    };
    values.returns.iter().all(|v| host.value(v, &mut visiting))
}

/// A helper that makes its result on the host does so unless the caller gives this parameter (its
/// name and position: `device=None`, moved under `if device is not None:`); `None`: always.
pub(crate) type Unless = Option<(String, usize)>;

/// Does every value the function returns come from torch's factories given no device
/// (`torch.arange(h)`, `torch.meshgrid(..)` of them), stacked, repeated, reshaped or converted: a
/// tensor made on the host at each call (`def coords_grid(b, h, w, device=None): ..`)? `None`: no;
/// `Some(None)`: always; `Some(Some((name, position)))`: unless the caller passes the parameter
/// (`device=None`, used only under `if device is not None: grid = grid.to(device)`).
pub(crate) fn returns_host_made(f: &ast::StmtFunctionDef) -> Option<Unless> {
    // The device parameter, defaulting to `None`.
    let device = f.parameters.iter_non_variadic_params().enumerate().find(|(_, p)| {
        p.parameter.name.as_str().contains("device")
            && matches!(p.default.as_deref(), Some(Expr::NoneLiteral(_)))
    });
    let device_name = device.map(|(_, p)| p.parameter.name.as_str());
    let is_device_test = |t: &Expr| match t {
        Expr::Name(n) => Some(n.id.as_str()) == device_name,
        Expr::Compare(c) => {
            matches!(&*c.left, Expr::Name(n) if Some(n.id.as_str()) == device_name)
                && matches!(c.ops[..], [ast::CmpOp::IsNot])
                && matches!(c.comparators[..], [Expr::NoneLiteral(_)])
        }
        _ => false,
    };
    // What each name is bound to (and appended), outside the branches taken with a device.
    let mut bound: FxHashMap<&str, Vec<&Expr>> = FxHashMap::default();
    let mut returns: Vec<&Expr> = Vec::new();
    let mut other = false;
    let mut device_branch = false;
    fn walk<'f>(
        body: &'f [Stmt],
        is_device_test: &dyn Fn(&Expr) -> bool,
        bound: &mut FxHashMap<&'f str, Vec<&'f Expr>>,
        returns: &mut Vec<&'f Expr>,
        other: &mut bool,
        device_branch: &mut bool,
        depth: usize,
    ) {
        if depth > 8 {
            *other = true;
            return;
        }
        for s in body {
            match s {
                Stmt::If(i) if i.elif_else_clauses.is_empty() && is_device_test(&i.test) => {
                    *device_branch = true
                }
                Stmt::If(i) => {
                    walk(&i.body, is_device_test, bound, returns, other, device_branch, depth + 1);
                    for c in &i.elif_else_clauses {
                        walk(&c.body, is_device_test, bound, returns, other, device_branch, depth + 1);
                    }
                }
                Stmt::Assign(a) => {
                    for t in &a.targets {
                        match t {
                            Expr::Name(n) => bound.entry(n.id.as_str()).or_default().push(&a.value),
                            // `y, x = torch.meshgrid(..)`: each is where the whole is.
                            Expr::Tuple(tu) => {
                                for e in &tu.elts {
                                    if let Expr::Name(n) = e {
                                        bound.entry(n.id.as_str()).or_default().push(&a.value);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                Stmt::Expr(e) => {
                    if let Expr::Call(c) = &*e.value
                        && let Expr::Attribute(m) = &*c.func
                        && m.attr.as_str() == "append"
                        && let (Expr::Name(n), [v]) = (&*m.value, &c.arguments.args[..])
                    {
                        bound.entry(n.id.as_str()).or_default().push(v);
                    }
                }
                Stmt::Return(r) => match r.value.as_deref() {
                    Some(v) => returns.push(v),
                    None => *other = true,
                },
                Stmt::For(_) | Stmt::While(_) | Stmt::With(_) | Stmt::Try(_) | Stmt::Match(_) => {
                    *other = true
                }
                _ => {}
            }
        }
    }
    walk(&f.body, &is_device_test, &mut bound, &mut returns, &mut other, &mut device_branch, 0);
    if other || returns.is_empty() {
        return None;
    }
    /// The names' values (`bound`), what is known of each name (`memo`), and the names being
    /// worked out (`visiting`).
    struct Walk<'f> {
        bound: FxHashMap<&'f str, Vec<&'f Expr>>,
        /// The function's parameters: what a caller hands in (also when rebound from itself,
        /// `t = t.unsqueeze(dim)`) is not made here.
        params: Vec<&'f str>,
        memo: FxHashMap<&'f str, bool>,
        visiting: Vec<&'f str>,
    }
    fn made<'f>(e: &'f Expr, w: &mut Walk<'f>, depth: usize) -> bool {
        if depth > 12 {
            return false;
        }
        let next = |e: &'f Expr, w: &mut Walk<'f>| made(e, w, depth + 1);
        match e {
            Expr::Name(n) => {
                let name = n.id.as_str();
                if w.params.contains(&name) {
                    return false;
                }
                if w.visiting.contains(&name) {
                    // (A name bound from itself, `grid = grid[None].repeat(..)`: as its other values.)
                    return true;
                }
                if let Some(&known) = w.memo.get(name) {
                    return known;
                }
                let Some(values) = w.bound.get(name).cloned() else { return false };
                w.visiting.push(name);
                let all = values.iter().all(|v| next(v, w));
                w.visiting.pop();
                w.memo.insert(name, all);
                all
            }
            Expr::Subscript(s) => next(&s.value, w),
            Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
                !elts.is_empty() && elts.iter().all(|e| next(e, w))
            }
            // A tensor made on the host that is not 0-dim combined with anything: the result is on
            // the host (a device operand would not combine with it).
            Expr::BinOp(b) => next(&b.left, w) || next(&b.right, w),
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) => {
                    let name = a.attr.as_str();
                    let no_device = c.arguments.find_keyword("device").is_none();
                    let torch = matches!(&*a.value, Expr::Name(t) if matches!(t.id.as_str(), "torch" | "th"));
                    if torch {
                        return no_device
                            && match name {
                                n if HOST_FACTORIES.contains(&n) && n != "from_numpy" => true,
                                "meshgrid" | "stack" | "cat" | "ones_like" | "zeros_like" => {
                                    !c.arguments.args.is_empty()
                                        && c.arguments.args.iter().all(|x| next(x, w))
                                }
                                _ => false,
                            };
                    }
                    super::api::keeps_place(name) && next(&a.value, w)
                }
                _ => false,
            },
            _ => false,
        }
    }
    let params = f.parameters.iter().map(|p| p.name().as_str()).collect();
    let mut w = Walk { bound, params, memo: FxHashMap::default(), visiting: Vec::new() };
    let all = returns.iter().all(|r| made(r, &mut w, 0));
    all.then(|| match device {
        Some((position, p)) if device_branch => Some((p.parameter.name.as_str().to_string(), position)),
        _ => None,
    })
}

/// Does the function return only values it moves to the device: `x.cuda()`, `x.to("cuda")` (not
/// `x.to(device)`, whose device a caller may make the CPU), or a tuple, list or comprehension of
/// them, `None` for a missing one (`def to_cuda(*args): return [None if x is None else x.cuda()
/// for x in args]`)? What a caller unpacks from it is on the device.
pub(crate) fn returns_device(f: &ast::StmtFunctionDef) -> bool {
    fn moved(e: &Expr, depth: usize) -> bool {
        if depth > 4 {
            return false;
        }
        match e {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) if a.attr.as_str() == "cuda" => true,
                Expr::Attribute(a) if a.attr.as_str() == "to" => {
                    let device = c
                        .arguments
                        .args
                        .first()
                        .or_else(|| c.arguments.find_keyword("device").map(|k| &k.value));
                    // (Not `.to(device)`: the caller may make it the CPU.)
                    matches!(device, Some(Expr::StringLiteral(s)) if s.value.to_str().starts_with("cuda"))
                }
                // `tuple(x.cuda() for x in xs)`, `list(..)`
                Expr::Name(n) if matches!(n.id.as_str(), "tuple" | "list") => {
                    matches!(&c.arguments.args[..], [a] if moved(a, depth + 1))
                }
                _ => false,
            },
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                !elts.is_empty() && elts.iter().all(|e| moved(e, depth + 1))
            }
            Expr::ListComp(l) => moved(&l.elt, depth + 1),
            Expr::Generator(g) => moved(&g.elt, depth + 1),
            // `None if x is None else x.cuda()`
            Expr::If(i) => {
                let none = |e: &Expr| matches!(e, Expr::NoneLiteral(_));
                (none(&i.body) || moved(&i.body, depth + 1))
                    && (none(&i.orelse) || moved(&i.orelse, depth + 1))
                    && !(none(&i.body) && none(&i.orelse))
            }
            _ => false,
        }
    }
    let mut returns = Vec::new();
    let mut other = false;
    crate::python::rules::helpers::each_stmt(&f.body, &mut |s| match s {
        Stmt::Return(r) => match r.value.as_deref() {
            Some(v) => returns.push(v),
            None => other = true,
        },
        Stmt::Expr(e) if matches!(&*e.value, Expr::Yield(_) | Expr::YieldFrom(_)) => other = true,
        _ => {}
    });
    !other && !returns.is_empty() && returns.iter().all(|v| moved(v, 0))
}

/// The top-level functions of a module (also those under `if`/`try`) whose every result is on
/// the host ([`returns_host`]), calls of one another followed: `to_cpu(x)` is a host value where
/// `def to_cpu(t): return t.detach().cpu()`.
pub(crate) fn host_functions(body: &[Stmt]) -> FxHashSet<String> {
    fn defs<'b>(body: &'b [Stmt], out: &mut Vec<&'b ast::StmtFunctionDef>, depth: usize) {
        for s in body {
            match s {
                Stmt::FunctionDef(f) => out.push(f),
                Stmt::If(i) if depth < 4 => {
                    defs(&i.body, out, depth + 1);
                    i.elif_else_clauses.iter().for_each(|c| defs(&c.body, out, depth + 1));
                }
                Stmt::Try(t) if depth < 4 => {
                    defs(&t.body, out, depth + 1);
                    defs(&t.orelse, out, depth + 1);
                }
                _ => {}
            }
        }
    }
    let mut all = Vec::new();
    defs(body, &mut all, 0);
    let torch = torch_names(body);
    let mut host: FxHashSet<String> = FxHashSet::default();
    // Each round adds the functions that return host values given the last round's: a chain of
    // helpers a few calls deep is followed, however the file orders them.
    for _ in 0..4 {
        let found: Vec<&str> = all
            .iter()
            .filter(|f| !host.contains(f.name.as_str()) && returns_host(f, &|n| host.contains(n), &torch))
            .map(|f| f.name.as_str())
            .collect();
        if found.is_empty() {
            break;
        }
        host.extend(found.into_iter().map(str::to_string));
    }
    host
}

/// The names a file gives torch at its top level: `torch`, and `th` after `import torch as th`.
pub(crate) fn torch_names(body: &[Stmt]) -> Vec<String> {
    fn walk(body: &[Stmt], out: &mut Vec<String>, depth: usize) {
        for s in body {
            match s {
                Stmt::Import(i) => out.extend(
                    i.names
                        .iter()
                        .filter(|a| a.name.as_str() == "torch")
                        .filter_map(|a| a.asname.as_ref().map(|n| n.as_str().to_string())),
                ),
                Stmt::Try(t) if depth < 2 => {
                    walk(&t.body, out, depth + 1);
                    for h in &t.handlers {
                        let ast::ExceptHandler::ExceptHandler(h) = h;
                        walk(&h.body, out, depth + 1);
                    }
                    walk(&t.orelse, out, depth + 1);
                    walk(&t.finalbody, out, depth + 1);
                }
                Stmt::If(i) if depth < 2 => {
                    walk(&i.body, out, depth + 1);
                    i.elif_else_clauses.iter().for_each(|c| walk(&c.body, out, depth + 1));
                }
                _ => {}
            }
        }
    }
    let mut out = vec!["torch".to_string()];
    walk(body, &mut out, 0);
    out
}

/// Each name a function binds → the values it gets (`None`: one not followed).
type Bound<'f> = FxHashMap<&'f str, Vec<Option<&'f Expr>>>;

/// What a function's values are judged by: its bindings, and the functions of its file known to
/// return host values.
struct Host<'h, 'f> {
    bound: &'h Bound<'f>,
    /// Is the top-level function of this name one whose every result is on the host?
    function: &'h dyn Fn(&str) -> bool,
    /// The values left to look at: tuples of tuples of names fan out, so the answer is "not
    /// known to be on the host" after so many.
    steps: std::cell::Cell<u32>,
    /// The function makes tensors under `with torch.device(..)`: a factory's default is not the
    /// host there.
    device_block: bool,
    /// The names torch goes by in the file ([`torch_names`]).
    torch_names: &'h [String],
}

impl<'f> Host<'_, 'f> {
    /// Is the value evidently on the host, names followed through the function's bindings
    /// (`visiting`: the names being followed, so that `total += v.item()` ends)?
    fn value(&self, e: &'f Expr, visiting: &mut Vec<&'f str>) -> bool {
        let steps = self.steps.get();
        if steps == 0 {
            return false;
        }
        self.steps.set(steps - 1);
        let numpy = |e: &Expr| matches!(e, Expr::Name(m) if matches!(m.id.as_str(), "np" | "numpy"));
        let cpu = |e: &Expr| matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "cpu");
        let math = |e: &Expr| matches!(e, Expr::Name(m) if m.id.as_str() == "math");
        match e {
            Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::FString(_) => true,
            Expr::Dict(d) => d.items.iter().all(|item| self.value(&item.value, visiting)),
            Expr::ListComp(ast::ExprListComp { elt, .. })
            | Expr::SetComp(ast::ExprSetComp { elt, .. })
            | Expr::Generator(ast::ExprGenerator { elt, .. }) => self.value(elt, visiting),
            Expr::DictComp(d) => self.value(&d.value, visiting),
            Expr::UnaryOp(u) => self.value(&u.operand, visiting),
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                elts.iter().all(|e| self.value(e, visiting))
            }
            // Sizes and metadata are Python values.
            Expr::Attribute(a) => matches!(a.attr.as_str(), "shape" | "ndim" | "dtype" | "device"),
            Expr::Subscript(s) => self.value(&s.value, visiting),
            Expr::Name(n) => {
                let name = n.id.as_str();
                if visiting.contains(&name) {
                    // `total += v.item()`: the other values decide.
                    return true;
                }
                if visiting.len() > 16 {
                    return false;
                }
                let Some(values) = self.bound.get(name) else { return false };
                visiting.push(name);
                let host = values.iter().all(|v| v.is_some_and(|v| self.value(v, visiting)));
                visiting.pop();
                host
            }
            Expr::BinOp(b) => self.value(&b.left, visiting) && self.value(&b.right, visiting),
            Expr::Call(c) => {
                // `torch.zeros(n, device="cpu")`
                if c.arguments.find_keyword("device").is_some_and(|k| cpu(&k.value)) {
                    return true;
                }
                let torch = |e: &Expr| matches!(e, Expr::Name(m) if self.torch_names.iter().any(|t| t == m.id.as_str()));
                match &*c.func {
                    // A tensor torch makes with no device, from nothing or from host values
                    // (`torch.tensor(table)` of a NumPy table), is on the host.
                    // (Not with `**factory_kwargs`, which may hold a device, nor under `with
                    // torch.device(..)`.)
                    Expr::Attribute(a)
                        if torch(&a.value)
                            && !self.device_block
                            && c.arguments
                                .keywords
                                .iter()
                                .all(|k| k.arg.as_ref().is_some_and(|n| n.as_str() != "device"))
                            && (HOST_FACTORIES.contains(&a.attr.as_str())
                                || DATA_FACTORIES.contains(&a.attr.as_str())) =>
                    {
                        HOST_FACTORIES.contains(&a.attr.as_str())
                            || c.arguments.args.first().is_some_and(|x| self.value(x, visiting))
                    }
                    Expr::Attribute(a) => match a.attr.as_str() {
                        "cpu" | "numpy" | "tolist" | "item" | "size" | "dim" | "numel" => true,
                        "to" => c.arguments.args.first().is_some_and(cpu),
                        "cuda" | "type_as" => false,
                        // `torch.cat(feats)` is where its pieces are.
                        "cat" | "stack" => {
                            numpy(&a.value)
                                || math(&a.value)
                                || c.arguments.args.first().is_some_and(|x| self.value(x, visiting))
                        }
                        // `np.mean(..)`, `math.log10(..)`; and a method of a host value keeps it
                        // there (`t.cpu().squeeze(0).permute(1, 2, 0)`, `a.astype(np.uint8)`).
                        _ => numpy(&a.value) || math(&a.value) || self.value(&a.value, visiting),
                    },
                    Expr::Name(n) => {
                        matches!(n.id.as_str(), "float" | "int" | "bool" | "len" | "str" | "round")
                            || (self.function)(n.id.as_str())
                            // `sum(host values)`, `max(a, b)`: as their arguments.
                            || (matches!(n.id.as_str(), "sum" | "max" | "min" | "abs")
                                && !c.arguments.args.is_empty()
                                && c.arguments.args.iter().all(|a| self.value(a, visiting)))
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// Methods of a module that return the module itself, moved or put in a mode
/// (`LatentODE(..).to(device)`, `Net().cuda().eval()`).
pub(crate) const RETURNS_ITSELF: [&str; 9] =
    ["to", "cuda", "cpu", "train", "eval", "float", "half", "double", "requires_grad_"];

/// torch's factories that make a tensor from nothing, on the host unless given a device.
const HOST_FACTORIES: [&str; 13] = [
    "zeros",
    "ones",
    "empty",
    "full",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "from_numpy",
];
/// torch's factories that copy their data: on the host when that data is.
const DATA_FACTORIES: [&str; 5] = ["tensor", "as_tensor", "FloatTensor", "LongTensor", "Tensor"];

/// What a method does once each time it runs, outside its loops: a method takes one training step
/// when it, or the methods of its object it calls so (`def clm_step(self, ..): ..;
/// self.optimize(loss)`), call `.backward()` and an optimizer's `.step()` (not a scheduler's):
/// `def learn(self, mem): ..; loss.backward(); self.optimiser.step()`. Stepping each of a list of
/// optimizers counts once (`for optimizer in optimizers: optimizer.step()`).
#[derive(Debug, Default)]
pub(crate) struct StepFacts {
    backward: bool,
    step: bool,
    /// The methods of its own object it calls (`self.optimize(loss)`).
    self_calls: Vec<String>,
}

fn step_facts(f: &ast::StmtFunctionDef) -> StepFacts {
    use ruff_python_ast::visitor::{self, Visitor};
    #[derive(Default)]
    struct Once<'f> {
        facts: StepFacts,
        /// Inside `for optimizer in optimizers:`: the name each optimizer is bound to.
        optimizer_loop: Option<&'f str>,
    }
    impl<'f> Visitor<'f> for Once<'f> {
        fn visit_stmt(&mut self, stmt: &'f Stmt) {
            match stmt {
                // A loop over the optimizers steps each once.
                Stmt::For(l)
                    if self.optimizer_loop.is_none()
                        && let Expr::Name(target) = &*l.target
                        && steps_optimizer(&l.target)
                        && !steps_scheduler(&l.target) =>
                {
                    self.optimizer_loop = Some(target.id.as_str());
                    self.visit_body(&l.body);
                    self.optimizer_loop = None;
                }
                // A nested function or class is its own; a loop's steps are many.
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) | Stmt::For(_) | Stmt::While(_) => {}
                _ => visitor::walk_stmt(self, stmt),
            }
        }
        fn visit_expr(&mut self, expr: &'f Expr) {
            if let Expr::Call(c) = expr
                && let Expr::Attribute(a) = &*c.func
            {
                let in_optimizer_loop = |r: &Expr| matches!((r, self.optimizer_loop), (Expr::Name(n), Some(o)) if n.id.as_str() == o);
                match a.attr.as_str() {
                    // (In a loop over the optimizers, only the optimizers' own calls count.)
                    "backward" if self.optimizer_loop.is_none() => self.facts.backward = true,
                    "step"
                        if (self.optimizer_loop.is_none() || in_optimizer_loop(&a.value))
                            && steps_optimizer(&a.value)
                            && !steps_scheduler(&a.value) =>
                    {
                        self.facts.step = true;
                    }
                    m if self.optimizer_loop.is_none()
                        && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self")
                        && !self.facts.self_calls.iter().any(|c| c == m) =>
                    {
                        self.facts.self_calls.push(m.to_string());
                    }
                    _ => {}
                }
            }
            visitor::walk_expr(self, expr);
        }
    }
    let mut once = Once::default();
    once.visit_body(&f.body);
    once.facts
}

/// Does a function run a loop of steps: a `for` or `while` whose body calls `.backward(..)`,
/// `.step(..)` of an optimizer, scheduler or scaler (not `env.step(..)`), `.forward(..)`, or one of
/// the function's parameters named for a model (`model(x)`, `net(x)`; not any callable `f`)?
fn runs_steps(f: &ast::StmtFunctionDef) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Steps<'f> {
        params: Vec<&'f str>,
        loops: usize,
        found: bool,
    }
    impl<'f> Visitor<'f> for Steps<'f> {
        fn visit_stmt(&mut self, stmt: &'f Stmt) {
            if self.found {
                return;
            }
            match stmt {
                // A nested function or class is its own.
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::For(_) | Stmt::While(_) => {
                    self.loops += 1;
                    visitor::walk_stmt(self, stmt);
                    self.loops -= 1;
                }
                _ => visitor::walk_stmt(self, stmt),
            }
        }
        fn visit_expr(&mut self, expr: &'f Expr) {
            if self.found {
                return;
            }
            if self.loops > 0
                && let Expr::Call(c) = expr
            {
                self.found = match &*c.func {
                    Expr::Attribute(a) => match a.attr.as_str() {
                        "backward" | "forward" => true,
                        "step" => steps_training(&a.value),
                        _ => false,
                    },
                    Expr::Name(n) => self.params.contains(&n.id.as_str()) && names_a_model(n.id.as_str()),
                    _ => false,
                };
            }
            visitor::walk_expr(self, expr);
        }
    }
    let params = f.parameters.iter_non_variadic_params().map(|p| p.parameter.name.as_str()).collect();
    let mut steps = Steps { params, loops: 0, found: false };
    steps.visit_body(&f.body);
    steps.found
}

/// The receiver of `.step(..)` is an optimizer, a learning-rate scheduler or a gradient scaler
/// (`optimizer`, `self.opt`, `scheduler`, `scaler`), not an environment.
pub(crate) fn steps_training(receiver: &Expr) -> bool {
    named_for(receiver, &["opt", "sched", "scaler", "lr"])
}

/// The receiver of `.step(..)` is an optimizer or a gradient scaler: a step made once per
/// training step (a scheduler's is as often made once per epoch).
pub(crate) fn steps_optimizer(receiver: &Expr) -> bool {
    named_for(receiver, &["opt", "scaler"])
}

/// The receiver of `.step(..)` is a learning-rate scheduler (`scheduler`, `opt_scheduler`,
/// `lr_sched`): often stepped once per epoch, or every N steps.
pub(crate) fn steps_scheduler(receiver: &Expr) -> bool {
    named_for(receiver, &["sched", "lr"])
}

/// Is the name (`scheduler`, `self.lr_sched`) named for one of `words` (a part of it, in any case)?
pub(crate) fn named_for(receiver: &Expr, words: &[&str]) -> bool {
    let name = match receiver {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.as_str(),
        _ => return false,
    };
    let name = name.to_ascii_lowercase();
    words.iter().any(|w| name.contains(w))
}

/// A name that holds a model: `model`, `net`, `policy`, `encoder`, `generator`, `critic`, ...
pub(crate) fn names_a_model(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "model",
        "net",
        "policy",
        "encoder",
        "decoder",
        "generator",
        "discriminator",
        "module",
        "actor",
        "critic",
    ]
    .iter()
    .any(|w| name.contains(w))
}

/// One file's view of the project: names as the file spells them (relative imports included).
#[derive(Clone, Copy)]
pub(crate) struct View<'p> {
    project: &'p Project,
    path: &'p Path,
    module: &'p [String],
    is_package: bool,
    /// What the file itself says about where it runs.
    own: Placement,
}

impl<'p> View<'p> {
    pub(crate) fn new(
        project: &'p Project,
        path: &'p Path,
        module: &'p [String],
        is_package: bool,
        own: Placement,
    ) -> View<'p> {
        View { project, path, module, is_package, own }
    }

    /// Where the project, this file included, says it runs.
    pub(crate) fn placement(&self) -> Placement {
        let declared = Placement { cuda_only: self.project.cuda_only, ..Placement::default() };
        let p = self.project.placement.union(self.own).union(declared);
        Placement { cuda_only: p.cuda_only || self.own.built_for_cuda, own_gpus: self.own.own_gpus, ..p }
    }

    /// Does the project have anything to say about other files?
    pub(crate) fn is_empty(&self) -> bool {
        self.project.is_empty()
    }

    /// The absolute dotted name of something this file defines at its top level (`Class.method`
    /// → `pkg.trainer.Class.method`).
    pub(crate) fn own_absolute(&self, name: &str) -> String {
        if self.module.is_empty() { name.to_string() } else { format!("{}.{name}", self.module.join(".")) }
    }

    /// The absolute name of a top-level function of another file of the project that a name of
    /// this file (as the semantic model qualifies it) names.
    pub(crate) fn function(&self, qualified: &str) -> Option<String> {
        // Most calls are to torch or the standard library: one lookup says so, with nothing built.
        if self.project.is_empty() || (!qualified.starts_with('.') && !self.project.binds(qualified)) {
            return None;
        }
        let q = absolute(qualified, self.module, self.is_package)?;
        let (file, _) = self.project.function_file_from(&q, self.path)?;
        (file != self.path).then_some(q)
    }

    /// A function of another file of the project that a name this file never binds stands for
    /// through the file's `from module import *` ([`star_exports`]): `accuracy(..)` after
    /// `from utils import *`.
    pub(crate) fn star_bound(&self, func: &Expr, bound: impl Fn(&ast::ExprName) -> bool) -> Option<String> {
        let Expr::Name(n) = func else { return None };
        if self.module.is_empty() || bound(n) {
            return None;
        }
        self.function(&format!("{}.{}", self.module.join("."), n.id))
    }

    /// A class (or a function) of another file of the project that a name this file never binds
    /// stands for through the file's `from module import *`: `RNN_VAE(..)` after `from
    /// lib.rnn_baselines import *`. Its name as this module re-exports it.
    pub(crate) fn star_name(&self, func: &Expr, bound: impl Fn(&ast::ExprName) -> bool) -> Option<String> {
        let Expr::Name(n) = func else { return None };
        if self.module.is_empty() || bound(n) {
            return None;
        }
        let name = format!("{}.{}", self.module.join("."), n.id);
        (self.class(&name).is_some() || self.function(&name).is_some()).then_some(name)
    }

    /// The absolute name of a class another file of the project defines (`qualified` as the
    /// semantic model qualifies the class's name).
    pub(crate) fn class(&self, qualified: &str) -> Option<String> {
        if self.project.is_empty() || (!qualified.starts_with('.') && !self.project.binds(qualified)) {
            return None;
        }
        let q = absolute(qualified, self.module, self.is_package)?;
        let ids = self.project.lookup_ids(&q);
        let elsewhere = ids.iter().any(|&id| {
            self.project
                .class_names
                .get(id)
                .and_then(|(_, file)| self.project.paths.get(*file))
                .is_some_and(|p| p != self.path)
        });
        elsewhere.then_some(q)
    }

    /// The absolute name of a method of a class of another file of the project (`class` as the
    /// semantic model qualifies the class's name: `utils.MetricLogger`).
    pub(crate) fn method(&self, class: &str, method: &str) -> Option<String> {
        if self.project.is_empty() || (!class.starts_with('.') && !self.project.binds(class)) {
            return None;
        }
        let q = format!("{}.{method}", absolute(class, self.module, self.is_package)?);
        let (file, _) = self.project.method_file_from(&q, self.path)?;
        (file != self.path).then_some(q)
    }

    /// Does the method of another file of the project an absolute dotted name names take one
    /// training step each time it runs?
    pub(crate) fn method_steps_once(&self, qualified: &str) -> bool {
        self.project.method_steps_once(qualified)
    }

    /// Does a function of another file of the project that a name of this file names run a loop
    /// of steps itself?
    pub(crate) fn runs_loop(&self, qualified: &str) -> bool {
        self.function(qualified).is_some_and(|q| self.project.runs_loop(&q))
    }

    /// Is every result of a function of another file of the project that a name of this file
    /// names on the host ([`returns_host`])?
    pub(crate) fn returns_host(&self, qualified: &str) -> bool {
        self.function(qualified).is_some_and(|q| self.project.returns_host(&q))
    }

    /// Does a function of another file of the project that a name of this file names make every
    /// result on the host ([`returns_host_made`]), and unless which parameter is given?
    pub(crate) fn host_maker(&self, qualified: &str) -> Option<Unless> {
        self.function(qualified).and_then(|q| self.project.host_maker(&q).cloned())
    }

    /// Is every result of a function of another file of the project that a name of this file
    /// names moved to the device ([`returns_device`])?
    pub(crate) fn returns_device(&self, qualified: &str) -> bool {
        self.function(qualified).is_some_and(|q| self.project.returns_device(&q))
    }

    /// The absolute name of the class a factory of another file of the project makes (`qualified`
    /// as the semantic model qualifies the function's name: `loss.create_loss_function`).
    pub(crate) fn factory_class(&self, qualified: &str) -> Option<String> {
        self.function(qualified).and_then(|q| self.project.factory_class(&q).map(String::from))
    }

    /// Does some file of the project choose the CPU, or let its user choose the device?
    pub(crate) fn has_cpu_path(&self) -> bool {
        self.project.has_cpu_path()
    }

    /// Does the configuration say the code must also run on machines without a GPU?
    pub(crate) fn gpu_optional(&self) -> bool {
        self.project.gpu_optional()
    }

    /// Does some file of the project name an accelerator?
    pub(crate) fn uses_accelerator(&self) -> bool {
        self.project.uses_accelerator()
    }

    /// Does some file of the project turn off the argument checks of `torch.distributions`?
    pub(crate) fn validation_off(&self) -> bool {
        self.project.validation_off()
    }

    /// What the method `method` of `class` (a class of another file of the project, as this file
    /// names it) keeps of its parameters ([`kept_parameters`]).
    pub(crate) fn kept_parameters(&self, class: &str, method: &str) -> &'p [(String, usize)] {
        let Some(q) = self.method(class, method) else { return &[] };
        let Some((file, own)) = self.project.method_file_from(&q, self.path) else { return &[] };
        self.project.kept.get(&(file.to_path_buf(), own.to_string())).map_or(&[], Vec::as_slice)
    }

    /// This file's functions that other files call at every step.
    pub(crate) fn called_from(&self) -> &'p [CalledFrom] {
        self.project.called_from(self.path)
    }

    /// Does the project have top-level code nothing names ([`Project::find_unreferenced`])?
    pub(crate) fn has_unreferenced(&self) -> bool {
        !self.project.unreferenced.is_empty()
    }

    /// Does nothing in the project name this top-level function or class of the file, whose
    /// other definitions another file imports by name, or that is an application's file nothing
    /// imports and that cannot run by itself ([`Project::judge_unimported`])? (Another file nothing
    /// imports from may be a script, or a library's module its users import; one that is
    /// star-imported may have any of its names used.)
    pub(crate) fn is_unreferenced(&self, name: &str) -> bool {
        self.project.unreferenced.contains(name)
            && (self.project.imported.contains(self.path)
                || self.project.judged_unimported.contains(self.path))
    }

    /// Does this file import a module of the project, or a name from one?
    pub(crate) fn imports_project(&self) -> bool {
        self.project.importers.contains(self.path)
    }

    /// Do other files of the project import definitions from this file by name (a module of the
    /// project's library, not only a script)?
    pub(crate) fn is_imported(&self) -> bool {
        self.project.imported.contains(self.path)
    }

    /// This file's functions that other files call, each with whether every such call is opt-in.
    pub(crate) fn opt_in_callers(&self) -> &'p [(String, bool)] {
        self.project.opt_in_callers(self.path)
    }

    /// Does the project declare command-line options ([`super::options`])?
    pub(crate) fn has_options(&self) -> bool {
        self.project.has_options()
    }

    /// Is the expression an option that is 1 in every run ([`super::options::Options::always_one`])?
    pub(crate) fn option_is_one(&self, e: &Expr) -> bool {
        self.project.options.always_one(e)
    }

    /// Which side of a branch a run with the project's default options never takes
    /// ([`super::options::Options::opt_in`]).
    pub(crate) fn opt_in(&self, test: &Expr, switch: bool) -> Option<bool> {
        self.project.options.opt_in(test, switch)
    }

    /// Does some class's `_apply` override in the project move this attribute of an instance of
    /// the class named `class` (`self.detect.stride = fn(self.detect.stride)`) ([`moved_by`])?
    pub(crate) fn moved_by_apply(&self, attr: &str, class: &str) -> bool {
        moved_by(&self.project.applied, attr, class)
    }

    /// The training framework the class a name of this file names derives from, when it is a
    /// class of the project ([`Project::framework`]).
    pub(crate) fn framework(&self, qualified: &str) -> Option<api::Framework> {
        if self.project.is_empty() || (!qualified.starts_with('.') && !self.project.binds(qualified)) {
            return None;
        }
        self.project.framework(&absolute(qualified, self.module, self.is_package)?)
    }

    /// Is the class a name of this file (as the semantic model qualifies it) names an
    /// `nn.Module` of the project?
    pub(crate) fn is_module(&self, qualified: &str) -> Truth {
        if self.project.is_empty() || (!qualified.starts_with('.') && !self.project.binds(qualified)) {
            return Truth::Unknown;
        }
        match absolute(qualified, self.module, self.is_package) {
            Some(q) => self.project.is_module(&q),
            None => Truth::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn project(files: &[(&str, &str)]) -> Project {
        Project::new(
            files
                .iter()
                .map(|(path, text)| {
                    let parsed = ruff_python_parser::parse_module(text).expect("test source parses");
                    FileEntry::of(Path::new(path), &parsed.syntax().body)
                })
                .collect(),
        )
    }

    #[test]
    fn module_paths_follow_packages() {
        let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            module_path(Path::new("/repo/pkg/models/net.py")),
            (s(&["repo", "pkg", "models", "net"]), false)
        );
        assert_eq!(module_path(Path::new("/repo/pkg/__init__.py")), (s(&["repo", "pkg"]), true));
        assert_eq!(module_path(Path::new("/srv/my-repo/src/pkg/a.py")), (s(&["src", "pkg", "a"]), false));
        assert_eq!(module_path(Path::new("/srv/a/../x/train.py")), (s(&["x", "train"]), false));
        // A relative path is read from the working directory: the same module either way.
        let here = std::env::current_dir().expect("a working directory");
        assert_eq!(module_path(Path::new("pkg/a.py")), module_path(&here.join("pkg/a.py")));
    }

    #[test]
    fn relative_names_resolve_against_the_package() {
        let m = ["pkg".to_string(), "models".to_string(), "net".to_string()];
        assert_eq!(absolute(".layers.Block", &m, false).as_deref(), Some("pkg.models.layers.Block"));
        assert_eq!(absolute("..utils.Base", &m, false).as_deref(), Some("pkg.utils.Base"));
        assert_eq!(absolute(".Block", &m[..2], true).as_deref(), Some("pkg.models.Block"));
        assert_eq!(absolute("....far", &m, false), None);
        assert_eq!(absolute("torch.nn.Module", &m, false).as_deref(), Some("torch.nn.Module"));
    }

    #[test]
    fn a_base_class_from_another_file_makes_a_module() {
        let p = project(&[
            (
                "repo/pkg/base.py",
                "import torch.nn as nn\nclass BaseModel(nn.Module):\n    pass\nclass Config:\n    pass\n",
            ),
            (
                "repo/pkg/net.py",
                "from .base import BaseModel, Config\nclass Net(BaseModel):\n    pass\nclass Cfg(Config):\n    pass\n",
            ),
            ("repo/pkg/__init__.py", "from .net import Net as Model\n"),
            ("repo/train.py", "from pkg.net import Net\nclass Wrapper(Net):\n    pass\n"),
        ]);
        assert_eq!(p.is_module("pkg.net.Net"), Truth::Yes);
        assert_eq!(p.is_module("pkg.base.BaseModel"), Truth::Yes);
        assert_eq!(p.is_module("pkg.net.Cfg"), Truth::No);
        assert_eq!(p.is_module("pkg.Model"), Truth::Yes, "a re-export in __init__.py");
        assert_eq!(p.is_module("train.Wrapper"), Truth::Yes);
        assert_eq!(p.is_module("transformers.PreTrainedModel"), Truth::Unknown);
    }

    #[test]
    fn functions_resolve_to_one_file_and_know_their_loops() {
        let p = project(&[
            ("repo/utils/metrics.py", "def accuracy(out, y):\n    return (out == y).float().mean()\n"),
            ("repo/utils/__init__.py", "from .metrics import accuracy as acc\n"),
            (
                "repo/engine.py",
                "def train_epoch(model, loader, opt):\n    for x, y in loader:\n        loss = model(x)\n        \
                 loss.backward()\n        opt.step()\n\ndef helper(xs):\n    for x in xs:\n        print(x)\n",
            ),
            ("a/common.py", "def log(x):\n    pass\n"),
            ("b/common.py", "def log(x):\n    pass\n"),
        ]);
        let file = |name: &str| {
            p.function_file(name).map(|(f, n)| (f.to_string_lossy().into_owned(), n.to_string()))
        };
        assert_eq!(file("utils.metrics.accuracy"), Some(("repo/utils/metrics.py".into(), "accuracy".into())));
        assert_eq!(
            file("utils.acc"),
            Some(("repo/utils/metrics.py".into(), "accuracy".into())),
            "a re-export"
        );
        assert_eq!(file("common.log"), None, "two files define it");
        assert_eq!(file("a.common.log").map(|f| f.0), Some("a/common.py".into()));
        assert!(p.runs_loop("engine.train_epoch"));
        assert!(!p.runs_loop("engine.helper"), "a loop that runs no step");
        assert!(!p.runs_loop("utils.metrics.accuracy"));
    }

    #[test]
    fn factories_are_functions_whose_every_return_makes_one_class_of_the_project() {
        let p = project(&[
            (
                "pkg/losses.py",
                "import torch\n\n\nclass Dual:\n    pass\n\n\nclass Plain:\n    pass\n\n\n\
                 def direct(w):\n    return Dual()\n\n\n\
                 def named(w):\n    loss = Dual()\n    return loss\n\n\n\
                 def moved(w, device):\n    return Dual().to(device).eval()\n\n\n\
                 def rebound(w, device):\n    loss = Dual()\n    loss = loss.to(device)\n    return loss\n\n\n\
                 def later(w):\n    return Later(w)\n\n\n\
                 def either(w):\n    if w:\n        return Dual()\n    return Plain()\n\n\n\
                 def passed(w, loss=None):\n    if loss is None:\n        loss = Dual()\n    return loss\n\n\n\
                 def tensor(n):\n    return torch.zeros(n)\n\n\n\
                 def nothing(w):\n    return\n\n\n\
                 class Later:\n    pass\n",
            ),
            ("pkg/__init__.py", ""),
        ]);
        let made = |f: &str| p.factory_class(&format!("pkg.losses.{f}")).map(String::from);
        // The class's absolute name (the module path as the index read it, ending in the package).
        let is = |f: &str, class: &str| made(f).is_some_and(|c| c.ends_with(&format!("pkg.losses.{class}")));
        assert!(is("direct", "Dual"), "{:?}", made("direct"));
        assert!(is("named", "Dual"), "{:?}", made("named"));
        // Moved or put in a mode, as made or rebound to itself moved.
        assert!(is("moved", "Dual"), "{:?}", made("moved"));
        assert!(is("rebound", "Dual"), "{:?}", made("rebound"));
        // A class defined after the function.
        assert!(is("later", "Later"), "{:?}", made("later"));
        // Two classes, a parameter that may be returned, a tensor, no value: no factory.
        for f in ["either", "passed", "tensor", "nothing"] {
            assert_eq!(made(f), None, "{f}");
        }
    }

    #[test]
    fn functions_that_return_host_values_are_known() {
        let host = |body: &str| {
            let text = format!("def f(model, xs, device):\n{body}");
            let parsed = ruff_python_parser::parse_module(&text).expect("parses");
            let Some(Stmt::FunctionDef(f)) = parsed.syntax().body.first() else { panic!("a function") };
            returns_host(f, &|n| n == "to_host", &["torch".to_string(), "th".to_string()])
        };
        // Host values, however they are reached.
        assert!(host("    return model(xs).cpu()\n"));
        assert!(host("    out = model(xs).detach()\n    host = out.to('cpu')\n    return host\n"));
        assert!(host(
            "    feats = []\n    for x in xs:\n        feats.append(model(x).cpu())\n    return torch.cat(feats)\n"
        ));
        assert!(host(
            "    total = 0.0\n    for x in xs:\n        total += model(x).item()\n    return total, len(xs)\n"
        ));
        assert!(host("    print(xs)\n"), "returns nothing");
        assert!(host("    return np.stack([x.numpy() for x in xs])\n"));
        assert!(
            host(
                "    out = [torch.zeros((0, 6), device='cpu')] * xs.shape[0]\n    for i, x in enumerate(xs):\n        out[i] = to_host(model(x))\n    return out\n"
            ),
            "filled by index with a host helper's results"
        );
        // A method of a host value keeps it there; math, NumPy and builtins of host values too.
        assert!(host("    return model(xs).detach().cpu().squeeze(0).permute(1, 2, 0)\n"));
        assert!(host("    return {\"loss\": model(xs).item(), \"n\": len(xs)}\n"));
        assert!(host("    mse = model(xs).pow(2).mean().item()\n    return 10 * math.log10(1 / mse)\n"));
        assert!(host("    return sum(x.item() for x in xs), [x.item() for x in xs]\n"));
        // torch's factories with no device, under the name the file imports torch as.
        assert!(host("    return th.tensor([[0.0, 1.0]]), torch.arange(4)\n"));
        assert!(!host("    return th.tensor([[0.0, 1.0]], device=device)\n"));
        assert!(!host("    return pt.tensor([[0.0, 1.0]])\n"), "not a name of torch's in this file");
        // Anything else may be on the device.
        assert!(!host("    return model(xs)\n"));
        assert!(!host("    return model(xs).cpu().cuda()\n"), "moved back");
        assert!(
            !host("    xs[\"a\"] = xs[\"a\"].cpu()\n    return xs\n"),
            "a parameter filled in place is the caller's"
        );
        // Every value a name is ever bound to counts (the order of statements is not followed).
        assert!(!host("    out = model(xs)\n    out = out.cpu()\n    return out\n"));
        assert!(!host("    if xs:\n        return xs.cpu()\n    return xs\n"), "one path returns its input");
        assert!(!host(
            "    feats = []\n    for x in xs:\n        feats.append(model(x))\n    return torch.cat(feats)\n"
        ));
        assert!(!host("    a, b = model(xs)\n    return a.cpu(), b\n"), "an unpacked value is not followed");
        assert!(
            host(
                "    total, count = 0.0, 0\n    for x in xs:\n        total += x.sum().item()\n    return total ** 0.5\n"
            ),
            "a tuple of values is bound name by name"
        );
        assert!(!host("    a, b = 0.0, model(xs)\n    return b\n"));
        assert!(!host("    for x in xs:\n        yield model(x)\n"));
        assert!(!host("    yield from xs\n"));
        assert!(
            !host("    out = xs\n    out = out\n    return out\n"),
            "a name bound only to itself and an input"
        );
    }

    #[test]
    fn placement_is_read_from_the_words_of_the_code() {
        let p = Placement::of_text;
        assert!(p("dev = 'mps' if torch.backends.mps.is_available() else 'cpu'").other_accelerator);
        assert!(!p("import torch\nx.cuda()\n").other_accelerator);
        assert!(p("x = x.to('xpu')\n").other_accelerator);
        assert!(p("device = torch.device(\"npu\")\n").other_accelerator);
        assert!(p("n = torch.xpu.device_count()\nx = x.to(\"xpu:0\")\n").other_accelerator);
        assert!(p("if args.device == \"mps\":\n    seed_everything(0)\n").other_accelerator);
        // A copy of PyTorch's loader handles every device PyTorch has: not the project's choice.
        let copied = "from torch._utils import ExceptionWrapper\n\n\
                      if self._pin_memory_device == \"xpu\":\n    current_device = torch.xpu.current_device()\n";
        assert!(!p(copied).other_accelerator);
        let ddp = p("dist.init_process_group('nccl')\nmodel = DistributedDataParallel(model)\n");
        assert!(ddp.multi_process && !ddp.sets_device);
        assert!(p("torch.cuda.set_device(int(os.environ['LOCAL_RANK']))").sets_device);
        // A trainer's `local_rank` field says nothing; a trainer gives each process its GPU.
        let trainer = p("if training_args.local_rank in (-1, 0):\n    trainer = Trainer(model=model)\n");
        assert!(!trainer.multi_process && trainer.sets_device);
        // Built for CUDA: NCCL alone, Triton, CUDA streams, a Ray actor given GPUs (its own).
        assert!(p("dist.init_process_group(backend=\"nccl\")").built_for_cuda);
        assert!(!p("backend = \"nccl\" if torch.cuda.is_available() else \"gloo\"").built_for_cuda);
        assert!(p("import triton\nimport triton.language as tl\n").built_for_cuda);
        assert!(p("s = torch.cuda.current_stream()").built_for_cuda);
        let actor = p("@ray.remote(num_gpus=1)\nclass Worker:\n    pass\n");
        assert!(actor.built_for_cuda && actor.own_gpus);
        assert!(!p("x = x.cuda()").built_for_cuda);
        // Neither travels to the project; a test helper's devices say nothing of it.
        assert!(!actor.union(actor).built_for_cuda && !actor.union(actor).own_gpus);
        // Set aside, MPS is not offered (Transformers' autocast workaround).
        assert!(!p("device_type = t if t != \"mps\" else \"cpu\"").other_accelerator);
        assert!(p("if device == \"mps\":\n    x = x.float()\n").other_accelerator);
        let helper = "if acc.device_name() == \"xpu\":\n    pass\n";
        assert!(!p(helper).of_test(helper).other_accelerator);
        let own = "def test_rotary():\n    table(4).to(\"mps\")\n";
        assert!(p(own).of_test(own).other_accelerator);
        assert!(!p("@ray.remote(num_gpus=0, num_cpus=1)\nclass W:\n    pass\n").built_for_cuda);
        assert!(p("@ray.remote(num_gpus=0.5)\nclass W:\n    pass\n").own_gpus);
        assert!(!p("try:\n    import triton\nexcept ImportError:\n    triton = None\n").built_for_cuda);
        assert!(!p("backend = \"nccl\" if cuda else \"ccl\"").built_for_cuda);
    }

    #[test]
    fn torch_goes_by_the_names_the_file_imports_it_as() {
        let text = "import torch\nimport torch as th\ntry:\n    import torch as pt, numpy as np\nexcept ImportError:\n    pass\n";
        let parsed = ruff_python_parser::parse_module(text).expect("parses");
        assert_eq!(torch_names(parsed.syntax().body.as_slice()), ["torch", "th", "pt"]);
    }

    #[test]
    fn host_helpers_are_followed_through_the_file() {
        let text = "def nms(p):\n    out = [None] * len(p)\n    for i, x in enumerate(p):\n        out[i] = to_cpu(x)\n    return out\n\n\
                    def to_cpu(t):\n    return t.detach().cpu()\n\n\
                    def boxes(p):\n    return p[0]\n\n\
                    if True:\n    def shape_of(t):\n        return t.shape\n";
        let parsed = ruff_python_parser::parse_module(text).expect("parses");
        let mut host: Vec<String> = host_functions(parsed.syntax().body.as_slice()).into_iter().collect();
        host.sort();
        assert_eq!(host, ["nms", "shape_of", "to_cpu"], "a helper defined after its caller counts");
    }

    #[test]
    fn deep_paths_and_names_bound_elsewhere() {
        let deep = "/home/u/src/github/org/repo/pkg/models/layers/net.py";
        let p = project(&[
            (deep, "from .base import Base\nclass Net(Base):\n    pass\n"),
            (
                "/home/u/src/github/org/repo/pkg/models/layers/base.py",
                "import torch\nclass Base(torch.nn.Module):\n    pass\n",
            ),
            ("/x/cls/utils.py", "def accuracy(out, y):\n    return out\n"),
            ("/x/rl/utils.py", "from sklearn.metrics import accuracy_score as accuracy\n"),
        ]);
        // The base class resolves through the full dotted path of a file ten folders deep.
        assert_eq!(p.is_module("home.u.src.github.org.repo.pkg.models.layers.net.Net"), Truth::Yes);
        assert_eq!(p.is_module("layers.net.Net"), Truth::Yes);
        // `utils.accuracy` is a function in one file and sklearn's in another: not followed.
        assert!(p.function_file("utils.accuracy").is_none());
        assert!(p.function_file("cls.utils.accuracy").is_some());
    }

    #[test]
    fn a_method_left_to_subclasses_runs_their_overrides_in_other_files() {
        let mut p = project(&[
            ("pkg/base.py", "import torch\nclass Trainer:\n    def loss(self, b):\n        pass\n"),
            (
                "pkg/sft.py",
                "from pkg.base import Trainer\nclass SFT(Trainer):\n    def loss(self, b):\n        return b\n",
            ),
            (
                "pkg/ppo.py",
                "from pkg.sft import SFT\nclass PPO(SFT):\n    def loss(self, b):\n        return b\n",
            ),
            ("pkg/other.py", "class Trainer:\n    def loss(self, b):\n        return b\n"),
        ]);
        let call = HotCall {
            callee: "pkg.base.Trainer.loss".into(),
            offset: 0,
            line: 9,
            cell: None,
            args: vec![false, true],
            keywords: Vec::new(),
            spread: false,
            result_needed: false,
            how: "in a loop",
            dispatched: true,
        };
        let changed = p.set_called_from(&[("pkg/base.py".into(), vec![call])]);
        assert_eq!(changed, vec![PathBuf::from("pkg/ppo.py"), PathBuf::from("pkg/sft.py")]);
        assert_eq!(p.called_from(Path::new("pkg/sft.py"))[0].function, "SFT.loss");
        assert_eq!(p.called_from(Path::new("pkg/ppo.py"))[0].function, "PPO.loss");
        // `sft.py` imports the torch-using base; `ppo.py` imports `sft.py`; `other.py` neither.
        assert!(p.uses_torch_code(Path::new("pkg/sft.py")));
        assert!(p.uses_torch_code(Path::new("pkg/ppo.py")));
        assert!(!p.uses_torch_code(Path::new("pkg/other.py")));
        assert!(!p.uses_torch_code(Path::new("pkg/base.py")));
    }

    #[test]
    fn a_name_two_sub_projects_define_resolves_under_the_caller() {
        let mask = "import torch\nclass Mask:\n    def __init__(self, n):\n        self.m = torch.ones(n)\n";
        let mut p = project(&[
            ("/r/utils/masking.py", mask),
            ("/r/layers/attn.py", "from utils.masking import Mask\n"),
            ("/r/fed/utils/masking.py", mask),
            ("/r/fed/layers/attn.py", "from utils.masking import Mask\n"),
            ("/r/other/utils/masking.py", mask),
        ]);
        // Named alone, the class is any of three: not followed.
        assert!(p.method_file("utils.masking.Mask.__init__").is_none());
        let call = HotCall {
            callee: "utils.masking.Mask.__init__".into(),
            offset: 0,
            line: 3,
            cell: None,
            args: vec![false, false],
            keywords: Vec::new(),
            spread: false,
            result_needed: false,
            how: "at every forward pass",
            dispatched: false,
        };
        let changed = p.set_called_from(&[
            ("/r/layers/attn.py".into(), vec![call.clone()]),
            ("/r/fed/layers/attn.py".into(), vec![call]),
        ]);
        // Each caller runs the copy in its own tree, as Python would import it from there; the
        // third tree's copy is nobody's.
        assert_eq!(
            changed,
            vec![PathBuf::from("/r/fed/utils/masking.py"), PathBuf::from("/r/utils/masking.py")]
        );
        assert_eq!(p.called_from(Path::new("/r/utils/masking.py"))[0].caller, "/r/layers/attn.py");
        assert_eq!(p.called_from(Path::new("/r/fed/utils/masking.py"))[0].caller, "/r/fed/layers/attn.py");
        assert!(p.called_from(Path::new("/r/other/utils/masking.py")).is_empty());
    }

    #[test]
    fn calls_at_every_step_reach_the_callee_file() {
        let mut p = project(&[
            ("m/metrics.py", "def accuracy(out, y):\n    return out\n"),
            ("m/train.py", "from metrics import accuracy\n"),
        ]);
        let call = |args: Vec<bool>, needed: bool| HotCall {
            callee: "metrics.accuracy".into(),
            offset: 0,
            line: 7,
            cell: None,
            args,
            keywords: Vec::new(),
            spread: false,
            result_needed: needed,
            how: "in a loop",
            dispatched: false,
        };
        let changed = p.set_called_from(&[
            ("m/train.py".into(), vec![call(vec![true, false], false)]),
            ("m/eval.py".into(), vec![call(vec![false, true, false], false)]),
        ]);
        assert_eq!(changed, vec![PathBuf::from("m/metrics.py")]);
        let called = p.called_from(Path::new("m/metrics.py"));
        assert_eq!(called.len(), 1);
        assert_eq!((called[0].caller.as_str(), called[0].line), ("m/train.py", 7), "the first caller");
        assert_eq!(called[0].args, vec![true, true, false], "any caller's device counts");
        assert!(!called[0].result_needed);
        // The same calls again change nothing; none at all clears the file.
        assert!(
            p.set_called_from(&[
                ("m/train.py".into(), vec![call(vec![true, false], false)]),
                ("m/eval.py".into(), vec![call(vec![false, true, false], false)])
            ])
            .is_empty()
        );
        assert_eq!(p.set_called_from(&[]), vec![PathBuf::from("m/metrics.py")]);
        assert!(p.called_from(Path::new("m/metrics.py")).is_empty());
    }

    #[test]
    fn a_file_is_linted_again_when_what_its_lint_asks_of_its_callers_changes() {
        let mut p = project(&[
            ("m/sampler.py", "def ddpm(x):\n    return x\n\n\ndef ddim(x):\n    return x\n"),
            ("m/main.py", "from sampler import ddpm, ddim\n"),
        ]);
        let call = |callee: &str, opt_in: bool| ProjectCall { callee: callee.into(), opt_in };
        let none = FxHashMap::default();
        let sampler = PathBuf::from("m/sampler.py");
        // Called only from opt-in branches: the file learns it.
        let first = [call("sampler.ddpm", true), call("sampler.ddim", false)];
        assert_eq!(p.set_opt_in_callers(&[&first], &none), vec![sampler.clone()]);
        assert_eq!(p.opt_in_callers(&sampler), &[("ddim".to_string(), false), ("ddpm".to_string(), true)]);
        // Any call that is not opt-in settles it.
        let both = [call("sampler.ddpm", true), call("sampler.ddpm", false), call("sampler.ddim", false)];
        assert_eq!(p.set_opt_in_callers(&[&both], &none), vec![sampler.clone()]);
        // A function only the file's own branches reach hears of other callers; other functions'
        // callers do not concern its lint.
        let (ddim, ddpm) = (["ddim".to_string()], ["ddpm".to_string()]);
        let judged_ddim: FxHashMap<&Path, &[String]> = [(sampler.as_path(), &ddim[..])].into_iter().collect();
        assert!(p.set_opt_in_callers(&[&both], &judged_ddim).is_empty());
        let judged_ddpm: FxHashMap<&Path, &[String]> = [(sampler.as_path(), &ddpm[..])].into_iter().collect();
        let first_again = [call("sampler.ddpm", true)];
        assert_eq!(p.set_opt_in_callers(&[&first_again], &judged_ddpm), vec![sampler.clone()]);
        assert!(p.set_opt_in_callers(&[&first_again], &judged_ddpm).is_empty());
    }

    #[test]
    fn methods_of_classes_of_other_files_are_called_by_keyword() {
        let mut p = project(&[
            (
                "m/utils/misc.py",
                "class Logger:\n    def update(self, **kw):\n        pass\n\n    def note(self, lr):\n        pass\n",
            ),
            ("m/utils/__init__.py", "from .misc import Logger\n"),
            ("m/other.py", "class Logger:\n    def flush(self):\n        pass\n"),
        ]);
        // Through the package's re-export; a method the class does not have is nothing.
        assert_eq!(p.method_file("utils.Logger.update").map(|(_, m)| m), Some("Logger.update"));
        assert!(p.method_file("utils.Logger.flush").is_none());
        assert!(p.function_file("utils.Logger.update").is_none(), "a method is not a function");
        let call = |line: usize, keywords: Vec<(String, bool)>| HotCall {
            callee: "utils.Logger.update".into(),
            offset: 0,
            line,
            cell: None,
            args: vec![false],
            keywords,
            spread: false,
            result_needed: false,
            how: "in a loop",
            dispatched: false,
        };
        p.set_called_from(&[(
            "m/train.py".into(),
            vec![call(3, vec![("lr".into(), false)]), call(4, vec![("loss".into(), true)])],
        )]);
        let called = p.called_from(Path::new("m/utils/misc.py"));
        assert_eq!(called.len(), 1);
        assert_eq!(called[0].function, "Logger.update");
        assert_eq!(called[0].line, 4, "the first call that passes a device tensor is shown");
        // `**kw` takes the keywords no named parameter takes; `lr` is given only numbers.
        assert!(called[0].passes(Param::Kwargs, 1, &["self"]));
        assert!(!called[0].passes(Param::Args, 1, &["self"]), "no positional argument past `self`");
        assert!(!called[0].passes(Param::Named { position: 1, name: "lr" }, 2, &["self", "lr"]));
        assert!(called[0].passes(Param::Named { position: usize::MAX, name: "loss" }, 1, &["self", "loss"]));
        // A keyword-only parameter takes its keyword; `**kwargs` does not get it too.
        assert!(!called[0].passes(Param::Kwargs, 1, &["self", "loss"]));
    }

    #[test]
    fn cycles_and_disagreeing_duplicates_are_unknown() {
        let p = project(&[
            ("a.py", "from b import B\nclass A(B):\n    pass\n"),
            ("b.py", "from a import A\nclass B(A):\n    pass\n"),
            ("x/utils.py", "import torch\nclass Block(torch.nn.Module):\n    pass\n"),
            ("y/utils.py", "class Block:\n    pass\n"),
        ]);
        assert_eq!(p.is_module("a.A"), Truth::Unknown);
        assert_eq!(p.is_module("utils.Block"), Truth::Unknown);
        assert_eq!(p.is_module("x.utils.Block"), Truth::Yes);
        assert_eq!(p.is_module("y.utils.Block"), Truth::No);
    }
}
