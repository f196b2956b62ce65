//! One [`CudaDevice`] per `cuda:N`, made at first use: the driver context, the one stream every
//! op of that device is queued on (so work is ordered and freed blocks can be reused at once),
//! the kernel modules compiled for its architecture, its caching allocator, and cuBLAS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};

use super::allocator::{Allocation, CachingAllocator, RawAllocError, RawAllocator};
use super::error::{CudaError, CudaResult};
use super::kernels::{self, KernelModule};
use super::nvrtc::{self, Arch, PtxParam};
use crate::device::Device;

/// A CUDA device in use by this process.
pub struct CudaDevice {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: Arch,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// Each loaded kernel's parameter list from its PTX, to check launches against.
    signatures: Mutex<HashMap<String, Vec<PtxParam>>>,
    allocator: Mutex<CachingAllocator<DriverAllocator>>,
    blas: OnceLock<Result<Arc<cudarc::cublas::CudaBlas>, String>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice(cuda:{}, {})", self.ordinal, self.arch)
    }
}

static DEVICES: Mutex<Vec<(usize, Arc<CudaDevice>)>> = Mutex::new(Vec::new());

/// The device `cuda:ordinal`, set up at first use. Without a driver, or for an ordinal past the
/// device count, this is `Error::DeviceUnavailable` (inside [`CudaError::Core`]), never a panic.
pub fn device(ordinal: usize) -> CudaResult<Arc<CudaDevice>> {
    let mut devices = lock(&DEVICES);
    if let Some((_, d)) = devices.iter().find(|(o, _)| *o == ordinal) {
        return Ok(d.clone());
    }
    // Checks the driver is loadable before any cudarc call that would panic without it.
    Device::Cuda(ordinal).ensure_available()?;
    let this = Device::Cuda(ordinal);
    let ctx =
        CudaContext::new(ordinal).map_err(|e| CudaError::driver(this, "cuDevicePrimaryCtxRetain", e))?;
    let stream = ctx.new_stream().map_err(|e| CudaError::driver(this, "cuStreamCreate", e))?;
    let (major, minor) =
        ctx.compute_capability().map_err(|e| CudaError::driver(this, "cuDeviceGetAttribute", e))?;
    let device = Arc::new(CudaDevice {
        ordinal,
        arch: Arch::from_compute_capability(major, minor),
        allocator: Mutex::new(CachingAllocator::new(DriverAllocator { ordinal, ctx: ctx.clone() })),
        ctx,
        stream,
        modules: Mutex::new(HashMap::new()),
        functions: Mutex::new(HashMap::new()),
        signatures: Mutex::new(HashMap::new()),
        blas: OnceLock::new(),
    });
    devices.push((ordinal, device.clone()));
    Ok(device)
}

/// The device if this process has already used it (for statistics that must not create a
/// context just to report zeros).
pub fn device_if_initialised(ordinal: usize) -> Option<Arc<CudaDevice>> {
    lock(&DEVICES).iter().find(|(o, _)| *o == ordinal).map(|(_, d)| d.clone())
}

impl CudaDevice {
    pub fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The architecture its kernels are compiled for (`sm_86`).
    pub fn arch(&self) -> &Arch {
        &self.arch
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all of this device's work is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Waits until everything queued on the device's stream has finished.
    pub fn synchronize(&self) -> CudaResult<()> {
        self.stream.synchronize().map_err(|e| CudaError::driver(self.device(), "cuStreamSynchronize", e))
    }

    /// The caching allocator (statistics, `empty_cache`).
    pub fn allocator(&self) -> MutexGuard<'_, CachingAllocator<DriverAllocator>> {
        lock(&self.allocator)
    }

