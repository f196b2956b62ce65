//! [`ModuleError`]: what can go wrong with a model as a whole (tensors on several devices, no
//! tensors at all), a [`crate::error::LayerError`] of this layer.

use std::panic::Location;

use crate::device::Device;

/// Errors about a whole module (part of [`crate::Error`]).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ModuleError {
    #[error("`{module}` has tensors on {} devices: {}{}{}\n  at {}", groups.len(), device_counts(groups), straggler_lines(groups), skipped_lines(skipped), location_string(location))]
    #[diagnostic(code(devcheck::mixed_devices), help("{}", mixed_help(groups)))]
    MixedDevices {
        module: String,
        /// Every device with the paths on it, the most populated first.
        groups: Vec<(Device, Vec<String>)>,
        /// Skipped tensor fields (not moved by `to`) that are not on the most populated device.
        skipped: Vec<(String, Device)>,
        /// The call that asked for the model's device.
        location: &'static Location<'static>,
    },

    #[error(
        "`{module}` has no parameters or buffers, so it has no device\n  at {}",
        location_string(location)
    )]
    #[diagnostic(
        code(devcheck::no_tensors),
        help(
            "a module's device is the device of its tensors; pass the device explicitly where this \
             module creates tensors (or take it from an input: `x.device()`)"
        )
    )]
    NoTensors { module: String, location: &'static Location<'static> },
}

impl ModuleError {
    /// The call that asked.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            ModuleError::MixedDevices { location, .. } | ModuleError::NoTensors { location, .. } => {
                Some(location)
            }
        }
    }
}

impl crate::error::LayerError for ModuleError {
    fn location(&self) -> Option<&'static Location<'static>> {
        ModuleError::location(self)
    }
}

impl From<ModuleError> for crate::Error {
    fn from(error: ModuleError) -> crate::Error {
        crate::Error::Module(crate::error::LayerDetail::new(error))
    }
}

fn location_string(location: &Location<'_>) -> String {
    format!("{}:{}:{}", location.file(), location.line(), location.column())
}

/// Stragglers listed one per line before the rest are counted.
const LISTED_PATHS: usize = 8;

fn device_counts(groups: &[(Device, Vec<String>)]) -> String {
    let parts: Vec<String> =
        groups.iter().map(|(device, paths)| format!("{} on {device}", paths.len())).collect();
    parts.join(", ")
}

/// Every path off the most populated device, one per line.
fn straggler_lines(groups: &[(Device, Vec<String>)]) -> String {
    let stragglers: Vec<(Device, &String)> =
        groups.iter().skip(1).flat_map(|(device, paths)| paths.iter().map(move |p| (*device, p))).collect();
    let mut out: String = stragglers
        .iter()
        .take(LISTED_PATHS)
        .map(|(device, path)| format!("\n  on {device}: {path}"))
        .collect();
    if stragglers.len() > LISTED_PATHS {
        out.push_str(&format!("\n  ... and {} more", stragglers.len() - LISTED_PATHS));
    }
    out
}

fn skipped_lines(skipped: &[(String, Device)]) -> String {
    skipped
        .iter()
        .map(|(path, device)| format!("\n  skipped, not moved by `to`: {path} on {device}"))
        .collect()
}

fn mixed_help(groups: &[(Device, Vec<String>)]) -> String {
    let target = groups.first().map(|(d, _)| *d).unwrap_or(Device::Cpu);
    format!(
        "call `model.to(&{})` once after building or loading the model: it moves every parameter and \
         buffer. Tensors elsewhere were probably assigned by hand after the last move \
         (`model.field = tensor` with a tensor made on another device)",
        crate::device::device_expr(&target),
    )
}
