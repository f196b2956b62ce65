//! `devcheck::check_forward`: a dry run of forward (or of a whole training step) on a fake
//! device, with no GPU and no element data.
//!
//! See [`check_forward`] for how the fake model is made and what happens during the run.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, Location};
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Operand, Result};
use crate::module::{Module, ModulePath, Param, ParamId, Persistence, Skipped, VisitorMut, short_type_name};
use crate::shape::{Layout, checked_nbytes, fmt_shape};
use crate::tensor::{Origin, Storage, Tensor};

use super::inventory::inspect;
use super::ledger::{Allocations, HostRead, Transfer};
use super::recorder::{CreationSite, MismatchSite, Mode, Provenance, Recording};
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

/// Dry-runs `forward` with a fake copy of `model` on `target` (any `cuda:N`, no GPU needed) and
/// fake `inputs`, and reports every tensor created off the target (with the line and op that made
/// it), every device mismatch (each operand with its module path and origin), every host read
/// inside forward ("needs data at file:line"), and skipped tensor fields left off the target.
///
/// `forward` gets the fake model and the fake inputs, in the order given; it can be a bare
/// `|model, x| model.forward(&x[0])` or a whole training step (give the batch
/// `Input::new(..).on(&Device::Cpu)` to check that the step moves it). An error or panic inside
/// it ends the run and is reported as a finding. The caller's model is not changed.
///
/// Returns `Err` only when the inputs themselves are invalid. Use
/// [`ForwardReport::ensure_clean`] to turn problems into an error for `?`.
///
/// Tip: a dry run on `cuda:1` also catches code that hard-codes `cuda:0`.
///
/// # How the fake model is made
///
/// The model is cloned, and in the clone every parameter is replaced by a *new* parameter (a new
/// [`Param`] cell, tied weights kept tied) holding a fake tensor on the target, and every buffer by
/// a fake tensor on the target: what `model.to(&target)` would give, without data. Skipped fields
/// are left as they are, exactly as `to` leaves them. Replacing the cells (rather than moving the
/// model in place and restoring it) leaves the caller's model, and every optimizer holding its
/// parameters, untouched, even when forward writes to the model (a cache, running statistics).
/// Cloning a model clones handles, not data; hence `M: Clone`.
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
/// #[derive(Module, Clone)]
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
/// let model = Scale { weight: Param::new(Tensor::ones([4], &Device::Cpu)?) };
/// let report = devcheck::check_forward(
///     &model,
///     &[Input::new("x", [2, 4], DType::F32)],
///     &Device::Cuda(0),
///     |model, x| model.forward(&x[0]),
/// )?;
/// let codes: Vec<&str> = report.findings().iter().map(|f| f.code()).collect();
/// assert_eq!(codes, ["created-off-device", "device-mismatch"]);
/// assert_eq!(report.data_bytes(), 0);
/// # Ok(())
/// # }
/// ```
#[track_caller]
pub fn check_forward<M, R>(
    model: &M,
    inputs: impl AsRef<[Input]>,
    target: &Device,
    forward: impl FnOnce(&mut M, &[Tensor]) -> Result<R>,
) -> Result<ForwardReport>
where
    M: Module + Clone,
{
    let started = Instant::now();
    let location = Location::caller();
    let target = *target;
    let inputs = inputs.as_ref();
    let fake_inputs =
        inputs.iter().map(|input| fake_input(input, target, location)).collect::<Result<Vec<_>>>()?;

    let _fake = crate::fake::enter();
    let mut fake_model = model.clone();
    fake_model.walk_mut(&mut FakePlacement { target, params: Default::default() })?;
    let placed = inspect(&fake_model);

    let recording = Recording::start(Mode::DryRun { target });
    recording.name_storages(fake_model.entries().into_iter().filter_map(|e| Some((e.path, e.tensor?))), true);
    recording.name_storages(inputs.iter().zip(&fake_inputs).map(|(i, t)| (i.name.clone(), t.clone())), false);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| forward(&mut fake_model, &fake_inputs)));
    let recorder = *recording.finish();

    let mut findings: Vec<Finding> = placed
        .findings()
        .iter()
        .filter(|f| f.code() == "skipped-tensor" && f.severity() == Severity::Error)
        .cloned()
        .collect();
    findings.extend(recorder.creations.iter().map(|c| creation_finding(c, target)));
    findings.extend(mismatch_findings(&recorder.mismatches, target));
    findings.extend(recorder.reads.iter().map(|r| read_finding(r, target)));
    findings.extend(recorder.transfers.iter().filter_map(|t| transfer_finding(t, target)));
    match outcome {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => findings.push(stopped_by_error(&error)),
        Err(panic) => findings.push(stopped_by_panic(&panic_message(&*panic))),
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
    .help(format!(
        "create it on an input's device so it follows the model everywhere: `x.new_zeros(..)`, \
         `x.new_tensor(..)`, `Tensor::ones_like(&x)`, or pass `&x.device()`; a constant can be a \
         buffer (a `Tensor` field), which `model.to(&{})` moves once",
        crate::module::device_expr(&target)
    ))
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

/// The fix for each operand off the target, by where it comes from.
fn mismatch_help(site: &MismatchSite, target: Device) -> String {
    let mut fixes = Vec::new();
    for (operand, provenance) in site.operands.iter().zip(&site.provenance) {
        if operand.device == target {
            continue;
        }
        let who = match &operand.name {
            Some(name) => format!("`{name}`"),
            None => format!("the {} made at {}", operand.role, operand.origin.location_string()),
        };
        fixes.push(match provenance {
            Provenance::Input => format!(
                "move {who} to {target} right after the loader yields it (`let x = x.to(&device)?;`: `to` \
                 returns the moved tensor)"
            ),
            Provenance::Model => format!(
                "{who} belongs to the model but `model.to(..)` does not move it: make the field a buffer \
                 (drop `#[module(skip)]`; `#[module(non_persistent)]` keeps it out of checkpoints)"
            ),
            Provenance::Forward => format!(
                "create {who} on an input's device: `x.new_zeros(..)`, `x.new_tensor(..)`, \
                 `Tensor::zeros_like(&x)`, or pass `&x.device()`"
            ),
        });
    }
    if fixes.is_empty() {
        fixes.push(format!("bring every operand to {target}"));
    }
    fixes.join("; ")
}

fn stopped_by_error(error: &Error) -> Finding {
    let text = error.to_string();
    let mut lines = text.lines();
    let mut finding = Finding::new(
        "forward-failed",
        Severity::Error,
        format!("forward returned an error: {}", lines.next().unwrap_or_default()),
    );
    let location = error_location(error);
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

/// The failing call of an op error.
fn error_location(error: &Error) -> Option<&'static Location<'static>> {
    match error {
        Error::DeviceMismatch { location, .. }
        | Error::ShapeMismatch { location, .. }
        | Error::DTypeMismatch { location, .. }
        | Error::InvalidArgument { location, .. }
        | Error::NoData { location, .. }
        | Error::NotOnHost { location, .. }
        | Error::Unsupported { location, .. } => Some(location),
        _ => None,
    }
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
    tensor.set_name(input.name.as_str());
    Ok(tensor)
}

/// A tensor without data: what a move of `shape`/`dtype` to `device` would give.
fn fake_tensor(shape: &[usize], dtype: DType, device: Device, origin: Origin) -> Tensor {
    Tensor::from_parts(Storage::Fake, Layout::contiguous(shape), dtype, device, origin)
}

fn fake_copy(tensor: &Tensor, device: Device, name: &str) -> Tensor {
    let copy = fake_tensor(tensor.shape(), tensor.dtype(), device, tensor.origin());
    copy.set_name(name);
    copy
}

/// Gives the cloned model fake tensors on the target in new cells (see the module docs).
struct FakePlacement {
    target: Device,
    params: std::collections::HashMap<ParamId, Param>,
}

impl VisitorMut for FakePlacement {
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        if let Some(placed) = self.params.get(&param.id()) {
            // A tied parameter: the same new cell under every path.
            *param = placed.clone();
            return Ok(());
        }
        let placed = Param::new(fake_copy(&param.tensor(), self.target, path.as_str()));
        placed.set_requires_grad(param.requires_grad());
        if let Some(grad) = param.grad() {
            placed.set_grad(Some(fake_copy(&grad, self.target, path.as_str())))?;
        }
        for key in param.state_keys() {
            if let Some(state) = param.state(&key) {
                placed.set_state(key, fake_copy(&state, self.target, path.as_str()))?;
            }
        }
        self.params.insert(param.id(), placed.clone());
        *param = placed;
        Ok(())
    }

    fn visit_buffer(&mut self, path: &ModulePath, tensor: &mut Tensor, _: Persistence) -> Result<()> {
        *tensor = fake_copy(tensor, self.target, path.as_str());
        Ok(())
    }

    fn visit_skipped(&mut self, path: &ModulePath, skipped: Skipped<'_>) -> Result<()> {
        // Not moved, as `to` would not move it; named, so mismatches it causes say which field.
        if let Some(tensor) = skipped.tensor {
            tensor.set_name(path.as_str());
        }
        Ok(())
    }
}