    /// Allocates `bytes` from the caching allocator.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> CudaResult<DeviceBuffer> {
        let allocation = self.allocator().allocate(bytes)?;
        Ok(DeviceBuffer { device: self.clone(), allocation })
    }

    /// Releases cached blocks no tensor uses back to the driver; returns the bytes released.
    pub fn empty_cache(&self) -> CudaResult<usize> {
        // Work still queued may use blocks that are free on the host side already.
        self.synchronize()?;
        self.allocator().empty_cache()
    }

    /// Kernel `name`, compiling its module for this device's architecture at first use. The
    /// compiled image is shared by every device of the same architecture.
    pub fn function(&self, name: &str) -> CudaResult<CudaFunction> {
        if let Some(f) = lock(&self.functions).get(name) {
            return Ok(f.clone());
        }
        let module_def = kernels::module_for_kernel(name)?;
        let module = self.module(module_def)?;
        let function = module.load_function(name).map_err(|e| CudaError::KernelNotFound {
            module: module_def.name,
            kernel: name.to_string(),
            device: self.device(),
            message: e.to_string(),
        })?;
        lock(&self.functions).insert(name.to_string(), function.clone());
        Ok(function)
    }

    fn module(&self, def: &'static KernelModule) -> CudaResult<Arc<CudaModule>> {
        if let Some(m) = lock(&self.modules).get(def.name) {
            return Ok(m.clone());
        }
        let (image, signatures) = compiled_image(def, &self.arch)?;
        let module = self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec())).map_err(|e| {
            CudaError::ModuleLoad { module: def.name, device: self.device(), message: e.to_string() }
        })?;
        lock(&self.signatures).extend(signatures.iter().cloned());
        lock(&self.modules).insert(def.name, module.clone());
        Ok(module)
    }

    /// Queues kernel `name` with `args` on the device's stream.
    pub(crate) fn launch(&self, name: &str, config: LaunchConfig, args: &[Arg]) -> CudaResult<()> {
        let function = self.function(name)?;
        // A launch whose arguments do not match the kernel's parameters would read garbage or
        // crash the context: compare with the PTX declaration first.
        if let Some(expected) = lock(&self.signatures).get(name) {
            let given: Vec<PtxParam> = args.iter().map(Arg::ptx_param).collect();
            if &given != expected {
                return Err(CudaError::LaunchArguments {
                    kernel: name.to_string(),
                    expected: list_params(expected),
                    given: list_params(&given),
                });
            }
        }
        let mut builder = self.stream.launch_builder(&function);
        for arg in args {
            match arg {
                Arg::U64(v) => builder.arg(v),
                Arg::I64(v) => builder.arg(v),
                Arg::F64(v) => builder.arg(v),
                Arg::U32(v) => builder.arg(v),
                Arg::U16(v) => builder.arg(v),
                Arg::U8(v) => builder.arg(v),
            };
        }
        // SAFETY: every kernel's parameter list is documented at the top of its .cu file, and the
        // launchers in storage.rs pass arguments of exactly those types and order; the device
        // pointers come from live allocations sized for the element counts passed with them.
        unsafe { builder.launch(config) }
            .map_err(|e| CudaError::driver(self.device(), "cuLaunchKernel", e))?;
        Ok(())
    }

    /// cuBLAS on this device's stream, created at first use.
    pub fn blas(&self) -> CudaResult<Arc<cudarc::cublas::CudaBlas>> {
        let device = self.device();
        self.blas
            .get_or_init(|| {
                // SAFETY: only tries to dlopen libcublas by its usual names.
                if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                    return Err("libcublas could not be loaded".to_string());
                }
                cudarc::cublas::CudaBlas::new(self.stream.clone()).map(Arc::new).map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|message| CudaError::Cublas { device, call: "cublasCreate", message })
    }
}

/// A kernel argument, kept alive until the launch has read it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg {
    U64(u64),
    I64(i64),
    F64(f64),
    U32(u32),
    U16(u16),
    U8(u8),
}

impl Arg {
    /// How PTX declares a parameter that takes this argument.
    pub(crate) fn ptx_param(&self) -> PtxParam {
        match self {
            Arg::U64(_) | Arg::I64(_) => PtxParam::Bits(64),
            Arg::F64(_) => PtxParam::F64,
            Arg::U32(_) => PtxParam::Bits(32),
            Arg::U16(_) => PtxParam::Bits(16),
            Arg::U8(_) => PtxParam::Bits(8),
        }
    }
}

