//! Creation: every constructor takes a device; `*_like` and `new_*` inherit device and dtype.

use std::panic::Location;

use super::check;
use super::{Origin, Storage, Tensor, TensorOptions};
use crate::backend::CpuStorage;
use crate::backend::cuda::CudaStorage;
use crate::backend::fake;
use crate::device::Device;
use crate::dtype::{DType, WithDType};
use crate::error::{Error, Result};
use crate::shape::{Layout, checked_numel, fmt_shape};

type Loc = &'static Location<'static>;

impl Tensor {
    /// The one door through which new data enters a device: fake in fake mode, otherwise the
    /// device must be usable and `data` produces the host elements.
    pub(crate) fn create(
        shape: &[usize],
        opts: TensorOptions,
        op: &'static str,
        location: Loc,
        data: impl FnOnce(usize) -> CpuStorage,
    ) -> Result<Tensor> {
        let numel = check::valid_shape(op, shape, opts.dtype, location)?;
        let storage = if fake::is_active() {
            Storage::Fake
        } else {
            // The elements are made on the host first, whatever the device.
            super::ensure_host_room(op, location, numel * opts.dtype.size_in_bytes())?;
            upload(data(numel), &opts.device, op, location)?
        };
        let tensor = Tensor::from_parts(
            storage,
            Layout::contiguous(shape),
            opts.dtype,
            opts.device,
            Origin::new(op, location),
        );
        super::observe::created(&tensor);
        Ok(tensor)
    }

    /// A dry-run tensor: device, dtype and shape, no element data. Works on any device, GPU or not.
    /// A shape no tensor can have (one whose size overflows) is an error, as for real tensors.
    #[track_caller]
    pub fn fake(shape: impl AsRef<[usize]>, dtype: DType, device: &Device) -> Result<Tensor> {
        let location = Location::caller();
        check::valid_shape("fake", shape.as_ref(), dtype, location)?;
        Ok(Tensor::from_parts(
            Storage::Fake,
            Layout::contiguous(shape.as_ref()),
            dtype,
            *device,
            Origin::new("fake", location),
        ))
    }

    #[track_caller]
    pub fn zeros(shape: impl AsRef<[usize]>, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        Self::full_at(shape.as_ref(), 0.0, opts.into(), "zeros", Location::caller())
    }

    #[track_caller]
    pub fn ones(shape: impl AsRef<[usize]>, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        Self::full_at(shape.as_ref(), 1.0, opts.into(), "ones", Location::caller())
    }

    /// Every element `value` (converted to the dtype).
    #[track_caller]
    pub fn full(shape: impl AsRef<[usize]>, value: f64, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        Self::full_at(shape.as_ref(), value, opts.into(), "full", Location::caller())
    }

    /// The constructors that fill with one value, each made (and reporting errors) as `op`.
    fn full_at(
        shape: &[usize],
        value: f64,
        opts: TensorOptions,
        op: &'static str,
        location: Loc,
    ) -> Result<Tensor> {
        if opts.device.is_cuda() && !fake::is_active() {
            // Filled on the device: no host buffer, no copy.
            let numel = check::valid_shape(op, shape, opts.dtype, location)?;
            opts.device.ensure_available().map_err(|e| e.located(location))?;
            let storage = crate::cuda::cuda_device_for(&opts.device)
                .and_then(|d| CudaStorage::full(&d, opts.dtype, numel, value))
                .map_err(|e| super::cuda_error(e, location))?;
            return Ok(Tensor::on_device(storage, shape, opts, op, location));
        }
        Self::create(shape, opts, op, location, |n| CpuStorage::full(value, n, opts.dtype))
    }

