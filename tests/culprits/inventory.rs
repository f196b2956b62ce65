//! A model with every kind of field, for the inventory: parameters (one tied), a buffer, a
//! non-persistent buffer, a skipped tensor, a skipped config; and a half-moved copy of it.

use devcheck::{Device, Module, Param, Result, Tensor};

#[derive(Clone, Debug)]
pub struct Config {
    pub width: usize,
}

#[derive(Module, Clone)]
pub struct Block {
    pub weight: Param,
    pub norm_scale: Tensor,
}

#[derive(Module, Clone)]
pub struct Encoder {
    pub embed: Param,
    pub blocks: Vec<Block>,
    #[module(non_persistent)]
    pub causal_mask: Tensor,
    #[module(skip)]
    pub pos_cache: Tensor,
    #[module(skip)]
    pub config: Config,
    /// Tied to `embed`.
    pub head: Param,
}

pub fn encoder(device: &Device) -> Result<Encoder> {
    let embed = Param::new(Tensor::randn([10, 4], device)?);
    let block = |device: &Device| -> Result<Block> {
        Ok(Block {
            weight: Param::new(Tensor::randn([4, 4], device)?),
            norm_scale: Tensor::ones([4], device)?,
        })
    };
    Ok(Encoder {
        head: embed.clone(),
        embed,
        blocks: vec![block(device)?, block(device)?],
        causal_mask: Tensor::ones([3, 3], device)?.tril(0)?,
        pos_cache: Tensor::zeros([3, 4], device)?,
        config: Config { width: 4 },
    })
}

/// Moved to a fake `cuda:1`, then one buffer replaced by a tensor made on the CPU: the classic
/// "assigned after the move" straggler.
pub fn half_moved() -> Result<Encoder> {
    let _fake = devcheck::fake::enter();
    let mut model = encoder(&Device::Cpu)?;
    model.to(&Device::Cuda(1))?;
    model.blocks[1].norm_scale = Tensor::ones([4], &Device::Cpu)?;
    Ok(model)
}