fn list_params(params: &[PtxParam]) -> String {
    let names: Vec<String> = params.iter().map(PtxParam::to_string).collect();
    format!("({})", names.join(", "))
}

/// Grid-stride launch shape for `n` elements.
pub(crate) fn elementwise_config(n: usize) -> LaunchConfig {
    const THREADS: usize = 256;
    let blocks = n.div_ceil(THREADS).clamp(1, 65_535) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS as u32, 1, 1), shared_mem_bytes: 0 }
}

/// One block per output row of `row_len` elements (the reduce and softmax kernels).
pub(crate) fn row_config(rows: usize, row_len: usize) -> LaunchConfig {
    let threads = row_len.next_power_of_two().clamp(32, 1024) as u32;
    let blocks = rows.clamp(1, 65_535) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// Device memory from a device's caching allocator, returned to it on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    device: Arc<CudaDevice>,
    allocation: Allocation,
}

impl DeviceBuffer {
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// The device address of the first byte.
    pub fn ptr(&self) -> u64 {
        self.allocation.ptr
    }

    /// Usable bytes (the request; the block may be larger).
    pub fn len(&self) -> usize {
        self.allocation.requested
    }

    pub fn is_empty(&self) -> bool {
        self.allocation.requested == 0
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Back to the cache, not to the driver. Work already queued on the device's one stream
        // runs before anything that reuses the block, so no synchronisation is needed.
        self.device.allocator().free(self.allocation.ptr);
    }
}

/// The driver's allocation calls for one device.
#[derive(Debug)]
pub struct DriverAllocator {
    ordinal: usize,
    ctx: Arc<CudaContext>,
}

impl RawAllocator for DriverAllocator {
    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    fn allocate(&mut self, size: usize) -> Result<u64, RawAllocError> {
        self.ctx.bind_to_thread().map_err(|e| RawAllocError::Driver(e.to_string()))?;
        // SAFETY: the context is current on this thread; the size is non-zero.
        unsafe { cudarc::driver::result::malloc_sync(size) }.map_err(|e| {
            if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                RawAllocError::OutOfMemory
            } else {
                RawAllocError::Driver(e.to_string())
            }
        })
    }

    fn free(&mut self, ptr: u64, _size: usize) -> Result<(), RawAllocError> {
        self.ctx.bind_to_thread().map_err(|e| RawAllocError::Driver(e.to_string()))?;
        // SAFETY: `ptr` is a segment this allocator got from cuMemAlloc and frees exactly once
        // (the caching allocator releases a segment only when no block in it is live).
        unsafe { cudarc::driver::result::free_sync(ptr) }.map_err(|e| RawAllocError::Driver(e.to_string()))
    }

    fn mem_info(&self) -> Option<(usize, usize)> {
        self.ctx.mem_get_info().ok()
    }
}

/// The image of `def` for `arch`, compiled once per process and architecture.
/// A module compiled for one architecture: the image the driver loads, and each kernel's
/// parameter list.
type Image = (Arc<[u8]>, Arc<[(String, Vec<PtxParam>)]>);

fn compiled_image(def: &'static KernelModule, arch: &Arch) -> CudaResult<Image> {
    static IMAGES: Mutex<Vec<(Arch, &'static str, Image)>> = Mutex::new(Vec::new());
    if let Some((_, _, image)) = lock(&IMAGES).iter().find(|(a, m, _)| a == arch && *m == def.name) {
        return Ok(image.clone());
    }
    // Compiled outside the lock: other modules may compile at the same time.
    let compiled = nvrtc::compile(def, arch, &nvrtc::info().include_dirs)?;
    let image: Image = (compiled.image().into(), compiled.signatures().into());
    lock(&IMAGES).push((arch.clone(), def.name, image.clone()));
    Ok(image)
}

/// Locks a mutex; a panic elsewhere while holding it leaves plain bookkeeping that is still
/// usable, so poisoning is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
