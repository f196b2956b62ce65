use devcheck::{Module, Param, Tensor};

#[derive(Module)]
struct Inner {
    w: Tensor,
}

#[derive(Module)]
struct Model {
    #[module(skip)]
    frozen: Param,
    #[module(skip)]
    frozen_list: Vec<Param>,
    #[module(non_persistent)]
    weight: Param,
    #[module(non_persistent)]
    inner: Inner,
    #[module(non_persistent)]
    count: usize,
    #[module(skip, non_persistent)]
    mask: Tensor,
}

fn main() {}
