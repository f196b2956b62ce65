//! `devcheck::check_forward`: a dry run of forward (or of a whole training step) on a fake
//! device, with no GPU and no element data.
//!
//! See [`check_forward`] for how the fake model is made and what happens during the run.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::{AssertUnwindSafe, Location};
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Operand, Result, Unlabelled, device_fixes, operand_fix};
use crate::module::{
    Module, ModulePath, Param, ParamId, Persistence, SkippedMut, SkippedValue, VisitorMut, buffer_role,
    label_skipped, short_type_name,
};
use crate::shape::{Layout, checked_nbytes, fmt_shape};
use crate::tensor::{Origin, Storage, Tensor, TensorRole};

use super::inventory::inspect;
use super::ledger::{Allocations, HostRead, Transfer};
use super::recorder::{CreationSite, MismatchSite, Mode, Recording};
use super::report::{CheckError, Finding, Severity, any_problem, count_by_severity, fmt_bytes, plural};

/// An example input for a dry run: a name (used in reports), a shape and a dtype; by default it
/// arrives on the target device. Make one from a shape, or from an example tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    name: String,
    shape: Vec<usize>,
    dtype: DType,
    device: Option<Device>,
    origin: Origin,
}

impl Input {
    /// An input of this shape and dtype, on the target device unless [`Input::on`] says otherwise.
    #[track_caller]
    pub fn new(name: impl Into<String>, shape: impl AsRef<[usize]>, dtype: DType) -> Input {
        Input {
            name: name.into(),
            shape: shape.as_ref().to_vec(),
            dtype,
            device: None,
            origin: Origin::here("input"),
        }
    }

    /// An input with `example`'s shape and dtype (and origin), on the target device unless
    /// [`Input::on`] says otherwise. No data is copied.
    pub fn like(name: impl Into<String>, example: &Tensor) -> Input {
        Input {
            name: name.into(),
            shape: example.shape().to_vec(),
            dtype: example.dtype(),
            device: None,
            origin: example.origin(),
        }
    }

    /// Where the input arrives, when that is not the target: `Device::Cpu` for a batch as a data
    /// loader yields it, to check that the step moves it.
    pub fn on(mut self, device: &Device) -> Input {
        self.device = Some(*device);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }
}

impl From<&Tensor> for Input {
    /// Named after the tensor's name, or `input`.
    fn from(example: &Tensor) -> Input {
        Input::like(example.name().unwrap_or_else(|| "input".to_string()), example)
    }
}

/// The result of [`check_forward`].
#[derive(Clone, Debug)]
pub struct ForwardReport {
    module: String,
    target: Device,
    inputs: Vec<Operand>,
    findings: Vec<Finding>,
    allocations: BTreeMap<Device, Allocations>,
    transfers: Vec<Transfer>,
    reads: Vec<HostRead>,
    completed: bool,
    elapsed: Duration,
}

