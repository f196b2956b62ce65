//! [`CudaStorage`]: a tensor's elements on a CUDA device (a buffer from the device's caching
//! allocator and a dtype), host↔device copies (pageable and pinned), and one launcher per kernel
//! family. Launchers take the operands' [`Layout`]s and pass shape and strides to the kernels, so
//! views and broadcasts never need a copy first. Shape, dtype and device checks are the op front
//! end's job; what is checked here is what the kernels need (matching dtypes, kernel existence).

use std::panic::Location;
use std::sync::{Arc, Mutex};

use half::{bf16, f16};

use super::device::{
    Arg, CudaDevice, DeviceBuffer, DeviceEvent, elementwise_config, elementwise_unrolled_config,
    host_allocator, host_allocator_if_initialised, softmax_config,
};
use super::error::{CudaError, CudaResult};
use super::host_allocator::{HostBlock, PendingUses, UseKind};
use crate::backend::op::{BinaryOp, CmpOp, LogicalOp, UnaryOp, kernel_name};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Error;
use crate::shape::Layout;

/// Elements of one dtype in device memory.
#[derive(Clone, Debug)]
pub struct CudaStorage {
    buffer: Arc<DeviceBuffer>,
    dtype: DType,
    len: usize,
}

impl CudaStorage {
    /// Uninitialised room for `len` elements of `dtype`.
    pub fn alloc(device: &Arc<CudaDevice>, dtype: DType, len: usize) -> CudaResult<CudaStorage> {
        let bytes =
            len.checked_mul(dtype.size_in_bytes()).ok_or_else(|| too_large(device.device(), len, dtype))?;
        Ok(CudaStorage { buffer: Arc::new(device.alloc(bytes)?), dtype, len })
    }

    /// `len` elements of `dtype`, all equal to `value` (converted as `WithDType::from_f64` does).
    pub fn full(device: &Arc<CudaDevice>, dtype: DType, len: usize, value: f64) -> CudaResult<CudaStorage> {
        let out = Self::alloc(device, dtype, len)?;
        out.fill(value)?;
        Ok(out)
    }

    /// `len` samples of `dtype` (a float) made on the device: uniform in [0, 1), or standard
    /// normal with `normal`. The same `seed` gives the same numbers on any device.
    pub fn random(
        device: &Arc<CudaDevice>,
        dtype: DType,
        len: usize,
        normal: bool,
        seed: u64,
    ) -> CudaResult<CudaStorage> {
        let out = Self::alloc(device, dtype, len)?;
        if len > 0 {
            let kernel = kernel_name(if normal { "normal" } else { "uniform" }, dtype);
            device.launch(
                &kernel,
                elementwise_config(len),
                &[Arg::U64(len as u64), Arg::U64(seed), Arg::U64(out.ptr())],
            )?;
        }
        Ok(out)
    }

    /// A copy of little-endian host bytes (`len * size_in_bytes` of them) on `device`. From
    /// pageable memory the copy is staged by the driver and synchronous with the host.
    pub fn from_host_bytes(device: &Arc<CudaDevice>, dtype: DType, bytes: &[u8]) -> CudaResult<CudaStorage> {
        let len = bytes.len() / dtype.size_in_bytes();
        let out = Self::alloc(device, dtype, len)?;
        device.copy_from_host(out.ptr(), &bytes[..len * dtype.size_in_bytes()])?;
        Ok(out)
    }

    /// A copy of pinned host memory on `device`. With `non_blocking` the call returns as soon as
    /// the copy is queued (the pinned block is not reused before it completes); otherwise it
    /// waits for the copy, like PyTorch's `to(device, non_blocking=False)`. A copy still filling
    /// the buffer from another device is waited for on the device first.
    pub fn from_pinned(
        device: &Arc<CudaDevice>,
        dtype: DType,
        pinned: &Arc<PinnedBuffer>,
        non_blocking: bool,
    ) -> CudaResult<CudaStorage> {
        let len = pinned.len() / dtype.size_in_bytes();
        let bytes = len * dtype.size_in_bytes();
        let out = Self::alloc(device, dtype, len)?;
        if bytes > 0 {
            pinned.with_use(device, UseKind::DeviceReads, || {
                // SAFETY: the destination holds `bytes` bytes; the source is page-locked memory of
                // at least that size, not reused before the event `with_use` records after it.
                unsafe { device.copy_from_pinned(out.ptr(), pinned.as_ptr(), bytes) }
            })?;
        }
        if !non_blocking {
            device.synchronize()?;
        }
        Ok(out)
    }

