// A `.to(device)` whose result is thrown away moves nothing: the compiler says so.
#![deny(unused_must_use)]

use devcheck::{Device, Tensor};

fn main() -> devcheck::Result<()> {
    let x = Tensor::zeros([2], &Device::Cpu)?;
    x.to(&Device::Cuda(0))?;
    x.cpu()?;
    x.to_dtype(devcheck::DType::F16)?;
    x.exp()?;
    Ok(())
}