/// Dry-runs `forward` with `model`'s parameters and buffers replaced by fake tensors on `target`
/// (any `cuda:N`, no GPU needed) and fake `inputs`, and reports every tensor created off the target
/// (with the line and op that made it), every device mismatch (each operand with its module path
/// and origin), every host read inside forward ("needs data at file:line"), skipped tensor fields
/// left off the target, and submodules marked `#[module(skip)]` whose parameters would be left
/// behind.
///
/// `forward` gets the model and the fake inputs, in the order given; it can be a bare
/// `|model, x| model.forward(&x[0])` or a whole training step (give the batch
/// `Input::new(..).on(&Device::Cpu)` to check that the step moves it; build the optimizer inside
/// the closure from `model.parameters()` to check its step too). An error or panic inside it
/// ends the run and is reported as a finding.
///
/// Returns `Err` only when the inputs themselves are invalid. Use
/// [`ForwardReport::ensure_clean`] to turn problems into an error for `?`.
///
/// Tip: a dry run on `cuda:1` also catches code that hard-codes `cuda:0`.
///
/// # What happens to the model
///
/// Any [`Module`] can be dry-run; it does not need to be `Clone`. For the run, every parameter
/// handle in the model is swapped for a *new* parameter (tied weights kept tied) holding a fake
/// tensor on the target, with fake copies of its gradient and optimizer state, and every buffer
/// for a fake tensor on the target: what `model.to(&target)` would give, without data. Skipped
/// fields are left as they are, exactly as `to` leaves them. Afterwards, also when forward
/// failed or panicked, the original handles are put back, and so is what forward wrote into a
/// skipped `Tensor` or `Option<Tensor>` field (a cached state). The original parameters are never
/// touched: an optimizer holding them sees nothing of the run.
///
/// Other state that forward changes stays changed (a step counter in a plain field, a tensor
/// pushed onto a `Vec` field, which would hold a fake tensor); to dry-run such a forward without
/// side effects, dry-run a clone: `check_forward(&mut model.clone(), ..)` (a clone shares
/// parameters, so it is cheap).
///
/// # What happens during the run
///
/// The closure runs in a fake scope ([`crate::fake`]) on this thread, with a recorder that the op
/// front end reports to. A device mismatch is recorded and the op goes on (its result on the
/// first operand's device), so one run finds every problem. Host reads (`to_vec`, `to_scalar`) of
/// tensors without data are recorded as "needs data" and answered with zeros. Tensors made by
/// constructors on a device other than the target are recorded with their origin. Nothing
/// allocates element data; [`ForwardReport::data_bytes`] says so, and the tests assert it.
///
/// Work done on other threads during forward is not seen: fake mode and the recorder are per
/// thread.
///
/// ```
/// use devcheck::check::Input;
/// use devcheck::{DType, Device, Module, Param, Tensor};
///
/// #[derive(Module)]
/// struct Scale { weight: Param }
///
/// impl Scale {
///     fn forward(&self, x: &Tensor) -> devcheck::Result<Tensor> {
///         let bias = Tensor::ones(x.shape(), &Device::Cpu)?; // not on x's device
///         x.mul(&self.weight.tensor())?.add(&bias)
///     }
/// }
///
/// # fn main() -> devcheck::Result<()> {
/// let mut model = Scale { weight: Param::new(Tensor::ones([4], &Device::Cpu)?) };
/// let report = devcheck::check_forward(
///     &mut model,
///     &[Input::new("x", [2, 4], DType::F32)],
///     &Device::Cuda(0),
///     |model, x| model.forward(&x[0]),
/// )?;
/// let codes: Vec<&str> = report.findings().iter().map(|f| f.code()).collect();
/// assert_eq!(codes, ["created-off-device", "device-mismatch"]);
/// assert_eq!(report.data_bytes(), 0);
/// // The model is as it was.
/// assert!(!model.weight.tensor().is_fake());
/// # Ok(())
/// # }
/// ```
#[track_caller]
pub fn check_forward<M, R>(
    model: &mut M,
    inputs: impl AsRef<[Input]>,
    target: &Device,
    forward: impl FnOnce(&mut M, &[Tensor]) -> Result<R>,
) -> Result<ForwardReport>
where
    M: Module + ?Sized,
{
    let started = Instant::now();
    let location = Location::caller();
    let target = *target;
    let inputs = inputs.as_ref();
    let fake_inputs =
        inputs.iter().map(|input| fake_input(input, target, location)).collect::<Result<Vec<_>>>()?;

    let _fake = crate::fake::enter();
    let mut swap = FakePlacement::new(target);
    let placed = std::panic::catch_unwind(AssertUnwindSafe(|| model.walk_mut(&mut swap)));
    let run = match placed {
        Ok(Ok(())) => std::panic::catch_unwind(AssertUnwindSafe(|| {
            dry_run(model, inputs, &fake_inputs, target, forward)
        })),
        Ok(Err(error)) => Ok(Err(error)),
        Err(panic) => Err(panic),
    };
    // The model gets its own tensors back whatever happened above.
    swap.restore(model);
    let (placed, recorder, outcome) = match run {
        Ok(Ok(run)) => run,
        Ok(Err(error)) => return Err(error),
        Err(panic) => std::panic::resume_unwind(panic),
    };

    let mut findings: Vec<Finding> = placed
        .findings()
        .iter()
        .filter(|f| {
            (f.code() == "skipped-tensor" && f.severity() == Severity::Error)
                || f.code() == "skipped-submodule"
        })
        .cloned()
        .collect();
    findings.extend(recorder.creations.iter().map(|c| creation_finding(c, target)));
    findings.extend(mismatch_findings(&recorder.mismatches, target));
    findings.extend(recorder.reads.iter().map(|r| read_finding(r, target)));
    findings.extend(recorder.transfers.iter().filter_map(|t| transfer_finding(t, target)));
    match outcome {
        Ok(()) => {}
        Err(Stopped::Error(error)) => findings.push(stopped_by_error(&error)),
        Err(Stopped::Panic(message)) => findings.push(stopped_by_panic(&message)),
    }
    let completed = !findings.iter().any(|f| f.code() == "forward-failed");

    Ok(ForwardReport {
        module: short_type_name(model.module_name()),
        target,
        inputs: inputs.iter().zip(&fake_inputs).map(|(i, t)| t.operand(i.name.clone())).collect(),
        findings,
        allocations: recorder.allocations,
        transfers: recorder.transfers,
        reads: recorder.reads,
        completed,
        elapsed: started.elapsed(),
    })
}