    /// The elements of `layout` as contiguous little-endian host bytes. Waits for the device:
    /// this is a synchronisation point.
    pub fn to_host_bytes(&self, layout: &Layout) -> CudaResult<Vec<u8>> {
        let contiguous = self.contiguous(layout)?;
        let mut host = vec![0u8; contiguous.len * self.dtype.size_in_bytes()];
        self.device().copy_to_host(&mut host, contiguous.ptr())?;
        Ok(host)
    }

    /// Copies the elements of `layout` into pinned host memory without waiting. Reading the
    /// buffer ([`PinnedBuffer::to_vec`]) waits for the copy; copies from it to a device wait for
    /// it on that device.
    pub fn copy_to_pinned(&self, layout: &Layout, pinned: &Arc<PinnedBuffer>) -> CudaResult<()> {
        let contiguous = self.contiguous(layout)?;
        let bytes = contiguous.len * self.dtype.size_in_bytes();
        if pinned.len() < bytes {
            return Err(invalid(
                "copy_to_pinned",
                format!("the pinned buffer holds {} bytes, the tensor {bytes}", pinned.len()),
                "allocate the pinned buffer with the tensor's size in bytes",
            ));
        }
        if bytes == 0 {
            return Ok(());
        }
        let device = self.device();
        pinned.with_use(device, UseKind::DeviceWrites, || {
            // SAFETY: `pinned` is page-locked with room for `bytes`, and is neither reused nor
            // read by the host before the event `with_use` records after the copy. `contiguous`
            // may go back to the cache when this returns: only later work on this device's
            // stream can reuse its block, and that runs after the copy.
            unsafe { device.copy_to_pinned(pinned.as_ptr(), contiguous.ptr(), bytes) }
        })
    }

