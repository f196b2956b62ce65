use devcheck::{Module, Tensor};

#[derive(Module)]
#[module(skip, nope)]
struct Model {
    #[module(frobnicate)]
    a: Tensor,
    #[module(skip, skip)]
    b: Tensor,
    #[module(non_persistent = true)]
    c: Tensor,
    #[module(crate = devcheck)]
    d: Tensor,
    #[module]
    e: Tensor,
}

fn main() {}