/// Why forward did not finish.
enum Stopped {
    Error(Error),
    Panic(String),
}

/// The run itself, on the model with its fakes in place: the inventory of the placed model, what
/// the recorder saw, and how forward ended.
fn dry_run<M, R>(
    model: &mut M,
    inputs: &[Input],
    fake_inputs: &[Tensor],
    target: Device,
    forward: impl FnOnce(&mut M, &[Tensor]) -> Result<R>,
) -> Result<(super::inventory::Inventory, super::recorder::Recorder, std::result::Result<(), Stopped>)>
where
    M: Module + ?Sized,
{
    let placed = inspect(&*model);
    let recording = Recording::start(Mode::DryRun { target });
    recording.name_storages(model.entries().into_iter().filter_map(|e| Some((e.path, e.tensor?))), true);
    recording.name_storages(inputs.iter().zip(fake_inputs).map(|(i, t)| (i.name.clone(), t.clone())), false);
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| forward(model, fake_inputs))) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(Stopped::Error(error)),
        Err(panic) => Err(Stopped::Panic(panic_message(&*panic))),
    };
    let recorder = *recording.finish();
    Ok((placed, recorder, outcome))
}

impl ForwardReport {
    /// The model's type name.
    pub fn module(&self) -> &str {
        &self.module
    }

    pub fn target(&self) -> Device {
        self.target
    }

    /// Problems, in order: skipped fields off the target, tensors created off it, device
    /// mismatches, host reads, moves inside forward, and a forward that failed.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// No errors or warnings.
    pub fn is_clean(&self) -> bool {
        !any_problem(&self.findings)
    }

    /// `Ok(self)` when clean, otherwise the report as an error, for `?`.
    pub fn ensure_clean(self) -> Result<ForwardReport> {
        if self.is_clean() { Ok(self) } else { Err(self.to_error().into()) }
    }

    /// Did forward run to its end (no error, no panic)?
    pub fn completed(&self) -> bool {
        self.completed
    }

    /// Tensors made during forward, per device (all fake: what a real run would allocate).
    pub fn allocations(&self) -> &BTreeMap<Device, Allocations> {
        &self.allocations
    }

    /// Bytes of element data allocated during the run: always 0 for a dry run, by construction.
    pub fn data_bytes(&self) -> usize {
        self.allocations.values().map(|a| a.bytes).sum()
    }

    /// Moves between devices made during forward.
    pub fn transfers(&self) -> &[Transfer] {
        &self.transfers
    }

    /// Host reads made during forward.
    pub fn host_reads(&self) -> &[HostRead] {
        &self.reads
    }

    /// How long the dry run took (the clone, the fake placement and forward).
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The findings as one report error.
    pub fn to_error(&self) -> CheckError {
        CheckError::new(
            "forward",
            format!(
                "dry run of `{}` on fake {}: {}",
                self.module,
                self.target,
                count_by_severity(&self.findings)
            ),
            self.summary_lines(),
            "each problem below names the line to fix; run the dry run again until it is clean",
            self.findings.clone(),
        )
    }

    /// The full report without colour at `width` columns (what tests snapshot).
    pub fn render(&self, width: usize) -> String {
        self.to_error().render(width)
    }

