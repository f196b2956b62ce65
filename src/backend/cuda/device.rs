//! One [`CudaDevice`] per `cuda:N`, made at first use: the driver context, the one stream every
//! op of that device is queued on (so work is ordered and freed blocks can be reused at once),
//! the kernel modules compiled for its architecture, its caching allocator, and cuBLAS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};

use super::allocator::{Allocation, CachingAllocator, RawAllocError, RawAllocator};
use super::error::{CudaError, CudaResult};
use super::host_allocator::{CachingHostAllocator, RawHostAllocator, UseEvent};
use super::nvrtc::{self, Arch, PtxParam};
use super::registry::{self, KernelModule};
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

    /// Makes this device's context current on the calling thread.
    ///
    /// The driver keeps the current context per thread, and cudarc's safe calls bind it but its
    /// raw ones do not: a raw copy or a cuBLAS call on a thread that never bound this context (a
    /// test thread, a data loader worker, any user thread), or that last bound another device's,
    /// fails with `CUDA_ERROR_INVALID_CONTEXT` or runs in the wrong context. So every raw driver
    /// and cuBLAS call of the backend lives in a method that calls this first (a unit test reads
    /// the backend's sources and holds every such function to it).
    pub fn bind(&self) -> CudaResult<()> {
        self.ctx.bind_to_thread().map_err(|e| CudaError::driver(self.device(), "cuCtxSetCurrent", e))
    }

    /// Queues a copy of pageable host bytes to device address `dst` on the device's stream. The
    /// driver stages pageable memory before returning, so `src` may be reused at once.
    pub(crate) fn copy_from_host(&self, dst: u64, src: &[u8]) -> CudaResult<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: callers pass a live allocation of at least `src.len()` bytes at `dst`; the
        // context of the stream is current; a pageable source is read before the call returns.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, self.stream.cu_stream()) }
            .map_err(|e| CudaError::driver(self.device(), "cuMemcpyHtoDAsync", e))
    }

    /// Copies `dst.len()` bytes from device address `src` into pageable host memory, after the
    /// work queued before it, and waits for the device.
    pub(crate) fn copy_to_host(&self, dst: &mut [u8], src: u64) -> CudaResult<()> {
        if !dst.is_empty() {
            self.bind()?;
            // SAFETY: callers pass a live allocation of at least `dst.len()` bytes at `src`; into
            // pageable memory the copy has finished when the call returns.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }
                .map_err(|e| CudaError::driver(self.device(), "cuMemcpyDtoHAsync", e))?;
        }
        self.synchronize()
    }

    /// Queues a copy of `len` bytes from page-locked host memory at `src` to `dst`.
    ///
    /// # Safety
    /// `src` must be page-locked memory of at least `len` bytes that nobody frees or writes
    /// before the copy has run (record an event after it); `dst` a live allocation of `len` bytes.
    pub(crate) unsafe fn copy_from_pinned(&self, dst: u64, src: *const u8, len: usize) -> CudaResult<()> {
        self.bind()?;
        // SAFETY: as the caller promises; the stream's context is current.
        unsafe { cudarc::driver::sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, self.stream.cu_stream()) }
            .result()
            .map_err(|e| CudaError::driver(self.device(), "cuMemcpyHtoDAsync", e))
    }

    /// Queues a copy of `len` bytes from `src` into page-locked host memory at `dst`.
    ///
    /// # Safety
    /// `dst` must be page-locked memory of at least `len` bytes that nobody frees, reads or
    /// writes before the copy has run; `src` a live allocation of `len` bytes.
    pub(crate) unsafe fn copy_to_pinned(&self, dst: *mut u8, src: u64, len: usize) -> CudaResult<()> {
        self.bind()?;
        // SAFETY: as the caller promises; the stream's context is current.
        unsafe { cudarc::driver::sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, self.stream.cu_stream()) }
            .result()
            .map_err(|e| CudaError::driver(self.device(), "cuMemcpyDtoHAsync", e))
    }

    /// Copies `bytes` bytes from `src` on device `source` to `dst` on this device, without
    /// blocking the host, ordered on both streams as PyTorch orders its copies between devices:
    /// this stream waits for the work queued on the source's stream (which produced `src`), the
    /// copy runs on this stream, and then the source's stream waits for the copy. The last wait
    /// is what lets the caller drop `src` at once: its block goes back to the source's cache and
    /// whatever reuses it (or writes to it in place) is queued on the source's stream, after the
    /// copy has read it.
    pub(crate) fn copy_from_peer(
        &self,
        dst: u64,
        source: &CudaDevice,
        src: u64,
        bytes: usize,
    ) -> CudaResult<()> {
        if bytes == 0 {
            return Ok(());
        }
        let source_ready = source.record_event()?;
        self.wait_for(&source_ready)?;
        self.bind()?;
        // SAFETY: both allocations are live and hold `bytes` bytes; the contexts are theirs; this
        // stream's context is current; the source has been produced (the wait above).
        unsafe {
            cudarc::driver::result::memcpy_peer_async(
                self.ctx.cu_ctx(),
                dst,
                source.ctx.cu_ctx(),
                src,
                bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| CudaError::driver(self.device(), "cuMemcpyPeerAsync", e))?;
        let copied = self.record_event()?;
        source.wait_for(&copied)
    }

    /// An event marking the work queued on this device's stream so far.
    pub(crate) fn record_event(&self) -> CudaResult<CudaEvent> {
        self.stream.record_event(None).map_err(|e| CudaError::driver(self.device(), "cuEventRecord", e))
    }

    /// Makes this device's stream wait (on the device, not the host) for `event`, which may have
    /// been recorded on another device.
    pub(crate) fn wait_for(&self, event: &CudaEvent) -> CudaResult<()> {
        self.stream.wait(event).map_err(|e| CudaError::driver(self.device(), "cuStreamWaitEvent", e))
    }

    /// Has the work before `event` finished? Does not wait. A driver error counts as not
    /// finished: a context in an error state never finishes anything, and memory guarded by the
    /// event is better leaked than reused under a copy.
    pub(crate) fn event_done(&self, event: &CudaEvent) -> bool {
        self.bind().is_ok() && event.try_is_complete().unwrap_or(false)
    }

    /// Waits on the host until the work before `event` has finished.
    pub(crate) fn wait_on_host(&self, event: &CudaEvent) -> CudaResult<()> {
        event.synchronize().map_err(|e| CudaError::driver(self.device(), "cuEventSynchronize", e))
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
        let module_def = registry::module_for_kernel(name)?;
        let module = self.module(module_def)?;
        self.bind()?;
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

/// Elements each thread of an element-wise kernel takes (`ELEMENTS_PER_THREAD` in
/// `kernels/common.cuh`, read by the kernels' `for_each_element`).
pub(crate) const ELEMENTS_PER_THREAD: usize = 4;

/// Launch shape for the element-wise kernels that take [`ELEMENTS_PER_THREAD`] elements each.
pub(crate) fn elementwise_unrolled_config(n: usize) -> LaunchConfig {
    elementwise_config(n.div_ceil(ELEMENTS_PER_THREAD))
}

/// One block per row for softmax: a thread per four elements of the row (a power of two
/// between 32 and 1,024), so that each thread has several reads in flight.
pub(crate) fn softmax_config(rows: usize, row_len: usize) -> LaunchConfig {
    let threads = row_len.div_ceil(4).next_power_of_two().clamp(32, 1024) as u32;
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

/// An event recorded on a device's stream after a copy that used a pinned buffer.
#[derive(Debug)]
pub struct DeviceEvent {
    pub(crate) device: Arc<CudaDevice>,
    pub(crate) event: CudaEvent,
}

impl DeviceEvent {
    pub(crate) fn wait_on_host(&self) -> CudaResult<()> {
        self.device.wait_on_host(&self.event)
    }
}

impl UseEvent for DeviceEvent {
    fn is_done(&self) -> bool {
        self.device.event_done(&self.event)
    }
}

/// The driver's pinning calls, made in the context of the device that first asked for pinned
/// memory. The blocks are portable: pinned for every context, so any device copies from them
/// asynchronously.
#[derive(Debug)]
pub struct DriverHostAllocator {
    device: Arc<CudaDevice>,
}

impl RawHostAllocator for DriverHostAllocator {
    type Event = DeviceEvent;

    fn device(&self) -> Device {
        self.device.device()
    }

    fn allocate(&mut self, size: usize) -> Result<u64, RawAllocError> {
        self.device.bind().map_err(|e| RawAllocError::Driver(e.to_string()))?;
        let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: the context is current; the size is a non-zero size class.
        match unsafe { cudarc::driver::result::malloc_host(size, flags) } {
            Ok(ptr) => Ok(ptr as u64),
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Err(RawAllocError::OutOfMemory)
            }
            Err(e) => Err(RawAllocError::Driver(e.to_string())),
        }
    }

    fn free(&mut self, ptr: u64, _size: usize) -> Result<(), RawAllocError> {
        self.device.bind().map_err(|e| RawAllocError::Driver(e.to_string()))?;
        // SAFETY: `ptr` came from cuMemHostAlloc and is unpinned once, when no buffer holds it
        // and every copy that used it has completed (the caching host allocator's contract).
        unsafe { cudarc::driver::result::free_host(ptr as *mut std::ffi::c_void) }
            .map_err(|e| RawAllocError::Driver(e.to_string()))
    }
}

/// The caching allocator of pinned host memory.
pub(crate) type HostAllocator = CachingHostAllocator<DriverHostAllocator>;

static HOST_ALLOCATOR: OnceLock<Mutex<HostAllocator>> = OnceLock::new();

/// The process's one caching allocator of pinned host memory (pinned memory belongs to no
/// device), made at first use with `device`'s context.
pub(crate) fn host_allocator(device: &Arc<CudaDevice>) -> MutexGuard<'static, HostAllocator> {
    lock(HOST_ALLOCATOR.get_or_init(|| {
        Mutex::new(CachingHostAllocator::new(DriverHostAllocator { device: device.clone() }))
    }))
}

/// The allocator, if anything has been pinned in this process.
pub(crate) fn host_allocator_if_initialised() -> Option<MutexGuard<'static, HostAllocator>> {
    HOST_ALLOCATOR.get().map(lock)
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

#[cfg(test)]
mod tests {
    use syn::spanned::Spanned;

    use super::{ELEMENTS_PER_THREAD, elementwise_unrolled_config, softmax_config};
    use crate::backend::cuda::registry::HEADERS;

    #[test]
    fn the_launcher_gives_each_thread_as_many_elements_as_the_kernels_take() {
        let common = HEADERS.iter().find(|(name, _)| *name == "common.cuh").map(|(_, text)| *text);
        let define = format!("#define ELEMENTS_PER_THREAD {ELEMENTS_PER_THREAD}\n");
        assert!(common.is_some_and(|text| text.contains(&define)), "common.cuh must say `{define}`");
        // 2^24 elements: 2^22 threads of 256, 16,384 blocks.
        assert_eq!(elementwise_unrolled_config(1 << 24).grid_dim, (16_384, 1, 1));
        assert_eq!(elementwise_unrolled_config(1).grid_dim, (1, 1, 1));
    }

    #[test]
    fn softmax_gives_a_thread_about_four_elements_of_its_row() {
        assert_eq!(softmax_config(4096, 1024).block_dim, (256, 1, 1));
        assert_eq!(softmax_config(4096, 1024).grid_dim, (4096, 1, 1));
        assert_eq!(softmax_config(3, 10).block_dim, (32, 1, 1));
        assert_eq!(softmax_config(1, 100_000).block_dim, (1024, 1, 1));
        assert_eq!(softmax_config(100_000, 7).grid_dim, (65_535, 1, 1));
    }

    /// Raw driver and cuBLAS calls: they run in whatever context is current on the thread.
    const RAW_CALLS: [&str; 3] = ["driver::result::", "driver::sys::cu", "cublas::result::"];

    /// Every function of the CUDA backend that makes a raw driver or cuBLAS call binds its
    /// device's context first (`bind()`, or cudarc's `bind_to_thread()`): a call without one fails
    /// on any thread that did not create the device, or runs on the wrong device.
    #[test]
    fn every_raw_driver_call_binds_the_context_first() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend/cuda");
        let mut checked = 0;
        let mut unbound = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            let file = syn::parse_file(&source).unwrap();
            let mut functions = Vec::new();
            collect_functions(&file.items, &mut functions);
            for (name, range) in functions {
                let body: String = source[range.clone()].split_whitespace().collect();
                let first_raw = RAW_CALLS.iter().filter_map(|c| body.find(c)).min();
                let Some(first_raw) = first_raw else { continue };
                checked += 1;
                let bound_before = [".bind()?", ".bind().", "bind_to_thread()"]
                    .iter()
                    .filter_map(|b| body.find(b))
                    .any(|at| at < first_raw);
                if !bound_before {
                    unbound.push(format!("{}: fn {name}", path.file_name().unwrap().to_string_lossy()));
                }
            }
        }
        assert!(checked >= 8, "the raw calls were found ({checked} functions)");
        assert!(unbound.is_empty(), "raw driver calls without binding the context first: {unbound:?}");
    }

    fn collect_functions(items: &[syn::Item], out: &mut Vec<(String, std::ops::Range<usize>)>) {
        for item in items {
            match item {
                syn::Item::Fn(f) => out.push((f.sig.ident.to_string(), f.span().byte_range())),
                syn::Item::Impl(i) => {
                    for inner in &i.items {
                        if let syn::ImplItem::Fn(f) = inner {
                            out.push((f.sig.ident.to_string(), f.span().byte_range()));
                        }
                    }
                }
                syn::Item::Mod(m) => {
                    if let Some((_, items)) = &m.content {
                        collect_functions(items, out);
                    }
                }
                _ => {}
            }
        }
    }
}
