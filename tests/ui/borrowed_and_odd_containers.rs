use std::collections::{BTreeMap, VecDeque};

use devcheck::{Module, Tensor};

#[derive(Module)]
struct Block {
    w: Tensor,
}

#[derive(Module)]
struct Model<'a> {
    borrowed: &'a Tensor,
    queue: VecDeque<Block>,
    by_pair: BTreeMap<(u8, u8), Tensor>,
    nested: Vec<std::collections::HashMap<u32, Block>>,
}

fn main() {}