    /// For tools: `{module, target, inputs, findings, allocations, transfers, host_reads}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "module": self.module,
            "target": self.target.to_string(),
            "completed": self.completed,
            "inputs": self.inputs.iter().map(|o| serde_json::json!({
                "name": o.role,
                "device": o.device.to_string(),
                "dtype": o.dtype.to_string(),
                "shape": o.shape,
            })).collect::<Vec<_>>(),
            "findings": self.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
            "allocations": super::ledger::allocations_json(&self.allocations),
            "transfers": self.transfers.iter().map(Transfer::to_json).collect::<Vec<_>>(),
            "host_reads": self.reads.iter().map(HostRead::to_json).collect::<Vec<_>>(),
            "data_bytes": self.data_bytes(),
        })
    }

    fn summary_lines(&self) -> Vec<String> {
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .map(|o| format!("{} {} {} {}", o.role, o.device, o.dtype, fmt_shape(&o.shape)))
            .collect();
        let mut lines =
            vec![format!("inputs: {}", if inputs.is_empty() { "none".into() } else { inputs.join(", ") })];
        let on_target = self.allocations.get(&self.target).copied().unwrap_or_default();
        lines.push(format!(
            "forward made {} on {} ({} in all, not a peak); element data allocated: {}",
            plural(on_target.fake_tensors, "tensor"),
            self.target,
            fmt_bytes(on_target.fake_bytes),
            fmt_bytes(self.data_bytes())
        ));
        if !self.completed {
            lines.push("forward did not finish: problems after the failure point are not known".into());
        }
        lines
    }
}

impl fmt::Display for ForwardReport {
    /// The title, the summary and one line per finding.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_error())?;
        for finding in &self.findings {
            write!(f, "\n  {}", finding.one_line())?;
        }
        Ok(())
    }
}

fn creation_finding(creation: &CreationSite, target: Device) -> Finding {
    let c = creation;
    Finding::new(
        "created-off-device",
        Severity::Error,
        format!("`{}` made a tensor on {} during forward; the target is {target}", c.origin.op(), c.device),
    )
    .at(c.origin.location(), format!("made on {} here", c.device))
    .detail(format!("{} {} {}", c.tensor.device, c.tensor.dtype, fmt_shape(&c.tensor.shape)))
    .help(operand_fix(&c.tensor, target, Unlabelled::Helper))
    .times(c.count)
}

/// One finding per mismatch that is not an echo of an earlier one; echoes are counted on it.
fn mismatch_findings(mismatches: &[MismatchSite], target: Device) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (index, site) in mismatches.iter().enumerate() {
        if site.follows.is_some() {
            continue;
        }
        let later = mismatches.iter().filter(|m| m.follows == Some(index)).count();
        let summary: Vec<String> =
            site.operands.iter().map(|o| format!("{} is on {}", o.role, o.device)).collect();
        let mut finding = Finding::new(
            "device-mismatch",
            Severity::Error,
            format!("device mismatch in `{}`: {}", site.op, summary.join(", ")),
        )
        .at(site.call_site, format!("`{}` here", site.op))
        .times(site.count);
        for operand in &site.operands {
            finding = finding.detail(operand.to_string());
        }
        if later > 0 {
            finding = finding.detail(format!(
                "its result stayed on {} and {} mixed devices again",
                site.operands[0].device,
                plural(later, "later op")
            ));
        }
        findings.push(finding.help(mismatch_help(site, target)));
    }
    findings
}

fn read_finding(read: &HostRead, target: Device) -> Finding {
    let who = read.tensor.name.as_deref().map_or_else(|| "a tensor".to_string(), |n| format!("`{n}`"));
    let message = if read.without_data > 0 {
        format!("`{}` needs data: forward reads the values of {who}", read.op)
    } else {
        format!("`{}` reads the values of {who} during forward", read.op)
    };
    let mut finding = Finding::new("host-read", Severity::Warning, message)
        .at(read.call_site, "reads values here")
        .detail(read.tensor.to_string())
        .times(read.count);
    if read.without_data > 0 {
        finding =
            finding.detail("a dry run has no values: the read was answered with zeros and the run went on");
    }
    finding.help(format!(
        "on {target} every host read waits for the device to finish; in forward, branch on shapes \
         rather than values, and read values (a loss, a metric) outside forward, once per logging \
         interval"
    ))
}

