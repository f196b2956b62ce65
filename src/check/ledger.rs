//! `devcheck::trace`: the transfer ledger of a real run. Every copy between devices (direction,
//! bytes, the tensor's origin, the call site), every host read (`to_vec`, `to_scalar`, which are
//! syncs on an accelerator) and every allocation per device, aggregated by call site; and the
//! patterns that waste time: round trips, the same data uploaded again and again, syncs in a loop.
//!
//! Inside a fake scope moves are recorded too (without data), which is how the ledger's logic is
//! tested on a machine without a GPU; there, host reads of fake tensors are answered with zeros.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::Location;
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::error::{Operand, Result};

use super::recorder::{Mode, Recording, RepeatedMove, RoundTrip};
use super::report::{
    CheckError, Finding, Severity, Table, any_problem, count_by_severity, fmt_bytes, fmt_count,
};

/// A line that reads from an accelerator this many times in one trace is reported as a sync in a
/// loop.
pub const SYNC_REPEATS: usize = 3;

/// Tensors made and their bytes on one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allocations {
    /// Tensors whose elements were allocated.
    pub tensors: usize,
    /// Bytes of element data allocated.
    pub bytes: usize,
    /// Fake tensors (shape and dtype only) made: what a real run would allocate.
    pub fake_tensors: usize,
    /// Bytes the fake tensors stand for (none of them allocated).
    pub fake_bytes: usize,
}

/// The copies between two devices made at one call site.
#[derive(Clone, Debug)]
pub struct Transfer {
    pub call_site: &'static Location<'static>,
    pub from: Device,
    pub to: Device,
    pub count: usize,
    /// All of them together.
    pub bytes: usize,
    /// The first tensor copied here: name, shape, dtype and origin.
    pub tensor: Operand,
    /// Dry runs: the tensor belongs to the model (a parameter, buffer or skipped field).
    pub from_model: bool,
}

impl Transfer {
    /// `cpu -> cuda:0`
    pub fn direction(&self) -> String {
        format!("{} -> {}", self.from, self.to)
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "call_site": location(self.call_site),
            "from": self.from.to_string(),
            "to": self.to.to_string(),
            "count": self.count,
            "bytes": self.bytes,
            "tensor": operand_json(&self.tensor),
        })
    }
}

/// Host reads (`to_vec`, `to_scalar`, `to_raw_bytes`) made at one call site from one device.
#[derive(Clone, Debug)]
pub struct HostRead {
    pub call_site: &'static Location<'static>,
    pub op: &'static str,
    pub device: Device,
    pub count: usize,
    pub bytes: usize,
    /// Reads of fake tensors, answered with zeros.
    pub without_data: usize,
    /// The first tensor read here.
    pub tensor: Operand,
}

impl HostRead {
    /// A read from an accelerator waits for it to finish all queued work.
    pub fn is_sync(&self) -> bool {
        !self.device.is_cpu()
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "call_site": location(self.call_site),
            "op": self.op,
            "device": self.device.to_string(),
            "count": self.count,
            "bytes": self.bytes,
            "sync": self.is_sync(),
            "without_data": self.without_data,
            "tensor": operand_json(&self.tensor),
        })
    }
}

/// What [`trace`] recorded.
#[derive(Clone, Debug)]
pub struct TraceReport {
    transfers: Vec<Transfer>,
    reads: Vec<HostRead>,
    allocations: BTreeMap<Device, Allocations>,
    findings: Vec<Finding>,
    elapsed: Duration,
}

/// Runs `run` on this thread and records every copy between devices, host read and allocation
/// it makes, with findings for round trips (data moved A→B and back to A), the same data moved
/// to the same device more than once (an upload inside a loop that belongs before it), and lines
/// that read from an accelerator at least [`SYNC_REPEATS`] times (a sync in a loop).
///
/// Records are kept per call site, so a trace over a long run stays small. Work on other threads
/// is not recorded. Traces nest: an inner trace (or dry run) suspends the outer one.
///
/// ```
/// use devcheck::{Device, Tensor};
///
/// # fn main() -> devcheck::Result<()> {
/// let (sum, report) = devcheck::trace(|| -> devcheck::Result<f32> {
///     let x = Tensor::ones([4], &Device::Cpu)?;
///     x.sum_all()?.to_scalar::<f32>()
/// });
/// assert_eq!(sum?, 4.0);
/// assert_eq!(report.allocations()[&Device::Cpu].tensors, 2);
/// assert!(report.transfers().is_empty() && report.is_clean());
/// # Ok(())
/// # }
/// ```
pub fn trace<R>(run: impl FnOnce() -> R) -> (R, TraceReport) {
    let started = Instant::now();
    let recording = Recording::start(Mode::Trace);
    let value = run();
    let recorder = recording.finish();
    let elapsed = started.elapsed();

    let mut findings: Vec<Finding> = recorder.round_trips.iter().map(round_trip).collect();
    findings.extend(recorder.repeated.iter().map(repeated_move));
    findings
        .extend(recorder.reads.iter().filter(|r| r.is_sync() && r.count >= SYNC_REPEATS).map(sync_in_loop));
    let report = TraceReport {
        transfers: recorder.transfers.clone(),
        reads: recorder.reads.clone(),
        allocations: recorder.allocations.clone(),
        findings,
        elapsed,
    };
    (value, report)
}

