// Tensors where no device move can reach them: each is an error at its field, in one build.
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use devcheck::{Module, Param, Tensor};

#[derive(Module)]
struct Model {
    weight: Param,
    by_name: HashMap<String, Tensor>,
    shared: Rc<RefCell<Tensor>>,
    locked: Mutex<Tensor>,
    pointer: *const Tensor,
    pair: (Tensor, Tensor),
    cache: Arc<Vec<Param>>,
}

fn main() {}