/// Moves inside forward: off the target is a sync; a model tensor onto the target is an upload
/// at every call; other tensors onto the target (the batch in a training step) are expected.
fn transfer_finding(transfer: &Transfer, target: Device) -> Option<Finding> {
    let who = transfer.tensor.name.as_deref().map_or_else(|| "a tensor".to_string(), |n| format!("`{n}`"));
    let finding = if transfer.from == target {
        Finding::new(
            "moved-off-device",
            Severity::Warning,
            format!("forward copies {who} from {} to {}", transfer.from, transfer.to),
        )
        .help(format!(
            "keep forward's work on {target}; a copy off the device waits for it to finish. Copy results \
             to the host outside forward, once"
        ))
    } else if transfer.to == target && transfer.from_model {
        Finding::new(
            "moved-in-forward",
            Severity::Warning,
            format!("forward copies {who} from {} to {} at every call", transfer.from, transfer.to),
        )
        .help(
            "make it a buffer (a `Tensor` field without `#[module(skip)]`) so that `model.to(..)` moves it \
             once, instead of copying it in every forward",
        )
    } else {
        return None;
    };
    Some(
        finding
            .at(transfer.call_site, "copied here")
            .detail(transfer.tensor.to_string())
            .detail(format!("{} per call", fmt_bytes(transfer.bytes / transfer.count.max(1))))
            .times(transfer.count),
    )
}

/// The fix for each operand off the target, by what it is (the same text as a real run's error).
fn mismatch_help(site: &MismatchSite, target: Device) -> String {
    let fixes = device_fixes(site.operands.iter().filter(|o| o.device != target), target, Unlabelled::Helper);
    if fixes.is_empty() { format!("bring every operand to {target}") } else { fixes }
}

fn stopped_by_error(error: &Error) -> Finding {
    let text = error.to_string();
    let mut lines = text.lines();
    let mut finding = Finding::new(
        "forward-failed",
        Severity::Error,
        format!("forward returned an error: {}", lines.next().unwrap_or_default()),
    );
    let location = error.location();
    let at = location.map(|l| format!("at {}:{}:{}", l.file(), l.line(), l.column()));
    for line in lines.map(str::trim).filter(|l| Some(*l) != at.as_deref()) {
        finding = finding.detail(line);
    }
    if let Some(location) = location {
        finding = finding.at(location, "failed here");
    }
    let help = miette::Diagnostic::help(error).map(|h| h.to_string()).unwrap_or_default();
    finding.help(format!("the dry run stopped here; everything before it was checked. {help}"))
}

