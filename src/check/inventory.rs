//! `devcheck::inspect(&model)`: every parameter, buffer and skipped field with its device, as a
//! table a person reads at a glance and as JSON for tools, with findings for what a move will
//! not fix by itself.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::module::{EntryKind, Module, ParamId, short_type_name};
use crate::shape::fmt_shape;
use crate::tensor::{Origin, SkippedField, Tensor};

use super::report::{
    CheckError, Finding, Severity, Table, any_problem, count_by_severity, fmt_bytes, fmt_count,
};

/// Stragglers listed one by one; the rest are counted.
const LISTED: usize = 8;

/// The inventory of a model: see [`inspect`].
#[derive(Clone, Debug)]
pub struct Inventory {
    module: String,
    rows: Vec<InventoryRow>,
    totals: Vec<DeviceTotals>,
    findings: Vec<Finding>,
}

/// One parameter, buffer or skipped field.
#[derive(Clone, Debug)]
pub struct InventoryRow {
    /// Dotted path: `blocks.0.attn.mask`.
    pub path: String,
    pub kind: EntryKind,
    /// `None` for a skipped field that is not a tensor.
    pub tensor: Option<TensorFacts>,
    /// For a parameter reachable under two paths: the first path (its bytes count once).
    pub tied_to: Option<String>,
    /// For a skipped field: its Rust type as written.
    pub type_name: Option<&'static str>,
    /// For a skipped field: false when its type is plain data that cannot hold tensors.
    pub may_hold_tensors: bool,
    /// For a skipped field, and for a tensor inside a skipped submodule: the field marked
    /// `#[module(skip)]`.
    pub skipped_field: Option<SkippedField>,
}

impl InventoryRow {
    /// A tensor inside a skipped submodule (not the skipped field itself).
    pub fn is_inside_skipped(&self) -> bool {
        self.skipped_field.as_ref().is_some_and(|field| field.path != self.path)
    }
}

/// What the inventory shows of a tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorFacts {
    pub device: Device,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub numel: usize,
    pub bytes: usize,
    /// A dry-run tensor without element data.
    pub fake: bool,
    pub origin: Origin,
}

impl TensorFacts {
    pub(crate) fn of(tensor: &Tensor) -> TensorFacts {
        TensorFacts {
            device: tensor.device(),
            dtype: tensor.dtype(),
            shape: tensor.shape().to_vec(),
            numel: tensor.numel(),
            bytes: tensor.nbytes(),
            fake: tensor.is_fake(),
            origin: tensor.origin(),
        }
    }
}

/// The tensors and bytes on one device (tied parameters once; skipped fields included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceTotals {
    pub device: Device,
    pub tensors: usize,
    /// Elements of parameters (trainable).
    pub parameter_elements: usize,
    pub bytes: usize,
}

/// Walks `model` and lists every parameter, buffer and skipped field with its path, kind, device,
/// dtype, shape, element count and bytes; totals per device; and findings: tensors on a device
/// other than the rest (named, with the line that made them), and skipped tensor fields, which
/// `model.to(..)` does not move.
///
/// ```
/// use devcheck::{Device, Module, Param, Tensor};
///
/// #[derive(Module)]
/// struct Net { weight: Param, #[module(skip)] pos_enc: Tensor }
///
/// # fn main() -> devcheck::Result<()> {
/// let net = Net {
///     weight: Param::new(Tensor::zeros([4, 4], &Device::Cpu)?),
///     pos_enc: Tensor::zeros([4], &Device::Cpu)?,
/// };
/// let inventory = devcheck::inspect(&net);
/// assert_eq!(inventory.rows().len(), 2);
/// assert_eq!(inventory.findings()[0].code(), "skipped-tensor");
/// println!("{inventory}");
/// # Ok(())
/// # }
/// ```
pub fn inspect<M: Module + ?Sized>(model: &M) -> Inventory {
    let module = short_type_name(model.module_name());
    let mut rows = Vec::new();
    let mut first_path: HashMap<ParamId, String> = HashMap::new();
    for entry in model.entries() {
        let tied_to = entry.param.as_ref().and_then(|p| match first_path.get(&p.id()) {
            Some(first) => Some(first.clone()),
            None => {
                first_path.insert(p.id(), entry.path.clone());
                None
            }
        });
        rows.push(InventoryRow {
            path: entry.path,
            kind: entry.kind,
            tensor: entry.tensor.as_ref().map(TensorFacts::of),
            tied_to,
            type_name: entry.type_name.filter(|_| entry.kind == EntryKind::Skipped),
            may_hold_tensors: entry.may_hold_tensors,
            skipped_field: entry.skipped_field,
        });
    }
    let totals = totals(&rows);
    let mut inventory = Inventory { module, rows, totals, findings: Vec::new() };
    inventory.findings = inventory.placement_findings(None);
    inventory
}