    /// A copy on another CUDA device (a peer copy through the driver), queued without blocking
    /// the host and ordered on both devices' streams ([`CudaDevice::copy_from_peer`]), so the
    /// source, or its temporary contiguous copy, may be dropped or overwritten at once.
    pub fn to_device(&self, layout: &Layout, target: &Arc<CudaDevice>) -> CudaResult<CudaStorage> {
        let contiguous = self.contiguous(layout)?;
        let out = Self::alloc(target, self.dtype, contiguous.len)?;
        let bytes = contiguous.len * self.dtype.size_in_bytes();
        target.copy_from_peer(out.ptr(), self.device(), contiguous.ptr(), bytes)?;
        Ok(out)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn device(&self) -> &Arc<CudaDevice> {
        self.buffer.device()
    }

    /// Device address of element 0.
    pub fn ptr(&self) -> u64 {
        self.buffer.ptr()
    }

    pub(super) fn ptr_at(&self, layout: &Layout) -> u64 {
        self.ptr() + (layout.offset * self.dtype.size_in_bytes()) as u64
    }

    /// Sets every element to `value`.
    pub fn fill(&self, value: f64) -> CudaResult<()> {
        if self.len == 0 {
            return Ok(());
        }
        let (kernel, bits) = match self.dtype {
            DType::F32 => ("fill_u32", Arg::U32((value as f32).to_bits())),
            DType::F64 => ("fill_u64", Arg::U64(value.to_bits())),
            DType::F16 => ("fill_u16", Arg::U16(f16::from_f64(value).to_bits())),
            DType::BF16 => ("fill_u16", Arg::U16(bf16::from_f64(value).to_bits())),
            DType::I64 => ("fill_u64", Arg::U64(value as i64 as u64)),
            DType::I32 => ("fill_u32", Arg::U32(value as i32 as u32)),
            DType::U8 => ("fill_u8", Arg::U8(value as u8)),
            DType::Bool => ("fill_u8", Arg::U8(u8::from(value != 0.0))),
        };
        self.device().launch(
            kernel,
            elementwise_config(self.len),
            &[Arg::U64(self.len as u64), Arg::U64(self.ptr()), bits],
        )
    }

    /// The elements of `layout` in a new contiguous buffer (self when already contiguous and whole).
    pub fn contiguous(&self, layout: &Layout) -> CudaResult<CudaStorage> {
        let numel = layout.numel();
        if layout.is_contiguous() && layout.offset == 0 && numel == self.len {
            return Ok(self.clone());
        }
        let out = Self::alloc(self.device(), self.dtype, numel)?;
        out.copy_from(self, layout, &Layout::contiguous(&layout.shape))?;
        Ok(out)
    }

    /// Writes the elements of `src` (seen through `src_layout`) into `self` at `dst_layout`,
    /// which must have the same shape: `contiguous`, `cat` (one call per input, into a view of
    /// the output) and assignments into views.
    pub fn copy_from(&self, src: &CudaStorage, src_layout: &Layout, dst_layout: &Layout) -> CudaResult<()> {
        same_dtype("copy", self.dtype, src.dtype)?;
        let numel = dst_layout.numel();
        if numel == 0 {
            return Ok(());
        }
        let width = match self.dtype.size_in_bytes() {
            1 => "copy_u8",
            2 => "copy_u16",
            4 => "copy_u32",
            _ => "copy_u64",
        };
        let info = self.upload_info(&dst_layout.shape, &[&src_layout.strides, &dst_layout.strides])?;
        self.device().launch(
            width,
            elementwise_config(numel),
            &[
                Arg::U64(numel as u64),
                Arg::U64(dst_layout.rank() as u64),
                Arg::U64(info.ptr()),
                Arg::U64(src.ptr_at(src_layout)),
                Arg::U64(self.ptr_at(dst_layout)),
            ],
        )
    }

    /// `op(x)` elementwise, same dtype out.
    pub fn unary(&self, op: UnaryOp, layout: &Layout) -> CudaResult<CudaStorage> {
        self.elementwise(&op.kernel(self.dtype), self.dtype, &layout.shape, &[(self, layout)], &[])
    }

    /// `op(lhs, rhs)` elementwise over `shape`, both broadcast to it, same dtype out.
    pub fn binary(
        &self,
        op: BinaryOp,
        layout: &Layout,
        rhs: &CudaStorage,
        rhs_layout: &Layout,
        shape: &[usize],
    ) -> CudaResult<CudaStorage> {
        same_dtype(op.name(), self.dtype, rhs.dtype)?;
        self.elementwise(&op.kernel(self.dtype), self.dtype, shape, &[(self, layout), (rhs, rhs_layout)], &[])
    }

    /// `op(x, scalar)`, or `op(scalar, x)` when `reversed` (for `sub`, `div`, `pow`).
    pub fn binary_scalar(
        &self,
        op: BinaryOp,
        layout: &Layout,
        scalar: f64,
        reversed: bool,
    ) -> CudaResult<CudaStorage> {
        let kernel = op.scalar_kernel(self.dtype, reversed);
        self.elementwise(&kernel, self.dtype, &layout.shape, &[(self, layout)], &[Arg::F64(scalar)])
    }

    /// `op(lhs, rhs)` over `shape`, both broadcast to it, as bool.
    pub fn compare(
        &self,
        op: CmpOp,
        layout: &Layout,
        rhs: &CudaStorage,
        rhs_layout: &Layout,
        shape: &[usize],
    ) -> CudaResult<CudaStorage> {
        same_dtype(op.name(), self.dtype, rhs.dtype)?;
        self.elementwise(
            &op.kernel(self.dtype),
            DType::Bool,
            shape,
            &[(self, layout), (rhs, rhs_layout)],
            &[],
        )
    }

    /// `op(x, scalar)` as bool.
    pub fn compare_scalar(&self, op: CmpOp, layout: &Layout, scalar: f64) -> CudaResult<CudaStorage> {
        let kernel = op.scalar_kernel(self.dtype);
        self.elementwise(&kernel, DType::Bool, &layout.shape, &[(self, layout)], &[Arg::F64(scalar)])
    }

    /// `op(lhs, rhs)` of two bool operands over `shape`, both broadcast to it.
    pub fn logical(
        &self,
        op: LogicalOp,
        layout: &Layout,
        rhs: &CudaStorage,
        rhs_layout: &Layout,
        shape: &[usize],
    ) -> CudaResult<CudaStorage> {
        same_dtype(op.name(), self.dtype, rhs.dtype)?;
        self.elementwise(&op.kernel(), DType::Bool, shape, &[(self, layout), (rhs, rhs_layout)], &[])
    }

    /// The elements converted to `dtype`.
    pub fn cast(&self, layout: &Layout, dtype: DType) -> CudaResult<CudaStorage> {
        let kernel = format!("cast_{}_{}", self.dtype.as_str(), dtype.as_str());
        self.elementwise(&kernel, dtype, &layout.shape, &[(self, layout)], &[])
    }

    /// Launches the element-wise `kernel` over `shape` with arguments `(numel, ndim, info,
    /// inputs..., extra..., out)`: each input broadcast to `shape`, `info` null when all of them
    /// are contiguous, `out` a new contiguous buffer of `out_dtype`.
    fn elementwise(
        &self,
        kernel: &str,
        out_dtype: DType,
        shape: &[usize],
        inputs: &[(&CudaStorage, &Layout)],
        extra: &[Arg],
    ) -> CudaResult<CudaStorage> {
        let numel: usize = shape.iter().product();
        let out = Self::alloc(self.device(), out_dtype, numel)?;
        if numel == 0 {
            return Ok(out);
        }
        let layouts: Vec<Layout> = inputs.iter().map(|(_, l)| l.broadcast_to(shape)).collect();
        let info = self.info_or_null(shape, &layouts)?;
        let mut args = vec![
            Arg::U64(numel as u64),
            Arg::U64(shape.len() as u64),
            Arg::U64(info.as_ref().map_or(0, DeviceBuffer::ptr)),
        ];
        args.extend(inputs.iter().zip(&layouts).map(|((s, _), l)| Arg::U64(s.ptr_at(l))));
        args.extend_from_slice(extra);
        args.push(Arg::U64(out.ptr()));
        self.device().launch(kernel, elementwise_unrolled_config(numel), &args)?;
        Ok(out)
    }

    /// softmax (or log_softmax) over the last dimension.
    pub fn softmax(&self, layout: &Layout, log: bool) -> CudaResult<CudaStorage> {
        let x = self.contiguous(layout)?;
        let cols = layout.shape.last().copied().unwrap_or(1);
        let rows = x.len.checked_div(cols).unwrap_or(0);
        let out = Self::alloc(self.device(), self.dtype, x.len)?;
        if x.len == 0 {
            return Ok(out);
        }
        let op = if log { "log_softmax" } else { "softmax" };
        self.device().launch(
            &kernel_name(op, self.dtype),
            softmax_config(rows, cols),
            &[Arg::U64(rows as u64), Arg::U64(cols as u64), Arg::U64(x.ptr()), Arg::U64(out.ptr())],
        )?;
        Ok(out)
    }

    /// `cond ? self : other` over `shape` (`torch.where(cond, self, other)`).
    pub fn where_cond(
        &self,
        layout: &Layout,
        cond: &CudaStorage,
        cond_layout: &Layout,
        other: &CudaStorage,
        other_layout: &Layout,
        shape: &[usize],
    ) -> CudaResult<CudaStorage> {
        same_dtype("where", self.dtype, other.dtype)?;
        bool_mask("where", cond.dtype)?;
        let inputs = [(cond, cond_layout), (self, layout), (other, other_layout)];
        self.elementwise(&kernel_name("where", self.dtype), self.dtype, shape, &inputs, &[])
    }

    /// `mask ? value : self`, the mask broadcast to this tensor's shape.
    pub fn masked_fill(
        &self,
        layout: &Layout,
        mask: &CudaStorage,
        mask_layout: &Layout,
        value: f64,
    ) -> CudaResult<CudaStorage> {
        bool_mask("masked_fill", mask.dtype)?;
        let inputs = [(self, layout), (mask, mask_layout)];
        let kernel = kernel_name("masked_fill", self.dtype);
        self.elementwise(&kernel, self.dtype, &layout.shape, &inputs, &[Arg::F64(value)])
    }

    /// The upper (`upper`) or lower triangle of the last two dimensions from `diagonal` on.
    pub fn triangle(&self, layout: &Layout, diagonal: i64, upper: bool) -> CudaResult<CudaStorage> {
        let op = if upper { "triu" } else { "tril" };
        if layout.rank() < 2 {
            return Err(invalid(
                op,
                format!("needs at least 2 dimensions, got {}", layout.rank()),
                "reshape to a matrix first",
            ));
        }
        let numel = layout.numel();
        let out = Self::alloc(self.device(), self.dtype, numel)?;
        if numel == 0 {
            return Ok(out);
        }
        let info = self.upload_info(&layout.shape, &[&layout.strides])?;
        self.device().launch(
            &kernel_name(op, self.dtype),
            elementwise_config(numel),
            &[
                Arg::U64(numel as u64),
                Arg::U64(layout.rank() as u64),
                Arg::U64(info.ptr()),
                Arg::I64(diagonal),
                Arg::U64(self.ptr_at(layout)),
                Arg::U64(out.ptr()),
            ],
        )?;
        Ok(out)
    }

    /// `index_select(dim, ids)`: rows of `dim` picked by `ids` (i64 or i32, each in `0..size`).
    /// An index out of range is an error naming it; checking costs one
    /// synchronisation, as PyTorch's device-side assert does.
    pub fn index_select(
        &self,
        layout: &Layout,
        dim: usize,
        ids: &CudaStorage,
        ids_layout: &Layout,
    ) -> CudaResult<CudaStorage> {
        index_dtype("index_select", ids.dtype)?;
        if dim >= layout.rank() {
            return Err(invalid(
                "index_select",
                format!("dimension {dim} is out of range"),
                "pass a dimension below the tensor's rank",
            ));
        }
        let x = self.contiguous(layout)?;
        let ids = ids.contiguous(ids_layout)?;
        let outer: usize = layout.shape[..dim].iter().product();
        let inner: usize = layout.shape[dim + 1..].iter().product();
        let src_dim = layout.shape[dim];
        let n_out = outer * ids.len * inner;
        let out = Self::alloc(self.device(), self.dtype, n_out)?;
        if n_out == 0 {
            return Ok(out);
        }
        let bad = BadIndex::new(self.device())?;
        self.device().launch(
            &format!("index_select_{}_{}", ids.dtype.as_str(), self.dtype.as_str()),
            elementwise_config(n_out),
            &[
                Arg::U64(n_out as u64),
                Arg::U64(outer as u64),
                Arg::U64(src_dim as u64),
                Arg::U64(ids.len as u64),
                Arg::U64(inner as u64),
                Arg::U64(ids.ptr()),
                Arg::U64(x.ptr()),
                Arg::U64(out.ptr()),
                Arg::U64(bad.ptr()),
            ],
        )?;
        bad.check("index_select", src_dim)?;
        Ok(out)
    }

    /// `gather(dim, ids)`: the output has the shape of `ids`.
    pub fn gather(
        &self,
        layout: &Layout,
        dim: usize,
        ids: &CudaStorage,
        ids_layout: &Layout,
    ) -> CudaResult<CudaStorage> {
        index_dtype("gather", ids.dtype)?;
        if dim >= layout.rank() || ids_layout.rank() != layout.rank() {
            return Err(invalid(
                "gather",
                format!(
                    "dimension {dim} with index rank {} and input rank {}",
                    ids_layout.rank(),
                    layout.rank()
                ),
                "the index must have the input's rank and dim must be below it",
            ));
        }
        let numel = ids_layout.numel();
        let out = Self::alloc(self.device(), self.dtype, numel)?;
        if numel == 0 {
            return Ok(out);
        }
        let info = self.upload_info(&ids_layout.shape, &[&layout.strides, &ids_layout.strides])?;
        let bad = BadIndex::new(self.device())?;
        self.device().launch(
            &format!("gather_{}_{}", ids.dtype.as_str(), self.dtype.as_str()),
            elementwise_config(numel),
            &[
                Arg::U64(numel as u64),
                Arg::U64(layout.rank() as u64),
                Arg::U64(info.ptr()),
                Arg::U64(dim as u64),
                Arg::U64(layout.shape[dim] as u64),
                Arg::U64(ids.ptr_at(ids_layout)),
                Arg::U64(self.ptr_at(layout)),
                Arg::U64(out.ptr()),
                Arg::U64(bad.ptr()),
            ],
        )?;
        bad.check("gather", layout.shape[dim])?;
        Ok(out)
    }

    /// One fused AdamW step on this parameter (contiguous), in place; `step` counts from 1.
    #[allow(clippy::too_many_arguments)]
    pub fn adamw_step(
        &self,
        grad: &CudaStorage,
        exp_avg: &CudaStorage,
        exp_avg_sq: &CudaStorage,
        lr: f64,
        (beta1, beta2): (f64, f64),
        eps: f64,
        weight_decay: f64,
        step: u64,
    ) -> CudaResult<()> {
        for other in [grad, exp_avg, exp_avg_sq] {
            same_dtype("adamw", self.dtype, other.dtype)?;
            if other.len != self.len {
                return Err(invalid(
                    "adamw",
                    "state and gradient sizes differ from the parameter's".into(),
                    "keep one state per parameter",
                ));
            }
        }
        if self.len == 0 {
            return Ok(());
        }
        let step = step.max(1) as i32;
        let bc1 = 1.0 - beta1.powi(step);
        let bc2 = 1.0 - beta2.powi(step);
        self.device().launch(
            &kernel_name("adamw", self.dtype),
            elementwise_config(self.len),
            &[
                Arg::U64(self.len as u64),
                Arg::U64(self.ptr()),
                Arg::U64(grad.ptr()),
                Arg::U64(exp_avg.ptr()),
                Arg::U64(exp_avg_sq.ptr()),
                Arg::F64(lr),
                Arg::F64(beta1),
                Arg::F64(beta2),
                Arg::F64(eps),
                Arg::F64(weight_decay),
                Arg::F64(bc1),
                Arg::F64(bc2),
            ],
        )
    }

    /// The `info` array (dims, then each operand's strides) in device memory, or `None` when
    /// every operand is contiguous and unbroadcast (the kernels' fast path).
    fn info_or_null(&self, shape: &[usize], operands: &[Layout]) -> CudaResult<Option<DeviceBuffer>> {
        let plain = operands.iter().all(|l| l.is_contiguous() && l.shape == shape);
        if plain {
            return Ok(None);
        }
        let strides: Vec<&[usize]> = operands.iter().map(|l| l.strides.as_slice()).collect();
        self.upload_info(shape, &strides).map(Some)
    }

    pub(super) fn upload_info(&self, dims: &[usize], strides: &[&[usize]]) -> CudaResult<DeviceBuffer> {
        let mut words: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        for s in strides {
            words.extend(s.iter().map(|&x| x as u64));
        }
        if words.is_empty() {
            words.push(0);
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let device = self.device();
        let buffer = device.alloc(bytes.len())?;
        device.copy_from_host(buffer.ptr(), &bytes)?;
        Ok(buffer)
    }
}

/// Page-locked host memory: copies from it to a device can run while the host goes on
/// (`pin_memory()` + `to_non_blocking`); copies from ordinary (pageable) memory cannot. The block
/// comes from the process's caching host allocator and goes back to it on drop, without waiting:
/// it is reused only once every device copy that used it has completed.
pub struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    block: HostBlock,
    device: Device,
    /// The device copies that may still read or write the buffer.
    uses: Mutex<PendingUses<DeviceEvent>>,
}

// SAFETY: the buffer is plain host memory owned by this value; the pending uses are behind a
// mutex.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared access reads the pointer and length; the memory is written only by the driver's
// copies, which `with_use` orders against each other and host reads wait for.
unsafe impl Sync for PinnedBuffer {}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({} bytes for {})", self.len, self.device)
    }
}

