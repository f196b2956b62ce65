//! A caching device-memory allocator modelled on PyTorch's `CUDACachingAllocator`.
//!
//! Asking the driver for memory (`cuMemAlloc`) is slow and synchronises the device, so memory is
//! taken from the driver in segments and handed out in blocks that are kept for reuse when freed:
//! - every request is rounded up to a multiple of 512 bytes (512 at least);
//! - requests of at most 1 MiB come from a pool of 2 MiB segments, larger ones from a pool of
//!   segments rounded up to a multiple of 2 MiB;
//! - the smallest free block that fits is taken (best fit), and split when the rest is worth
//!   keeping (at least 512 bytes in the small pool, more than 1 MiB in the large one);
//! - a freed block merges with free neighbours in its segment and stays reserved;
//! - when the driver is out of memory, unused segments are released and the request retried once,
//!   then [`crate::Error::OutOfMemory`] reports the numbers that explain it.
//!
//! [`CachingAllocator`] is generic over [`RawAllocator`], the driver's allocation calls, so the
//! pooling logic is tested against a simulated device of fixed capacity without a GPU.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::error::{CudaError, CudaResult};
use crate::device::Device;

/// Every block is a multiple of this many bytes.
pub const MIN_BLOCK_SIZE: usize = 512;
/// Requests up to this size are served from the small pool.
pub const SMALL_REQUEST: usize = 1 << 20;
/// The size of a small-pool segment.
pub const SMALL_SEGMENT: usize = 2 << 20;
/// Large-pool segments are multiples of this.
pub const LARGE_SEGMENT_ROUNDING: usize = 2 << 20;

/// The driver's side: allocate and free whole segments of device memory.
pub trait RawAllocator {
    /// The device the memory is on (for error messages).
    fn device(&self) -> Device;
    /// Allocates `size` bytes, returning the device address.
    fn allocate(&mut self, size: usize) -> Result<u64, RawAllocError>;
    /// Frees a segment returned by `allocate`.
    fn free(&mut self, ptr: u64, size: usize) -> Result<(), RawAllocError>;
    /// The device's `(free, total)` memory in bytes, when it can be asked.
    fn mem_info(&self) -> Option<(usize, usize)>;
}

/// Why a raw allocation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawAllocError {
    /// The device has no room for it.
    OutOfMemory,
    /// Any other driver failure, in the driver's words.
    Driver(String),
}

/// A block handed out by [`CachingAllocator::allocate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Device address of the first byte.
    pub ptr: u64,
    /// The block's size: the request rounded up.
    pub size: usize,
    /// The bytes asked for.
    pub requested: usize,
}

/// Counters in the spirit of `torch.cuda.memory_stats()`. "Peak" values are the largest seen
/// since creation or the last [`CachingAllocator::reset_peak_memory_stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in blocks held by live allocations (`memory_allocated`).
    pub allocated_bytes: usize,
    pub peak_allocated_bytes: usize,
    /// Bytes the live allocations asked for, before rounding.
    pub requested_bytes: usize,
    /// Bytes in segments obtained from the driver (`memory_reserved`).
    pub reserved_bytes: usize,
    pub peak_reserved_bytes: usize,
    /// Live allocations.
    pub active_blocks: usize,
    pub peak_active_blocks: usize,
    /// Segments obtained from the driver and not yet released.
    pub segments: usize,
    pub peak_segments: usize,
    /// Free blocks inside segments that also hold live allocations (fragmentation), and their bytes.
    pub inactive_split_blocks: usize,
    pub inactive_split_bytes: usize,
    /// Calls to allocate and free since creation.
    pub allocation_requests: u64,
    pub free_requests: u64,
    /// Segments allocated from and released to the driver since creation.
    pub device_allocations: u64,
    pub device_frees: u64,
    /// Allocations that found the device full, released the cache and tried again.
    pub allocation_retries: u64,
    /// Allocations that failed with out of memory.
    pub ooms: u64,
}