impl Inventory {
    /// The model's type name.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// Every parameter, buffer and skipped field, in visit order.
    pub fn rows(&self) -> &[InventoryRow] {
        &self.rows
    }

    /// Per device, most bytes first.
    pub fn totals(&self) -> &[DeviceTotals] {
        &self.totals
    }

    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// The device most of the moved tensors (parameters and buffers) are on.
    pub fn main_device(&self) -> Option<Device> {
        main_device(&self.rows)
    }

    /// No errors or warnings.
    pub fn is_clean(&self) -> bool {
        !any_problem(&self.findings)
    }

    /// `Ok(self)` when clean, otherwise the report as an error (for `?`).
    pub fn ensure_clean(self) -> Result<Inventory> {
        if self.is_clean() { Ok(self) } else { Err(self.to_error().into()) }
    }

    /// The findings as one report error.
    pub fn to_error(&self) -> CheckError {
        CheckError::new(
            "inventory",
            format!("`{}` has {}", self.module, count_by_severity(&self.findings)),
            self.summary_lines(),
            "`model.to(&device)` moves every parameter and buffer; tensors it does not reach are \
             skipped fields or were assigned after the last move",
            self.findings.clone(),
        )
    }

    /// Checks that every tensor of the model, skipped fields included, is on `device`: the
    /// report names each one that is not, with the line that made it.
    pub fn expect_device(&self, device: &Device) -> std::result::Result<(), CheckError> {
        let findings = self.placement_findings(Some(*device));
        if !any_problem(&findings) {
            return Ok(());
        }
        let elsewhere = self
            .rows
            .iter()
            .filter(|r| r.tied_to.is_none() && r.tensor.as_ref().is_some_and(|t| t.device != *device))
            .count();
        let total = self.rows.iter().filter(|r| r.tied_to.is_none() && r.tensor.is_some()).count();
        Err(CheckError::new(
            "not_on_device",
            format!(
                "`{}` is not entirely on {device}: {elsewhere} of {total} tensors are elsewhere",
                self.module
            ),
            self.summary_lines(),
            format!(
                "call `model.to(&{})` after building or loading the model and after assigning tensor \
                 fields; it moves every parameter and buffer (not `#[module(skip)]` fields)",
                crate::device::device_expr(device)
            ),
            findings,
        ))
    }

    /// The full report without colour at `width` columns.
    pub fn render(&self, width: usize) -> String {
        self.to_error().render(width)
    }