impl PinnedBuffer {
    /// `len` bytes of page-locked memory (usable by every device), holding `bytes` (the rest
    /// zeroed) when given; without, the contents are unspecified until a copy fills them.
    pub fn new(device: &Arc<CudaDevice>, len: usize, bytes: Option<&[u8]>) -> CudaResult<Arc<PinnedBuffer>> {
        let block = host_allocator(device).allocate(len)?;
        let buffer = PinnedBuffer {
            ptr: block.ptr as *mut u8,
            len,
            block,
            device: device.device(),
            uses: Mutex::new(PendingUses::default()),
        };
        if let Some(src) = bytes {
            let n = src.len().min(len);
            // SAFETY: `ptr` is a block of at least `len` bytes that no copy uses (the allocator
            // hands out only blocks whose copies have completed); `src` does not overlap it.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), buffer.ptr, n);
                std::ptr::write_bytes(buffer.ptr.add(n), 0, len - n);
            }
        }
        Ok(Arc::new(buffer))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The bytes, after waiting for the device copies still writing them.
    pub fn to_vec(&self) -> CudaResult<Vec<u8>> {
        let mut uses = self.lock_uses();
        for event in uses.writes() {
            event.wait_on_host()?;
        }
        uses.writes_done();
        // SAFETY: `ptr` holds `len` bytes and no device copy writes them any more; the lock keeps
        // a new copy from starting while they are read.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec())
    }

