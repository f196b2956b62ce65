//! `devcheck inspect` on PyTorch classes whose attributes are picked out of containers.

use devcheck_lint::{LintTable, Overrides, Settings, inspect_source};

fn settings() -> Settings {
    Settings::from_table(LintTable::default(), std::path::PathBuf::from("."), None, &Overrides::default())
        .expect("settings")
}

/// A module picked out of a plain dict of modules, or out of an `nn.ModuleList`, and assigned to an
/// attribute is a registered submodule: the move takes it along. A tensor picked out of a plain
/// list is a plain tensor attribute. A parameter picked out of an `nn.ParameterList`, and a value
/// picked out of a dict of numbers, stay unknown rather than guessed.
#[test]
fn attributes_picked_out_of_containers_have_their_elements_fate() {
    let text = r#"import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.choices = {"small": nn.Linear(4, 4), "big": nn.Linear(4, 8)}
        self.backbone = self.choices[name]
        self.blocks = nn.ModuleList([nn.Linear(4, 4)])
        self.first = self.blocks[0]
        self.masks = [torch.ones(4), torch.zeros(4)]
        self.mask = self.masks[0]
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(4))])
        self.scale = self.scales[0]
        self.sizes = {"small": 4, "big": 8}
        self.size = self.sizes[name]

    def forward(self, x):
        return self.backbone(x) * self.scale * self.mask + self.first(x)
"#;
    let run = inspect_source("net.py", text, &settings());
    assert_eq!(run.structs.len(), 1);
    let fate = |name: &str| {
        run.structs[0].fields.iter().find(|f| f.name == name).map(|f| f.fate).unwrap_or("absent")
    };
    assert_eq!(fate("backbone"), "moves");
    assert_eq!(fate("first"), "moves");
    assert_eq!(fate("choices"), "left behind");
    assert_eq!(fate("mask"), "left behind");
    assert_eq!(fate("scale"), "unknown");
    assert_eq!(fate("size"), "unknown");
}

/// A diffusion model as such models are written: buffers registered through a local alias (a
/// lambda that calls `register_buffer`, or the bound method kept in a name), and the denoising
/// network passed to the constructor and called in `forward`. Every field moves.
#[test]
fn aliased_registrations_and_modules_passed_in_move() {
    let text = r#"import torch
from torch import nn


class GaussianDiffusion(nn.Module):
    def __init__(self, model, betas):
        super().__init__()
        self.model = model
        self.num_timesteps = len(betas)
        register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))
        register_buffer("betas", torch.tensor(betas))
        rb = self.register_buffer
        rb("sqrt_betas", torch.sqrt(torch.tensor(betas)))
        self.scale = torch.ones(1)

    def forward(self, x, t):
        return self.model(x * self.betas[t] * self.sqrt_betas[t] * self.scale, t)
"#;
    let run = inspect_source("diffusion.py", text, &settings());
    let fields: Vec<(&str, &str, &str)> =
        run.structs[0].fields.iter().map(|f| (f.name.as_str(), f.class.as_str(), f.fate)).collect();
    assert_eq!(
        fields,
        [
            ("model", "submodule", "moves"),
            ("num_timesteps", "plain data", "-"),
            ("betas", "buffer", "moves"),
            ("sqrt_betas", "buffer", "moves"),
            ("scale", "plain tensor attribute", "left behind"),
        ]
    );
}