    /// For tools: `{module, tensors: [...], totals: [...], findings: [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let tensors: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|row| {
                let t = row.tensor.as_ref();
                serde_json::json!({
                    "path": row.path,
                    "kind": row.kind.as_str(),
                    "device": t.map(|t| t.device.to_string()),
                    "dtype": t.map(|t| t.dtype.to_string()),
                    "shape": t.map(|t| t.shape.clone()),
                    "numel": t.map(|t| t.numel),
                    "bytes": t.map(|t| t.bytes),
                    "fake": t.map(|t| t.fake),
                    "origin": t.map(|t| t.origin.location_string()),
                    "origin_op": t.map(|t| t.origin.op()),
                    "tied_to": row.tied_to,
                    "type": row.type_name,
                })
            })
            .collect();
        let totals: Vec<serde_json::Value> = self
            .totals
            .iter()
            .map(|t| {
                serde_json::json!({
                    "device": t.device.to_string(),
                    "tensors": t.tensors,
                    "parameter_elements": t.parameter_elements,
                    "bytes": t.bytes,
                })
            })
            .collect();
        serde_json::json!({
            "module": self.module,
            "tensors": tensors,
            "totals": totals,
            "findings": self.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
        })
    }

    fn summary_lines(&self) -> Vec<String> {
        self.totals
            .iter()
            .map(|t| format!("{}: {} tensors, {}", t.device, fmt_count(t.tensors), fmt_bytes(t.bytes)))
            .collect()
    }

    /// Findings about where tensors are. `expected`: the device everything must be on
    /// (`assert_on_device!`); `None`: the most populated device, and odd ones out are reported.
    fn placement_findings(&self, expected: Option<Device>) -> Vec<Finding> {
        let mut findings = Vec::new();
        let main = expected.or_else(|| self.main_device());
        let moved: Vec<&InventoryRow> = self
            .rows
            .iter()
            .filter(|r| r.kind != EntryKind::Skipped && r.tied_to.is_none() && r.tensor.is_some())
            .collect();
        let stragglers: Vec<&InventoryRow> = moved
            .iter()
            .copied()
            .filter(|r| Some(r.tensor.as_ref().map(|t| t.device)) != Some(main))
            .collect();

        if let (Some(main), false) = (main, stragglers.is_empty()) {
            match expected {
                // Against an expected device, each tensor elsewhere is its own finding, with the
                // line that made it.
                Some(device) => {
                    for row in stragglers.iter().take(LISTED) {
                        findings.push(off_device(row, device));
                    }
                    if stragglers.len() > LISTED {
                        findings.push(Finding::new(
                            "not-on-device",
                            Severity::Error,
                            format!("... and {} more tensors not on {device}", stragglers.len() - LISTED),
                        ));
                    }
                }
                None => findings.push(self.mixed_devices(main, &stragglers, moved.len())),
            }
        }

        for row in self.rows.iter().filter(|r| r.kind == EntryKind::Skipped && !r.is_inside_skipped()) {
            let type_name = row.type_name.unwrap_or("?");
            let inside: Vec<&InventoryRow> = self
                .rows
                .iter()
                .filter(|r| {
                    r.is_inside_skipped() && r.skipped_field.as_ref().is_some_and(|f| f.path == row.path)
                })
                .collect();
            match &row.tensor {
                Some(tensor) => findings.push(skipped_tensor(row, tensor, main)),
                None if !inside.is_empty() => findings.push(skipped_submodule(row, &inside)),
                None if row.may_hold_tensors => findings.push(
                    Finding::new(
                        "skipped-opaque",
                        Severity::Note,
                        format!(
                            "skipped field `{}: {type_name}` is not walked: tensors inside it are not moved \
                             or checked",
                            row.path
                        ),
                    )
                    .help(
                        "if it holds tensors, make it a submodule (derive `Module` for its type) so that \
                         `to` moves them",
                    ),
                ),
                None => {}
            }
        }
        findings
    }

    fn mixed_devices(&self, main: Device, stragglers: &[&InventoryRow], moved: usize) -> Finding {
        let mut per_device: BTreeMap<Device, usize> = BTreeMap::new();
        for row in stragglers {
            if let Some(t) = &row.tensor {
                *per_device.entry(t.device).or_default() += 1;
            }
        }
        let elsewhere: Vec<String> = per_device.iter().map(|(d, n)| format!("{n} on {d}")).collect();
        let first = stragglers[0];
        let mut finding = Finding::new(
            "mixed-devices",
            Severity::Error,
            format!(
                "`{}` is on {} devices: {} of {moved} tensors are on {main}, {}",
                self.module,
                per_device.len() + 1,
                moved - stragglers.len(),
                elsewhere.join(", ")
            ),
        );
        if let Some(t) = &first.tensor {
            finding = finding.at(t.origin.location(), format!("`{}` made here", first.path));
        }
        for row in stragglers.iter().take(LISTED) {
            if let Some(t) = &row.tensor {
                finding = finding.detail(format!(
                    "`{}` ({}) on {}, made by `{}` at {}",
                    row.path,
                    row.kind,
                    t.device,
                    t.origin.op(),
                    t.origin.location_string()
                ));
            }
        }
        if stragglers.len() > LISTED {
            finding = finding.detail(format!("... and {} more", stragglers.len() - LISTED));
        }
        finding.help(format!(
            "call `model.to(&{})` once after building or loading the model; tensors left elsewhere \
             were assigned to the model after its last move",
            crate::device::device_expr(&main)
        ))
    }
}