impl MemoryStats {
    /// Reserved bytes that no allocation uses: what [`CachingAllocator::empty_cache`] could at
    /// most give back.
    pub fn reserved_unused_bytes(&self) -> usize {
        self.reserved_bytes - self.allocated_bytes
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pool {
    Small = 0,
    Large = 1,
}

#[derive(Debug)]
struct Segment {
    size: usize,
    pool: Pool,
    /// Block start address -> (size, the request when allocated). The blocks tile the segment.
    blocks: BTreeMap<u64, (usize, Option<usize>)>,
}

/// The caching allocator of one device. Not thread-safe by itself: a device keeps it behind a
/// mutex.
#[derive(Debug)]
pub struct CachingAllocator<R: RawAllocator> {
    raw: R,
    /// Segment base address -> segment.
    segments: BTreeMap<u64, Segment>,
    /// Free blocks per pool as (size, address): the first entry at or above a size is the best fit.
    free: [BTreeSet<(usize, u64)>; 2],
    /// Live allocation address -> its segment's base address.
    live: HashMap<u64, u64>,
    stats: MemoryStats,
}

impl<R: RawAllocator> CachingAllocator<R> {
    pub fn new(raw: R) -> Self {
        CachingAllocator {
            raw,
            segments: BTreeMap::new(),
            free: [BTreeSet::new(), BTreeSet::new()],
            live: HashMap::new(),
            stats: MemoryStats::default(),
        }
    }

    /// The device the memory is on.
    pub fn device(&self) -> Device {
        self.raw.device()
    }

    /// The raw allocator underneath.
    pub fn raw(&self) -> &R {
        &self.raw
    }

    /// Allocates at least `requested` bytes (a zero-byte request gets the minimum block, so every
    /// allocation has its own address). Out of memory is `Error::OutOfMemory` inside
    /// [`CudaError::Core`], and leaves the allocator as it was apart from released cache.
    pub fn allocate(&mut self, requested: usize) -> CudaResult<Allocation> {
        self.stats.allocation_requests += 1;
        let Some(size) = round_size(requested) else {
            self.stats.ooms += 1;
            return Err(self.out_of_memory(requested));
        };
        let pool = if size <= SMALL_REQUEST { Pool::Small } else { Pool::Large };
        let (addr, block_size) = match self.free[pool as usize].range((size, 0)..).next().copied() {
            Some((block_size, addr)) => {
                self.free[pool as usize].remove(&(block_size, addr));
                (addr, block_size)
            }
            None => self.new_segment(pool, size, requested)?,
        };
        let base = self.segment_base(addr);
        let segment = self.segments.get_mut(&base).expect("free blocks belong to a segment");
        let remaining = block_size - size;
        let split = match pool {
            Pool::Small => remaining >= MIN_BLOCK_SIZE,
            Pool::Large => remaining > SMALL_REQUEST,
        };
        let taken = if split {
            let rest = addr + size as u64;
            segment.blocks.insert(rest, (remaining, None));
            self.free[pool as usize].insert((remaining, rest));
            size
        } else {
            block_size
        };
        segment.blocks.insert(addr, (taken, Some(requested)));
        self.live.insert(addr, base);

        let s = &mut self.stats;
        s.allocated_bytes += taken;
        s.requested_bytes += requested;
        s.active_blocks += 1;
        s.peak_allocated_bytes = s.peak_allocated_bytes.max(s.allocated_bytes);
        s.peak_active_blocks = s.peak_active_blocks.max(s.active_blocks);
        self.recount_inactive_split();
        Ok(Allocation { ptr: addr, size: taken, requested })
    }

    /// Returns a block to the cache. `false` when `ptr` is not a live allocation of this
    /// allocator (a double free), which changes nothing.
    pub fn free(&mut self, ptr: u64) -> bool {
        let Some(base) = self.live.remove(&ptr) else {
            return false;
        };
        self.stats.free_requests += 1;
        let segment = self.segments.get_mut(&base).expect("live blocks belong to a segment");
        let pool = segment.pool as usize;
        let Some((size, Some(requested))) = segment.blocks.get(&ptr).copied() else {
            unreachable!("a live block is recorded as allocated in its segment");
        };
        self.stats.allocated_bytes -= size;
        self.stats.requested_bytes -= requested;
        self.stats.active_blocks -= 1;

        let (mut start, mut merged) = (ptr, size);
        segment.blocks.remove(&ptr);
        if let Some((&next, &(next_size, None))) = segment.blocks.range(ptr + 1..).next() {
            segment.blocks.remove(&next);
            self.free[pool].remove(&(next_size, next));
            merged += next_size;
        }
        if let Some((&prev, &(prev_size, None))) = segment.blocks.range(..ptr).next_back() {
            segment.blocks.remove(&prev);
            self.free[pool].remove(&(prev_size, prev));
            start = prev;
            merged += prev_size;
        }
        segment.blocks.insert(start, (merged, None));
        self.free[pool].insert((merged, start));
        self.recount_inactive_split();
        true
    }

    /// Releases every segment with no live allocation back to the driver (`empty_cache`).
    /// Memory held by live tensors is never released; returns the bytes given back.
    pub fn empty_cache(&mut self) -> CudaResult<usize> {
        let unused: Vec<(u64, usize, Pool)> = self
            .segments
            .iter()
            .filter(|(_, s)| s.blocks.len() == 1 && s.blocks.values().all(|(_, r)| r.is_none()))
            .map(|(&base, s)| (base, s.size, s.pool))
            .collect();
        let mut released = 0;
        for (base, size, pool) in unused {
            if let Err(e) = self.raw.free(base, size) {
                let message = match e {
                    RawAllocError::OutOfMemory => "out of memory while freeing".to_string(),
                    RawAllocError::Driver(m) => m,
                };
                return Err(CudaError::Driver { device: self.device(), call: "cuMemFree", message });
            }
            self.segments.remove(&base);
            self.free[pool as usize].remove(&(size, base));
            self.stats.reserved_bytes -= size;
            self.stats.segments -= 1;
            self.stats.device_frees += 1;
            released += size;
        }
        Ok(released)
    }

    /// A copy of the counters.
    pub fn stats(&self) -> MemoryStats {
        self.stats.clone()
    }

    /// Sets every peak to its current value (`torch.cuda.reset_peak_memory_stats`).
    pub fn reset_peak_memory_stats(&mut self) {
        let s = &mut self.stats;
        s.peak_allocated_bytes = s.allocated_bytes;
        s.peak_reserved_bytes = s.reserved_bytes;
        s.peak_active_blocks = s.active_blocks;
        s.peak_segments = s.segments;
    }

    /// A human-readable table of the counters (`torch.cuda.memory_summary`).
    pub fn memory_summary(&self) -> String {
        format_summary(self.device(), &self.stats)
    }

    /// Checks the pool's bookkeeping: blocks tile every segment exactly, no two neighbouring
    /// blocks are both free, the free sets and the live map agree with the blocks, and the
    /// counters agree with all of it. `Err` says what is wrong.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut free_seen: [BTreeSet<(usize, u64)>; 2] = [BTreeSet::new(), BTreeSet::new()];
        let (mut allocated, mut requested, mut active, mut reserved) = (0, 0, 0, 0);
        for (&base, segment) in &self.segments {
            reserved += segment.size;
            let mut cursor = base;
            let mut previous_free = false;
            for (&addr, &(size, request)) in &segment.blocks {
                if addr != cursor {
                    return Err(format!("segment {base:#x}: block at {addr:#x}, expected {cursor:#x}"));
                }
                if size == 0 || size % MIN_BLOCK_SIZE != 0 {
                    return Err(format!("block {addr:#x} has size {size}"));
                }
                match request {
                    Some(r) => {
                        allocated += size;
                        requested += r;
                        active += 1;
                        if self.live.get(&addr) != Some(&base) {
                            return Err(format!("allocated block {addr:#x} missing from the live map"));
                        }
                        previous_free = false;
                    }
                    None => {
                        if previous_free {
                            return Err(format!(
                                "free block {addr:#x} was not merged with its free neighbour"
                            ));
                        }
                        free_seen[segment.pool as usize].insert((size, addr));
                        previous_free = true;
                    }
                }
                cursor = addr + size as u64;
            }
            if cursor != base + segment.size as u64 {
                return Err(format!("segment {base:#x}: blocks end at {cursor:#x}, not at its end"));
            }
        }
        if free_seen != self.free {
            return Err("the free sets disagree with the free blocks".to_string());
        }
        if self.live.len() != active {
            return Err(format!("{} live entries for {active} allocated blocks", self.live.len()));
        }
        let s = &self.stats;
        let counted = (s.allocated_bytes, s.requested_bytes, s.active_blocks, s.reserved_bytes, s.segments);
        let actual = (allocated, requested, active, reserved, self.segments.len());
        if counted != actual {
            return Err(format!(
                "counters (allocated, requested, active, reserved, segments) = {counted:?}, actual {actual:?}"
            ));
        }
        if s.peak_allocated_bytes < s.allocated_bytes || s.peak_reserved_bytes < s.reserved_bytes {
            return Err("a peak is below its current value".to_string());
        }
        Ok(())
    }

    /// Takes a new segment for a request of `size` (rounded) bytes from the driver, releasing the
    /// cache and retrying once when the device is full. Returns the segment's single free block.
    fn new_segment(&mut self, pool: Pool, size: usize, requested: usize) -> CudaResult<(u64, usize)> {
        let segment_size = match pool {
            Pool::Small => SMALL_SEGMENT,
            Pool::Large => match size.checked_next_multiple_of(LARGE_SEGMENT_ROUNDING) {
                Some(s) => s,
                None => {
                    self.stats.ooms += 1;
                    return Err(self.out_of_memory(requested));
                }
            },
        };
        let ptr = match self.raw.allocate(segment_size) {
            Ok(ptr) => ptr,
            Err(RawAllocError::OutOfMemory) => {
                self.stats.allocation_retries += 1;
                self.empty_cache()?;
                match self.raw.allocate(segment_size) {
                    Ok(ptr) => ptr,
                    Err(RawAllocError::OutOfMemory) => {
                        self.stats.ooms += 1;
                        return Err(self.out_of_memory(requested));
                    }
                    Err(RawAllocError::Driver(message)) => {
                        return Err(CudaError::Driver { device: self.device(), call: "cuMemAlloc", message });
                    }
                }
            }
            Err(RawAllocError::Driver(message)) => {
                return Err(CudaError::Driver { device: self.device(), call: "cuMemAlloc", message });
            }
        };
        let mut blocks = BTreeMap::new();
        blocks.insert(ptr, (segment_size, None));
        self.segments.insert(ptr, Segment { size: segment_size, pool, blocks });
        let s = &mut self.stats;
        s.reserved_bytes += segment_size;
        s.segments += 1;
        s.device_allocations += 1;
        s.peak_reserved_bytes = s.peak_reserved_bytes.max(s.reserved_bytes);
        s.peak_segments = s.peak_segments.max(s.segments);
        Ok((ptr, segment_size))
    }

    fn segment_base(&self, addr: u64) -> u64 {
        *self.segments.range(..=addr).next_back().expect("every block lies in a segment").0
    }

    fn recount_inactive_split(&mut self) {
        // Free blocks inside segments that are partly in use. Segment counts are small, so a
        // scan keeps this simple and exact.
        let (mut blocks, mut bytes) = (0, 0);
        for segment in self.segments.values() {
            if segment.blocks.len() > 1 {
                for &(size, request) in segment.blocks.values() {
                    if request.is_none() {
                        blocks += 1;
                        bytes += size;
                    }
                }
            }
        }
        self.stats.inactive_split_blocks = blocks;
        self.stats.inactive_split_bytes = bytes;
    }

    fn out_of_memory(&self, requested: usize) -> CudaError {
        let (free, total) = match self.raw.mem_info() {
            Some((free, total)) => (Some(free), Some(total)),
            None => (None, None),
        };
        crate::Error::OutOfMemory {
            device: self.device(),
            requested,
            total,
            free,
            allocated: self.stats.allocated_bytes,
            reserved: self.stats.reserved_bytes,
        }
        .into()
    }
}

impl CudaError {
    /// Is this CUDA out of memory?
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, CudaError::Core(e) if matches!(**e, crate::Error::OutOfMemory { .. }))
    }
}