    /// Waits on the host for every device copy still reading or writing the buffer.
    pub fn wait(&self) -> CudaResult<()> {
        let mut uses = self.lock_uses();
        // Forgotten only once all have been waited for: after an error the rest stay pending,
        // and the block is not reused under them.
        for event in uses.events() {
            event.wait_on_host()?;
        }
        *uses = PendingUses::default();
        Ok(())
    }

    /// Queues `copy` (which reads or writes the buffer, as `kind` says) on `device`'s stream:
    /// first that stream waits for the copies on other devices it must not overtake, then `copy`
    /// is queued, then an event after it is kept. The lock keeps the three steps together when
    /// several threads use one buffer.
    pub(crate) fn with_use(
        &self,
        device: &Arc<CudaDevice>,
        kind: UseKind,
        copy: impl FnOnce() -> CudaResult<()>,
    ) -> CudaResult<()> {
        let mut uses = self.lock_uses();
        for hazard in uses.hazards(device.ordinal(), kind) {
            device.wait_for(&hazard.event)?;
        }
        copy()?;
        let event = match device.record_event() {
            Ok(event) => event,
            Err(e) => {
                // Without an event nothing would keep the block from reuse under the copy just
                // queued: wait for it here instead.
                let _ = device.synchronize();
                return Err(e);
            }
        };
        uses.record(device.ordinal(), kind, DeviceEvent { device: device.clone(), event });
        Ok(())
    }