fn off_device(row: &InventoryRow, device: Device) -> Finding {
    let Some(t) = &row.tensor else {
        return Finding::new("not-on-device", Severity::Error, format!("`{}` is not on {device}", row.path));
    };
    Finding::new(
        "not-on-device",
        Severity::Error,
        format!("{} `{}` is on {}, not {device}", row.kind, row.path, t.device),
    )
    .at(t.origin.location(), format!("made by `{}` here", t.origin.op()))
    .detail(format!("{} {} {}", t.device, t.dtype, fmt_shape(&t.shape)))
    .help(format!(
        "a tensor assigned to the model after `model.to(..)` stays where it was made: assign it before \
         the move, or make it on the model's device (`Tensor::zeros(shape, &model.device()?)`, here {device})"
    ))
}

/// A submodule marked `#[module(skip)]` that holds tensors: its parameters are invisible to the
/// optimizer, and neither moved nor saved. Located at the field's declaration.
fn skipped_submodule(row: &InventoryRow, inside: &[&InventoryRow]) -> Finding {
    let parameters = inside.iter().filter(|r| r.type_name == Some("Param")).count();
    let tensors = inside.iter().filter(|r| r.tensor.is_some()).count();
    let (severity, what) = if parameters > 0 {
        (Severity::Error, super::report::plural(parameters, "parameter"))
    } else {
        (Severity::Warning, super::report::plural(tensors, "tensor"))
    };
    let names: Vec<String> = inside.iter().take(LISTED).map(|r| format!("`{}`", r.path)).collect();
    let more =
        if inside.len() > LISTED { format!(", ... {} more", inside.len() - LISTED) } else { String::new() };
    let mut finding = Finding::new(
        "skipped-submodule",
        severity,
        format!(
            "skipped field `{}: {}` holds {what} ({}{more}): `to` does not move them, checkpoints do not save \
             them{}",
            row.path,
            row.type_name.unwrap_or("?"),
            names.join(", "),
            if parameters > 0 { ", and `model.parameters()` (so the optimizer) never sees them" } else { "" }
        ),
    );
    if let Some(at) = row.skipped_field.as_ref().and_then(|f| f.declared_at) {
        finding = finding.at(at, "marked `#[module(skip)]`");
    }
    for inner in inside.iter().take(LISTED) {
        if let Some(t) = &inner.tensor {
            finding = finding.detail(format!(
                "`{}` ({}) {} {} {}, made by `{}` at {}",
                inner.path,
                if inner.type_name == Some("Param") { "parameter" } else { "buffer" },
                t.device,
                t.dtype,
                fmt_shape(&t.shape),
                t.origin.op(),
                t.origin.location_string()
            ));
        }
    }
    finding.help(format!(
        "remove `#[module(skip)]` from `{}`: a submodule field is walked, so its parameters and buffers move, \
         save and train with the model (to freeze it, call `set_requires_grad(false)` on its parameters)",
        row.path
    ))
}

fn skipped_tensor(row: &InventoryRow, tensor: &TensorFacts, main: Option<Device>) -> Finding {
    let (severity, message) = match main {
        Some(main) if main != tensor.device => (
            Severity::Error,
            format!(
                "skipped field `{}` is on {}, the rest of the model on {main}: `to` does not move it",
                row.path, tensor.device
            ),
        ),
        _ => (
            Severity::Warning,
            format!(
                "skipped field `{}` stays on {} when the model moves: `to` does not move it",
                row.path, tensor.device
            ),
        ),
    };
    Finding::new("skipped-tensor", severity, message)
        .at(tensor.origin.location(), format!("made by `{}` here", tensor.origin.op()))
        .detail(format!(
            "`{}: {}` {} {} {}",
            row.path,
            row.type_name.unwrap_or("Tensor"),
            tensor.device,
            tensor.dtype,
            fmt_shape(&tensor.shape)
        ))
        .help(
            "drop `#[module(skip)]`: a plain `Tensor` field is a buffer, moved and saved with the model; \
             `#[module(non_persistent)]` moves it without saving it",
        )
}