    /// `start, start + step, ...` below `end` (`torch.arange(start, end, step)`).
    #[track_caller]
    pub fn arange(start: f64, end: f64, step: f64, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        let location = Location::caller();
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            return Err(check::invalid(
                "arange",
                format!("start={start}, end={end}, step={step}"),
                "start and end must be finite and step finite and non-zero",
                location,
            ));
        }
        let count = ((end - start) / step).ceil().max(0.0);
        // `as usize` would saturate a count past usize::MAX (or an infinite one) silently. The
        // bounds and step are finite, so the count is not NaN.
        if count >= usize::MAX as f64 {
            return Err(check::invalid(
                "arange",
                format!("start={start}, end={end}, step={step} gives {count:.3e} values"),
                "no machine holds that many values; check the bounds and the step",
                location,
            ));
        }
        let n = count as usize;
        let opts = opts.into();
        Self::create(&[n], opts, "arange", location, |n| {
            CpuStorage::from_f64s((0..n).map(|i| start + i as f64 * step), opts.dtype)
        })
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive.
    #[track_caller]
    pub fn linspace(start: f64, end: f64, steps: usize, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        let opts = opts.into();
        Self::create(&[steps], opts, "linspace", Location::caller(), |n| {
            let step = if n > 1 { (end - start) / (n - 1) as f64 } else { 0.0 };
            CpuStorage::from_f64s(
                (0..n).map(|i| if i + 1 == n && n > 1 { end } else { start + i as f64 * step }),
                opts.dtype,
            )
        })
    }

    /// The `n`×`n` identity.
    #[track_caller]
    pub fn eye(n: usize, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        let opts = opts.into();
        Self::create(&[n, n], opts, "eye", Location::caller(), |len| {
            CpuStorage::from_f64s(
                (0..len).map(|i| if i / n.max(1) == i % n.max(1) { 1.0 } else { 0.0 }),
                opts.dtype,
            )
        })
    }

    /// Uniform samples in [0, 1) from this thread's seeded generator ([`crate::manual_seed`]).
    #[track_caller]
    ///
    /// On a GPU the samples are made there, from a seed drawn from this thread's generator: as in
    /// PyTorch, the same seed gives other numbers on a GPU than on the CPU.
    pub fn rand(shape: impl AsRef<[usize]>, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        let opts = opts.into();
        let location = Location::caller();
        float_only("rand", opts.dtype, location)?;
        if let Some(on_device) = Self::random_on_device(shape.as_ref(), opts, false, "rand", location) {
            return on_device;
        }
        Self::create(shape.as_ref(), opts, "rand", location, |n| {
            crate::random::with_rng(|rng| {
                CpuStorage::from_f64s((0..n).map(|_| crate::random::sample_uniform(rng)), opts.dtype)
            })
        })
    }

    /// Standard-normal samples from this thread's seeded generator ([`crate::manual_seed`]).
    #[track_caller]
    pub fn randn(shape: impl AsRef<[usize]>, opts: impl Into<TensorOptions>) -> Result<Tensor> {
        let opts = opts.into();
        let location = Location::caller();
        float_only("randn", opts.dtype, location)?;
        if let Some(on_device) = Self::random_on_device(shape.as_ref(), opts, true, "randn", location) {
            return on_device;
        }
        Self::create(shape.as_ref(), opts, "randn", location, |n| {
            crate::random::with_rng(|rng| {
                CpuStorage::from_f64s((0..n).map(|_| crate::random::sample_normal(rng)), opts.dtype)
            })
        })
    }

    /// Samples made by a kernel on a CUDA device, or `None` for other devices and dry runs.
    fn random_on_device(
        shape: &[usize],
        opts: TensorOptions,
        normal: bool,
        op: &'static str,
        location: Loc,
    ) -> Option<Result<Tensor>> {
        if !opts.device.is_cuda() || fake::is_active() {
            return None;
        }
        let made = || -> Result<Tensor> {
            let numel = check::valid_shape(op, shape, opts.dtype, location)?;
            opts.device.ensure_available().map_err(|e| e.located(location))?;
            let seed = crate::random::next_u64();
            let storage = crate::cuda::cuda_device_for(&opts.device)
                .and_then(|d| CudaStorage::random(&d, opts.dtype, numel, normal, seed))
                .map_err(|e| super::cuda_error(e, location))?;
            Ok(Tensor::on_device(storage, shape, opts, op, location))
        };
        Some(made())
    }