    fn lock_uses(&self) -> std::sync::MutexGuard<'_, PendingUses<DeviceEvent>> {
        self.uses.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // Back to the cache with the events of the copies that may still use it: it is reused
        // once they have completed, and nothing waits here.
        let uses = std::mem::take(self.uses.get_mut().unwrap_or_else(|e| e.into_inner()));
        if let Some(mut allocator) = host_allocator_if_initialised() {
            allocator.release(self.block, uses.into_events());
        }
    }
}

/// A device word where index kernels record the first out-of-range index. It starts at 0, which
/// is never out of range when a kernel runs: the front end rejects every index into a dim of size
/// 0 before launching (any other start value is an index some kernel could record).
struct BadIndex(DeviceBuffer);

impl BadIndex {
    fn new(device: &Arc<CudaDevice>) -> CudaResult<BadIndex> {
        let buffer = device.alloc(8)?;
        device.copy_from_host(buffer.ptr(), &0u64.to_le_bytes())?;
        Ok(BadIndex(buffer))
    }

    fn ptr(&self) -> u64 {
        self.0.ptr()
    }

    fn check(&self, op: &'static str, size: usize) -> CudaResult<()> {
        let device = self.0.device();
        let mut word = [0u8; 8];
        device.copy_to_host(&mut word, self.0.ptr())?;
        let raw = u64::from_le_bytes(word);
        if raw == 0 {
            return Ok(());
        }
        Err(invalid(
            op,
            format!("index {} is out of range for a dimension of size {size}", raw as i64),
            "indices must lie in 0..size (a negative index is out of range, as in PyTorch); check how \
             the index tensor was built",
        ))
    }
}