impl TraceReport {
    /// Copies between devices, per call site and direction, in the order first seen.
    pub fn transfers(&self) -> &[Transfer] {
        &self.transfers
    }

    /// Host reads per call site, op and device.
    pub fn host_reads(&self) -> &[HostRead] {
        &self.reads
    }

    /// Host reads from an accelerator (each waits for the device).
    pub fn syncs(&self) -> impl Iterator<Item = &HostRead> {
        self.reads.iter().filter(|r| r.is_sync())
    }

    /// Tensors allocated per device (moves and op results included).
    pub fn allocations(&self) -> &BTreeMap<Device, Allocations> {
        &self.allocations
    }

    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Bytes copied between devices in total.
    pub fn bytes_transferred(&self) -> usize {
        self.transfers.iter().map(|t| t.bytes).sum()
    }

    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// No errors or warnings.
    pub fn is_clean(&self) -> bool {
        !any_problem(&self.findings)
    }

    /// `Ok(self)` when clean, otherwise the report as an error, for `?`.
    pub fn ensure_clean(self) -> Result<TraceReport> {
        if self.is_clean() { Ok(self) } else { Err(self.to_error().into()) }
    }

    /// The findings as one report error.
    pub fn to_error(&self) -> CheckError {
        CheckError::new(
            "trace",
            format!("trace: {}", count_by_severity(&self.findings)),
            self.summary_lines(),
            "move data once, at the boundary of the loop; keep it on the device while it is worked on",
            self.findings.clone(),
        )
    }

    /// The full report without colour at `width` columns.
    pub fn render(&self, width: usize) -> String {
        self.to_error().render(width)
    }

    /// For tools: `{transfers, host_reads, allocations, findings}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "transfers": self.transfers.iter().map(Transfer::to_json).collect::<Vec<_>>(),
            "host_reads": self.reads.iter().map(HostRead::to_json).collect::<Vec<_>>(),
            "allocations": allocations_json(&self.allocations),
            "findings": self.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
            "bytes_transferred": self.bytes_transferred(),
        })
    }

    fn summary_lines(&self) -> Vec<String> {
        let copies: usize = self.transfers.iter().map(|t| t.count).sum();
        let syncs: usize = self.syncs().map(|r| r.count).sum();
        let allocated: usize = self.allocations.values().map(|a| a.tensors + a.fake_tensors).sum();
        vec![format!(
            "{} copies between devices ({}), {} syncs, {} tensors allocated",
            fmt_count(copies),
            fmt_bytes(self.bytes_transferred()),
            fmt_count(syncs),
            fmt_count(allocated)
        )]
    }
}

impl fmt::Display for TraceReport {
    /// The summary, then tables of transfers, host reads and allocations, then the findings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "trace: {}", self.summary_lines().join("; "))?;
        if !self.transfers.is_empty() {
            writeln!(f, "transfers:")?;
            let mut table = Table::new(&[
                ("call site", false),
                ("direction", false),
                ("count", true),
                ("bytes", true),
                ("tensor", false),
            ]);
            for t in &self.transfers {
                table.row(vec![
                    location(t.call_site),
                    t.direction(),
                    fmt_count(t.count),
                    fmt_bytes(t.bytes),
                    describe(&t.tensor),
                ]);
            }
            table.write(f, "  ")?;
        }
        if !self.reads.is_empty() {
            writeln!(f, "host reads:")?;
            let mut table = Table::new(&[
                ("call site", false),
                ("op", false),
                ("device", false),
                ("count", true),
                ("bytes", true),
                ("sync", false),
            ]);
            for r in &self.reads {
                table.row(vec![
                    location(r.call_site),
                    r.op.to_string(),
                    r.device.to_string(),
                    fmt_count(r.count),
                    fmt_bytes(r.bytes),
                    if r.is_sync() { "yes".into() } else { "no".into() },
                ]);
            }
            table.write(f, "  ")?;
        }
        write_allocations(f, &self.allocations)?;
        write!(f, "findings: {}", count_by_severity(&self.findings))?;
        for finding in &self.findings {
            write!(f, "\n  {}", finding.one_line())?;
        }
        Ok(())
    }
}