    /// A new tensor over storage already on a CUDA device.
    fn on_device(
        storage: CudaStorage,
        shape: &[usize],
        opts: TensorOptions,
        op: &'static str,
        location: Loc,
    ) -> Tensor {
        let tensor = Tensor::from_parts(
            Storage::Cuda(storage),
            Layout::contiguous(shape),
            opts.dtype,
            opts.device,
            Origin::new(op, location),
        );
        super::observe::created(&tensor);
        tensor
    }

    /// A tensor owning `data` with `shape`; the dtype is `T`'s.
    #[track_caller]
    pub fn from_vec<T: WithDType>(
        data: Vec<T>,
        shape: impl AsRef<[usize]>,
        device: &Device,
    ) -> Result<Tensor> {
        let location = Location::caller();
        let shape = shape.as_ref();
        check_len("from_vec", data.len(), shape, location)?;
        let opts = TensorOptions { dtype: T::DTYPE, device: *device };
        Self::create(shape, opts, "from_vec", location, |_| CpuStorage::from_vec(data))
    }

    /// A tensor copied from `data` with `shape`; the dtype is `T`'s.
    #[track_caller]
    pub fn from_slice<T: WithDType>(
        data: &[T],
        shape: impl AsRef<[usize]>,
        device: &Device,
    ) -> Result<Tensor> {
        let location = Location::caller();
        let shape = shape.as_ref();
        check_len("from_slice", data.len(), shape, location)?;
        let opts = TensorOptions { dtype: T::DTYPE, device: *device };
        Self::create(shape, opts, "from_slice", location, |_| CpuStorage::from_vec(data.to_vec()))
    }

    /// A 0-dim tensor holding `value`.
    #[track_caller]
    pub fn scalar<T: WithDType>(value: T, device: &Device) -> Result<Tensor> {
        let opts = TensorOptions { dtype: T::DTYPE, device: *device };
        Self::create(&[], opts, "scalar", Location::caller(), |_| CpuStorage::from_vec(vec![value]))
    }

    /// Reads little-endian element bytes (the safetensors layout) into a new tensor.
    #[track_caller]
    pub fn from_raw_bytes(
        bytes: &[u8],
        dtype: DType,
        shape: impl AsRef<[usize]>,
        device: &Device,
    ) -> Result<Tensor> {
        Self::from_raw_bytes_at(bytes, dtype, shape.as_ref(), device, "from_raw_bytes", Location::caller())
    }

    /// [`Tensor::from_raw_bytes`] on behalf of `op` (a checkpoint load names the user's line, and
    /// the tensors it makes are made there).
    pub(crate) fn from_raw_bytes_at(
        bytes: &[u8],
        dtype: DType,
        shape: &[usize],
        device: &Device,
        op: &'static str,
        location: Loc,
    ) -> Result<Tensor> {
        let numel = checked_numel(shape).and_then(|n| n.checked_mul(dtype.size_in_bytes()));
        if numel != Some(bytes.len()) {
            return Err(check::invalid(
                op,
                format!("{} bytes do not hold a {dtype} tensor of shape {}", bytes.len(), fmt_shape(shape)),
                format!(
                    "a {dtype} element takes {} bytes; the shape and the data disagree",
                    dtype.size_in_bytes()
                ),
                location,
            ));
        }
        let opts = TensorOptions { dtype, device: *device };
        Self::create(shape, opts, op, location, |_| CpuStorage::from_le_bytes(bytes, dtype))
    }

    /// Zeros with `like`'s shape, dtype and device.
    #[track_caller]
    pub fn zeros_like(like: &Tensor) -> Result<Tensor> {
        Self::full_at(like.shape(), 0.0, like.options(), "zeros_like", Location::caller())
    }

    #[track_caller]
    pub fn ones_like(like: &Tensor) -> Result<Tensor> {
        Self::full_at(like.shape(), 1.0, like.options(), "ones_like", Location::caller())
    }

