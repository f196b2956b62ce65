// Accepted: a re-exported devcheck (`crate = path`), skipped hidden shapes, plain data, generics.
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

mod engine {
    pub use devcheck::*;
}

use devcheck::{Device, Param, Tensor};
use engine::Module;

struct Tokenizer;

#[derive(Module)]
#[module(crate = engine)]
struct Model<M> {
    weight: Param,
    inner: Option<Box<M>>,
    #[module(skip)]
    cache: HashMap<String, Tensor>,
    #[module(skip)]
    shared: Rc<RefCell<Tensor>>,
    #[module(skip)]
    tokenizer: Tokenizer,
    sizes: HashMap<String, usize>,
    act: Box<dyn Fn(&Tensor) -> devcheck::Result<Tensor>>,
    device: Device,
}

#[derive(Module)]
#[module(crate = engine)]
struct Leaf(Tensor);

fn main() -> devcheck::Result<()> {
    let cpu = Device::Cpu;
    let model = Model {
        weight: Param::new(Tensor::zeros([2], &cpu)?),
        inner: Some(Box::new(Leaf(Tensor::zeros([1], &cpu)?))),
        cache: HashMap::new(),
        shared: Rc::new(RefCell::new(Tensor::zeros([1], &cpu)?)),
        tokenizer: Tokenizer,
        sizes: HashMap::new(),
        act: Box::new(|x: &Tensor| x.relu()),
        device: cpu,
    };
    let _ = (&model.cache, &model.shared, &model.tokenizer, &model.sizes, &model.act, model.device);
    assert_eq!(model.named_tensors().len(), 2);
    Ok(())
}
