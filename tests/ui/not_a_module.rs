// An unknown type is a submodule, so it must implement `Module`.
use devcheck::{Module, Tensor};

struct Config {
    width: usize,
}

type Mask = Tensor;

#[derive(Module)]
struct Model {
    config: Config,
    mask: Mask,
    layers: Vec<Config>,
}

fn main() {}