fn write_allocations(f: &mut fmt::Formatter<'_>, allocations: &BTreeMap<Device, Allocations>) -> fmt::Result {
    if allocations.is_empty() {
        return Ok(());
    }
    writeln!(f, "allocations:")?;
    let mut table = Table::new(&[
        ("device", false),
        ("tensors", true),
        ("bytes", true),
        ("fake tensors", true),
        ("fake bytes", true),
    ]);
    for (device, a) in allocations {
        table.row(vec![
            device.to_string(),
            fmt_count(a.tensors),
            fmt_bytes(a.bytes),
            fmt_count(a.fake_tensors),
            fmt_bytes(a.fake_bytes),
        ]);
    }
    table.write(f, "  ")
}

pub(crate) fn allocations_json(allocations: &BTreeMap<Device, Allocations>) -> serde_json::Value {
    allocations
        .iter()
        .map(|(device, a)| {
            (
                device.to_string(),
                serde_json::json!({
                    "tensors": a.tensors,
                    "bytes": a.bytes,
                    "fake_tensors": a.fake_tensors,
                    "fake_bytes": a.fake_bytes,
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn round_trip(trip: &RoundTrip) -> Finding {
    Finding::new(
        "round-trip",
        Severity::Warning,
        format!(
            "{} went {} -> {} -> {}: it came back to where it was",
            describe_short(&trip.tensor),
            trip.home,
            trip.away,
            trip.home
        ),
    )
    .at(trip.back_site, format!("copied back to {} here", trip.home))
    .detail(format!("copied to {} at {}", trip.away, location(trip.out_site)))
    .detail(format!("{} each way per trip", fmt_bytes(trip.bytes / trip.count.max(1))))
    .detail(trip.tensor.to_string())
    .times(trip.count)
    .help(format!(
        "keep the data on {} and drop both copies; if the host needs the values, read them from a copy \
         and keep using the original",
        trip.home
    ))
}

fn repeated_move(repeated: &RepeatedMove) -> Finding {
    Finding::new(
        "repeated-upload",
        Severity::Warning,
        format!(
            "the same data ({}) is copied to {} again and again",
            describe_short(&repeated.tensor),
            repeated.to
        ),
    )
    .at(repeated.call_site, format!("copied to {} again here", repeated.to))
    .detail(format!("{} in total", fmt_bytes(repeated.bytes)))
    .detail(repeated.tensor.to_string())
    .times(repeated.count)
    .help(
        "copy it once, before the loop, and reuse the copy; a constant of a model belongs in a buffer \
         (a `Tensor` field), which `model.to(..)` moves once",
    )
}

fn sync_in_loop(read: &HostRead) -> Finding {
    Finding::new(
        "sync-in-loop",
        Severity::Warning,
        format!(
            "`{}` reads {} from {} again and again: each read waits for the device",
            read.op,
            describe_short(&read.tensor),
            read.device
        ),
    )
    .at(read.call_site, "reads here")
    .detail(read.tensor.to_string())
    .times(read.count)
    .help(
        "accumulate on the device (`total = total.add(&loss)?`) and read once per logging interval; \
         every read is a synchronisation point that stalls the queue of kernels",
    )
}

/// `` `batch.x` `` or `a tensor made by `from_vec``.
fn describe_short(operand: &Operand) -> String {
    match &operand.name {
        Some(name) => format!("`{name}`"),
        None => format!("a tensor made by `{}`", operand.origin.op()),
    }
}

/// For tables: name (or op) and origin.
fn describe(operand: &Operand) -> String {
    format!("{} at {}", describe_short(operand), operand.origin.location_string())
}

fn location(l: &'static Location<'static>) -> String {
    format!("{}:{}:{}", l.file(), l.line(), l.column())
}

fn operand_json(o: &Operand) -> serde_json::Value {
    serde_json::json!({
        "name": o.name,
        "device": o.device.to_string(),
        "dtype": o.dtype.to_string(),
        "shape": o.shape,
        "origin": o.origin.location_string(),
        "origin_op": o.origin.op(),
    })
}