    #[track_caller]
    pub fn full_like(like: &Tensor, value: f64) -> Result<Tensor> {
        Self::full_at(like.shape(), value, like.options(), "full_like", Location::caller())
    }

    #[track_caller]
    pub fn rand_like(like: &Tensor) -> Result<Tensor> {
        Self::rand(like.shape(), like.options()).map(|t| t.renamed_op("rand_like"))
    }

    #[track_caller]
    pub fn randn_like(like: &Tensor) -> Result<Tensor> {
        Self::randn(like.shape(), like.options()).map(|t| t.renamed_op("randn_like"))
    }

    /// Zeros of `shape` with this tensor's dtype and device (`x.new_zeros(shape)`).
    #[track_caller]
    pub fn new_zeros(&self, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        Self::full_at(shape.as_ref(), 0.0, self.options(), "new_zeros", Location::caller())
    }

    #[track_caller]
    pub fn new_ones(&self, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        Self::full_at(shape.as_ref(), 1.0, self.options(), "new_ones", Location::caller())
    }

    #[track_caller]
    pub fn new_full(&self, shape: impl AsRef<[usize]>, value: f64) -> Result<Tensor> {
        Self::full_at(shape.as_ref(), value, self.options(), "new_full", Location::caller())
    }

    /// `data` with `shape`, converted to this tensor's dtype, on its device (`x.new_tensor(..)`).
    #[track_caller]
    pub fn new_tensor<T: WithDType>(&self, data: &[T], shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let location = Location::caller();
        let shape = shape.as_ref();
        check_len("new_tensor", data.len(), shape, location)?;
        let dtype = self.dtype();
        Self::create(shape, self.options(), "new_tensor", location, |_| {
            CpuStorage::from_f64s(data.iter().map(|x| x.to_f64()), dtype)
        })
    }

    /// This tensor's dtype and device, to create others like it.
    pub fn options(&self) -> TensorOptions {
        TensorOptions { dtype: self.dtype(), device: self.device() }
    }

    /// The same tensor reported as made by `op` (`rand_like` is built on `rand`).
    fn renamed_op(self, op: &'static str) -> Tensor {
        let origin = Origin::new(op, self.origin().location());
        let renamed = self.view(self.layout().clone(), origin);
        super::observe::renamed(&renamed);
        renamed
    }
}

/// Puts host elements on `device`.
pub(crate) fn upload(data: CpuStorage, device: &Device, op: &'static str, location: Loc) -> Result<Storage> {
    match device {
        Device::Cpu => Ok(Storage::Cpu(data)),
        Device::Cuda(_) => {
            device.ensure_available().map_err(|e| e.located(location))?;
            let on_device = crate::cuda::cuda_device_for(device)
                .and_then(|d| {
                    let len = data.len();
                    let bytes = data.to_le_bytes(&Layout::contiguous(&[len]));
                    CudaStorage::from_host_bytes(&d, data.dtype(), &bytes)
                })
                .map_err(|e| super::cuda_error(e, location))?;
            Ok(Storage::Cuda(on_device))
        }
        Device::Mps => {
            device.ensure_available().map_err(|e| e.located(location))?;
            Err(Error::Unsupported {
                op,
                device: *device,
                help: "this build has no MPS backend; run on `cpu` or `cuda:N`, or check device placement \
                       without a GPU in a fake scope (`devcheck::fake::enter()`)"
                    .to_string(),
                location,
            })
        }
    }
}

fn float_only(op: &'static str, dtype: DType, location: Loc) -> Result<()> {
    if dtype.is_float() {
        return Ok(());
    }
    Err(check::invalid(
        op,
        format!("random samples need a floating dtype, got {dtype}"),
        "ask for DType::F32 (the default) and cast afterwards if needed",
        location,
    ))
}

fn check_len(op: &'static str, len: usize, shape: &[usize], location: Loc) -> Result<()> {
    if checked_numel(shape) == Some(len) {
        return Ok(());
    }
    Err(check::invalid(
        op,
        format!("{len} values do not fill shape {}", fmt_shape(shape)),
        "the product of the dims must equal the number of values",
        location,
    ))
}
