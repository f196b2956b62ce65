//! Tensors made at fixed lines, so rendered diagnostics in snapshots name stable locations.
//! Keep the two constructors on lines 10 and 11.

use devcheck::{Device, Result, Tensor};

/// A `[2, 3]` tensor on the CPU (line 10) and one on a fake `cuda:0` (line 11).
pub fn pair() -> Result<(Tensor, Tensor)> {
    // The next three lines are named in snapshots: keep them where they are.
    let cpu = Device::Cpu;
    let x = Tensor::zeros([2, 3], &cpu)?;
    let y = Tensor::fake([2, 3], devcheck::DType::F32, &Device::Cuda(0))?;
    Ok((x, y))
}