#[track_caller]
pub(super) fn invalid(op: &'static str, detail: String, help: &str) -> CudaError {
    Error::InvalidArgument { op, detail, help: help.to_string(), location: Location::caller() }.into()
}

#[track_caller]
fn same_dtype(op: &str, a: DType, b: DType) -> CudaResult<()> {
    if a == b {
        return Ok(());
    }
    Err(invalid(
        "cuda kernel",
        format!("`{op}` got {a} and {b}; the CUDA kernels take operands of one dtype"),
        "promote both operands to a common dtype (`to_dtype`) before the op",
    ))
}

#[track_caller]
fn bool_mask(op: &'static str, dtype: DType) -> CudaResult<()> {
    if matches!(dtype, DType::Bool | DType::U8) {
        return Ok(());
    }
    Err(invalid(
        op,
        format!("the mask has dtype {dtype}"),
        "make the mask bool, e.g. with a comparison such as `x.gt(0.0)`",
    ))
}

#[track_caller]
fn index_dtype(op: &'static str, dtype: DType) -> CudaResult<()> {
    if matches!(dtype, DType::I64 | DType::I32) {
        return Ok(());
    }
    Err(invalid(op, format!("the index has dtype {dtype}"), "indices must be i64 or i32"))
}

#[track_caller]
fn too_large(device: Device, len: usize, dtype: DType) -> CudaError {
    invalid(
        "cuda alloc",
        format!("{len} elements of {dtype} on {device} do not fit in the address space"),
        "check the shape that led to this size",
    )
}