/// The device most moved tensors are on (ties: the one with more bytes, then the accelerator).
fn main_device(rows: &[InventoryRow]) -> Option<Device> {
    let mut per_device: BTreeMap<Device, (usize, usize)> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.kind != EntryKind::Skipped && r.tied_to.is_none()) {
        if let Some(t) = &row.tensor {
            let entry = per_device.entry(t.device).or_default();
            entry.0 += 1;
            entry.1 += t.bytes;
        }
    }
    per_device.into_iter().max_by_key(|(device, counts)| (*counts, !device.is_cpu())).map(|(d, _)| d)
}

fn totals(rows: &[InventoryRow]) -> Vec<DeviceTotals> {
    let mut per_device: BTreeMap<Device, DeviceTotals> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.tied_to.is_none()) {
        let Some(t) = &row.tensor else { continue };
        let totals = per_device.entry(t.device).or_insert(DeviceTotals {
            device: t.device,
            tensors: 0,
            parameter_elements: 0,
            bytes: 0,
        });
        totals.tensors += 1;
        totals.bytes += t.bytes;
        if row.kind == EntryKind::Parameter {
            totals.parameter_elements += t.numel;
        }
    }
    let mut totals: Vec<DeviceTotals> = per_device.into_values().collect();
    totals.sort_by_key(|t| std::cmp::Reverse(t.bytes));
    totals
}

impl fmt::Display for Inventory {
    /// The table: one row per parameter, buffer and skipped field; totals per device; findings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |kind: EntryKind| self.rows.iter().filter(|r| r.kind == kind).count();
        let parameters: usize = self.totals.iter().map(|t| t.parameter_elements).sum();
        let bytes: usize = self.totals.iter().map(|t| t.bytes).sum();
        let buffers = count(EntryKind::Buffer) + count(EntryKind::NonPersistentBuffer);
        writeln!(
            f,
            "`{}`: {} parameters ({} elements), {} buffers, {} skipped fields, {}",
            self.module,
            count(EntryKind::Parameter),
            fmt_count(parameters),
            buffers,
            count(EntryKind::Skipped),
            fmt_bytes(bytes)
        )?;
        let mut table = Table::new(&[
            ("path", false),
            ("kind", false),
            ("device", false),
            ("dtype", false),
            ("shape", false),
            ("numel", true),
            ("bytes", true),
        ]);
        for row in &self.rows {
            let kind = match (&row.tied_to, row.type_name) {
                (Some(first), _) => format!("{} (tied to {first})", row.kind),
                (None, _) if row.is_inside_skipped() => format!(
                    "{} (in `{}`)",
                    row.kind,
                    row.skipped_field.as_ref().map_or("?", |f| f.path.as_str())
                ),
                (None, Some(type_name)) if row.tensor.is_none() => format!("{} ({type_name})", row.kind),
                _ => row.kind.to_string(),
            };
            match &row.tensor {
                Some(t) => table.row(vec![
                    row.path.clone(),
                    kind,
                    if t.fake { format!("{} (fake)", t.device) } else { t.device.to_string() },
                    t.dtype.to_string(),
                    fmt_shape(&t.shape),
                    fmt_count(t.numel),
                    fmt_bytes(t.bytes),
                ]),
                None => table.row(vec![
                    row.path.clone(),
                    kind,
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]),
            }
        }
        table.write(f, "  ")?;
        writeln!(f, "per device:")?;
        let mut per_device =
            Table::new(&[("device", false), ("tensors", true), ("parameters", true), ("bytes", true)]);
        for t in &self.totals {
            per_device.row(vec![
                t.device.to_string(),
                fmt_count(t.tensors),
                fmt_count(t.parameter_elements),
                fmt_bytes(t.bytes),
            ]);
        }
        per_device.write(f, "  ")?;
        write!(f, "findings: {}", count_by_severity(&self.findings))?;
        for finding in &self.findings {
            write!(f, "\n  {}", finding.one_line())?;
        }
        Ok(())
    }
}
