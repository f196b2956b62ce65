use devcheck::{Module, Tensor};

#[derive(Module)]
union Bits {
    a: u32,
    b: f32,
}

#[derive(Module)]
enum Head {
    #[module(skip)]
    Linear(Tensor),
    Other { w: std::rc::Rc<Tensor> },
}

fn main() {}