/// A panic's message is often a rendered report itself (operator sugar panics with one): its
/// `×` line is the summary, the rest are details.
fn stopped_by_panic(message: &str) -> Finding {
    let lines: Vec<&str> = message.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let summary_at = lines.iter().position(|l| l.contains('×')).unwrap_or(0);
    let summary = lines.get(summary_at).map_or("", |l| l.split_once("× ").map_or(*l, |(_, s)| s)).trim();
    let mut finding = Finding::new("forward-failed", Severity::Error, format!("forward panicked: {summary}"));
    for line in lines.iter().skip(summary_at + 1) {
        finding = finding.detail(line.trim_start_matches(['│', ' ']));
    }
    finding.help("the dry run stopped at the panic; everything before it was checked")
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// A fake input on its device (the target unless the input says otherwise), named and with the
/// input's origin.
fn fake_input(input: &Input, target: Device, location: &'static Location<'static>) -> Result<Tensor> {
    if checked_nbytes(&input.shape, input.dtype.size_in_bytes()).is_none() {
        return Err(Error::InvalidArgument {
            op: "check_forward",
            detail: format!(
                "input `{}` has shape {}, more elements than fit in memory",
                input.name,
                fmt_shape(&input.shape)
            ),
            help: "give the shape of one real batch".to_string(),
            location,
        });
    }
    let tensor = fake_tensor(&input.shape, input.dtype, input.device.unwrap_or(target), input.origin);
    tensor.set_label(&input.name, TensorRole::Input);
    Ok(tensor)
}

/// A tensor without data: what a move of `shape`/`dtype` to `device` would give.
fn fake_tensor(shape: &[usize], dtype: DType, device: Device, origin: Origin) -> Tensor {
    Tensor::from_parts(Storage::Fake, Layout::contiguous(shape), dtype, device, origin)
}

/// A fake copy of a model tensor on `device`, labelled with its path and role.
fn fake_copy(tensor: &Tensor, device: Device, name: &str, role: TensorRole) -> Tensor {
    let copy = fake_tensor(tensor.shape(), tensor.dtype(), device, tensor.origin());
    copy.set_label(name, role);
    copy
}

/// Swaps fake tensors on the target into a model, keeping every original to put back (see
/// [`check_forward`]).
struct FakePlacement {
    target: Device,
    /// The fake parameter standing in for each original one (tied weights share it).
    fakes: HashMap<ParamId, Param>,
    params: HashMap<String, Param>,
    buffers: HashMap<String, Tensor>,
    skipped: HashMap<String, SkippedOriginal>,
}

/// What a skipped tensor field held before the run.
enum SkippedOriginal {
    Field(Tensor),
    OptionalField(Option<Tensor>),
}

impl FakePlacement {
    fn new(target: Device) -> FakePlacement {
        FakePlacement {
            target,
            fakes: HashMap::new(),
            params: HashMap::new(),
            buffers: HashMap::new(),
            skipped: HashMap::new(),
        }
    }

    /// Puts every original back. Paths forward added are left as forward made them; paths it
    /// removed have nothing to restore.
    fn restore<M: Module + ?Sized>(self, model: &mut M) {
        let mut restore = Restore { params: self.params, buffers: self.buffers, skipped: self.skipped };
        // The visitor never fails; a hand-written `visit_mut` that does cannot be helped here.
        let _ = model.walk_mut(&mut restore);
    }

    fn fake_param(&self, original: &Param, path: &str) -> Result<Param> {
        let fake = Param::new(fake_copy(&original.tensor(), self.target, path, TensorRole::Parameter));
        fake.set_requires_grad(original.requires_grad());
        if let Some(grad) = original.grad() {
            fake.set_grad(Some(fake_copy(&grad, self.target, path, TensorRole::Parameter)))?;
        }
        for key in original.state_keys() {
            if let Some(state) = original.state(&key) {
                fake.set_state(key, fake_copy(&state, self.target, path, TensorRole::Parameter))?;
            }
        }
        Ok(fake)
    }
}

impl VisitorMut for FakePlacement {
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        let fake = match self.fakes.get(&param.id()) {
            // A tied parameter: the same fake under every path.
            Some(fake) => fake.share(),
            None => {
                let fake = self.fake_param(param, path.as_str())?;
                self.fakes.insert(param.id(), fake.share());
                fake
            }
        };
        self.params.insert(path.to_string(), std::mem::replace(param, fake));
        Ok(())
    }

    fn visit_buffer(
        &mut self,
        path: &ModulePath,
        tensor: &mut Tensor,
        persistence: Persistence,
    ) -> Result<()> {
        let fake = fake_copy(tensor, self.target, path.as_str(), buffer_role(persistence));
        self.buffers.insert(path.to_string(), std::mem::replace(tensor, fake));
        Ok(())
    }

    fn visit_skipped(&mut self, path: &ModulePath, skipped: SkippedMut<'_>) -> Result<()> {
        // Not moved, as `to` would not move it; labelled, so mismatches it causes say which field.
        label_skipped(path, &skipped.as_skipped());
        let original = match skipped.value {
            SkippedValue::TensorField(tensor) => SkippedOriginal::Field(tensor.clone()),
            SkippedValue::OptionalTensorField(tensor) => SkippedOriginal::OptionalField(tensor.clone()),
            SkippedValue::Module(_) | SkippedValue::Other => return Ok(()),
        };
        self.skipped.insert(path.to_string(), original);
        Ok(())
    }
}

/// Puts a model's own tensors back after a dry run.
struct Restore {
    params: HashMap<String, Param>,
    buffers: HashMap<String, Tensor>,
    skipped: HashMap<String, SkippedOriginal>,
}

impl VisitorMut for Restore {
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        if let Some(original) = self.params.remove(path.as_str()) {
            *param = original;
        }
        Ok(())
    }

    fn visit_buffer(&mut self, path: &ModulePath, tensor: &mut Tensor, _: Persistence) -> Result<()> {
        if let Some(original) = self.buffers.remove(path.as_str()) {
            *tensor = original;
        }
        Ok(())
    }

    fn visit_skipped(&mut self, path: &ModulePath, skipped: SkippedMut<'_>) -> Result<()> {
        match (skipped.value, self.skipped.remove(path.as_str())) {
            (SkippedValue::TensorField(tensor), Some(SkippedOriginal::Field(original))) => *tensor = original,
            (SkippedValue::OptionalTensorField(tensor), Some(SkippedOriginal::OptionalField(original))) => {
                *tensor = original
            }
            _ => {}
        }
        Ok(())
    }
}