/// `requested` rounded up to a multiple of [`MIN_BLOCK_SIZE`] (at least one); `None` on overflow.
pub fn round_size(requested: usize) -> Option<usize> {
    requested.max(1).checked_next_multiple_of(MIN_BLOCK_SIZE)
}

/// `1536` -> `1.50 KiB`; below 1 KiB in plain bytes (`512 B`).
pub fn format_bytes(bytes: usize) -> String {
    crate::units::format_bytes(bytes, 2)
}

/// The table of [`CachingAllocator::memory_summary`] for any counters.
pub fn format_summary(device: Device, s: &MemoryStats) -> String {
    let rows: [(&str, String, String); 8] = [
        ("Allocated memory", format_bytes(s.allocated_bytes), format_bytes(s.peak_allocated_bytes)),
        ("Requested memory", format_bytes(s.requested_bytes), String::new()),
        ("Reserved memory", format_bytes(s.reserved_bytes), format_bytes(s.peak_reserved_bytes)),
        ("Reserved but unused", format_bytes(s.reserved_unused_bytes()), String::new()),
        ("Active allocations", s.active_blocks.to_string(), s.peak_active_blocks.to_string()),
        ("Segments", s.segments.to_string(), s.peak_segments.to_string()),
        ("Free blocks in used segments", s.inactive_split_blocks.to_string(), String::new()),
        ("Free memory in used segments", format_bytes(s.inactive_split_bytes), String::new()),
    ];
    let counts = [
        ("Allocation requests", s.allocation_requests),
        ("Free requests", s.free_requests),
        ("Driver allocations", s.device_allocations),
        ("Driver frees", s.device_frees),
        ("Retries after releasing the cache", s.allocation_retries),
        ("Out of memory", s.ooms),
    ];
    let line = format!("+{}+\n", "-".repeat(64));
    let mut out = line.clone();
    out.push_str(&format!("| {:<62} |\n", format!("devcheck CUDA memory summary, {device}")));
    out.push_str(&line);
    out.push_str(&format!("| {:<34} | {:>11} | {:>11} |\n", "Metric", "Current", "Peak"));
    out.push_str(&line);
    for (name, current, peak) in rows {
        out.push_str(&format!("| {name:<34} | {current:>11} | {peak:>11} |\n"));
    }
    out.push_str(&line);
    for (name, n) in counts {
        out.push_str(&format!("| {name:<34} | {n:>11} | {:>11} |\n", ""));
    }
    out.push_str(&line);
    out
}
