//! A caching allocator for page-locked (pinned) host memory, modelled on PyTorch's
//! `CachingHostAllocator`, and the bookkeeping of what may still use one pinned buffer.
//!
//! `cuMemHostAlloc` maps and locks pages and `cuMemFreeHost` synchronises the device, so a data
//! loader that pinned every batch afresh would pay both per batch and make every
//! `to_non_blocking` copy effectively synchronous. Pinned blocks are kept for reuse instead:
//! - a request is rounded up to a power of two of at least [`MIN_HOST_BLOCK`] bytes, its size
//!   class; blocks are never split, so a free block of the class is taken whole;
//! - a buffer given back while device copies may still read or write it is parked with the
//!   events recorded after those copies, and becomes free once all of them have completed. That
//!   is checked without blocking (`cuEventQuery`) whenever memory is asked for: giving a buffer
//!   back never waits;
//! - when the driver cannot pin more, the free cached blocks are released and the request is
//!   tried once more before [`CudaError::PinnedOutOfMemory`].
//!
//! [`CachingHostAllocator`] is generic over [`RawHostAllocator`] (the driver's calls and its event
//! type) and [`PendingUses`] over [`UseEvent`], so both are tested against a simulated host
//! without a GPU.

use std::collections::BTreeMap;

use super::allocator::{RawAllocError, format_bytes};
use super::error::{CudaError, CudaResult};
use crate::device::Device;

/// The smallest pinned block (one page).
pub const MIN_HOST_BLOCK: usize = 4096;

/// Something recorded on a device stream that can say, without waiting, whether the work queued
/// before it has finished.
pub trait UseEvent {
    fn is_done(&self) -> bool;
}

/// The driver's side: pin and unpin whole blocks of host memory.
pub trait RawHostAllocator {
    /// The event type device copies record.
    type Event: UseEvent;
    /// The device whose context pins the memory (for error messages).
    fn device(&self) -> Device;
    /// Pins `size` bytes, returning their address.
    fn allocate(&mut self, size: usize) -> Result<u64, RawAllocError>;
    /// Unpins a block returned by `allocate`.
    fn free(&mut self, ptr: u64, size: usize) -> Result<(), RawAllocError>;
}

/// A pinned block handed out by [`CachingHostAllocator::allocate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostBlock {
    /// Host address of the first byte.
    pub ptr: u64,
    /// The size class: the request rounded up.
    pub size: usize,
}

/// The host allocator's counters (`torch.cuda.host_memory_stats()` in spirit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostMemoryStats {
    /// Bytes in blocks held by live pinned buffers.
    pub allocated_bytes: usize,
    pub peak_allocated_bytes: usize,
    /// Bytes in blocks given back but possibly still used by a device copy.
    pub pending_bytes: usize,
    /// Bytes in blocks ready for reuse.
    pub cached_bytes: usize,
    /// Bytes pinned from the driver and not yet released: allocated + pending + cached.
    pub reserved_bytes: usize,
    pub peak_reserved_bytes: usize,
    /// Blocks given back and still waiting for their events.
    pub pending_blocks: usize,
    /// Calls to allocate since creation, and how many a cached block served.
    pub allocation_requests: u64,
    pub cache_hits: u64,
    /// Blocks pinned from and released to the driver since creation.
    pub host_allocations: u64,
    pub host_frees: u64,
}

/// The caching allocator of pinned host memory. Not thread-safe by itself: the process keeps one
/// behind a mutex.
#[derive(Debug)]
pub struct CachingHostAllocator<R: RawHostAllocator> {
    raw: R,
    /// Free blocks per size class.
    free: BTreeMap<usize, Vec<u64>>,
    /// Blocks given back with the events of the copies that may still use them.
    pending: Vec<(HostBlock, Vec<R::Event>)>,
    /// Live block address -> its size class.
    live: BTreeMap<u64, usize>,
    stats: HostMemoryStats,
}

impl<R: RawHostAllocator> CachingHostAllocator<R> {
    pub fn new(raw: R) -> Self {
        CachingHostAllocator {
            raw,
            free: BTreeMap::new(),
            pending: Vec::new(),
            live: BTreeMap::new(),
            stats: HostMemoryStats::default(),
        }
    }

    /// The raw allocator underneath.
    pub fn raw(&self) -> &R {
        &self.raw
    }

    /// A block of at least `requested` bytes: a cached one of its size class when one is free,
    /// else a new one from the driver.
    pub fn allocate(&mut self, requested: usize) -> CudaResult<HostBlock> {
        self.stats.allocation_requests += 1;
        let Some(size) = host_size_class(requested) else {
            return Err(self.out_of_memory(requested, "the size overflows the address space".to_string()));
        };
        self.reclaim_completed();
        if let Some(ptr) = self.free.get_mut(&size).and_then(Vec::pop) {
            self.stats.cache_hits += 1;
            self.stats.cached_bytes -= size;
            return Ok(self.hand_out(HostBlock { ptr, size }));
        }
        let ptr = match self.raw.allocate(size) {
            Ok(ptr) => ptr,
            Err(_) => {
                self.empty_cache()?;
                self.raw.allocate(size).map_err(|e| {
                    let message = match e {
                        RawAllocError::OutOfMemory => "out of memory".to_string(),
                        RawAllocError::Driver(m) => m,
                    };
                    self.out_of_memory(requested, message)
                })?
            }
        };
        let s = &mut self.stats;
        s.host_allocations += 1;
        s.reserved_bytes += size;
        s.peak_reserved_bytes = s.peak_reserved_bytes.max(s.reserved_bytes);
        Ok(self.hand_out(HostBlock { ptr, size }))
    }

    /// Takes a block back. With `uses` (events recorded after the device copies that read or wrote
    /// it) it is reused only once all of them have completed; this never waits for them. `false`
    /// when `block` is not live here (a double free), which changes nothing.
    pub fn release(&mut self, block: HostBlock, uses: Vec<R::Event>) -> bool {
        if self.live.get(&block.ptr) != Some(&block.size) {
            return false;
        }
        self.live.remove(&block.ptr);
        self.stats.allocated_bytes -= block.size;
        if uses.iter().all(UseEvent::is_done) {
            self.make_free(block);
        } else {
            self.stats.pending_bytes += block.size;
            self.stats.pending_blocks += 1;
            self.pending.push((block, uses));
        }
        true
    }

    /// Moves every parked block whose events have all completed to the free lists; returns how
    /// many. Never waits.
    pub fn reclaim_completed(&mut self) -> usize {
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(_, uses)| uses.iter().all(UseEvent::is_done));
        self.pending = waiting;
        for (block, _) in &done {
            self.stats.pending_bytes -= block.size;
            self.stats.pending_blocks -= 1;
            self.make_free(*block);
        }
        done.len()
    }

    /// Unpins every free cached block; blocks in use or still waiting for a copy stay. Returns
    /// the bytes released.
    pub fn empty_cache(&mut self) -> CudaResult<usize> {
        self.reclaim_completed();
        let mut released = 0;
        while let Some((&size, _)) = self.free.iter().find(|(_, blocks)| !blocks.is_empty()) {
            let Some(ptr) = self.free.get_mut(&size).and_then(Vec::pop) else { break };
            if let Err(e) = self.raw.free(ptr, size) {
                // Keep the block: unpinning it may work later, and it is still valid memory.
                self.free.entry(size).or_default().push(ptr);
                let message = match e {
                    RawAllocError::OutOfMemory => "out of memory while unpinning".to_string(),
                    RawAllocError::Driver(m) => m,
                };
                return Err(CudaError::Driver { device: self.raw.device(), call: "cuMemFreeHost", message });
            }
            let s = &mut self.stats;
            s.cached_bytes -= size;
            s.reserved_bytes -= size;
            s.host_frees += 1;
            released += size;
        }
        self.free.retain(|_, blocks| !blocks.is_empty());
        Ok(released)
    }

    /// A copy of the counters.
    pub fn stats(&self) -> HostMemoryStats {
        self.stats.clone()
    }

    /// Checks that the counters agree with the blocks: `Err` says what is wrong.
    pub fn check_invariants(&self) -> Result<(), String> {
        let allocated: usize = self.live.values().sum();
        let pending: usize = self.pending.iter().map(|(b, _)| b.size).sum();
        let cached: usize = self.free.iter().map(|(size, blocks)| size * blocks.len()).sum();
        let s = &self.stats;
        let counted = (s.allocated_bytes, s.pending_bytes, s.cached_bytes, s.pending_blocks);
        let actual = (allocated, pending, cached, self.pending.len());
        if counted != actual {
            return Err(format!(
                "counters (allocated, pending, cached, pending blocks) = {counted:?}, actual {actual:?}"
            ));
        }
        if s.reserved_bytes != allocated + pending + cached {
            return Err(format!("reserved {} != allocated + pending + cached", s.reserved_bytes));
        }
        let mut seen = std::collections::BTreeSet::new();
        let all = self
            .live
            .keys()
            .chain(self.pending.iter().map(|(b, _)| &b.ptr))
            .chain(self.free.values().flatten());
        for ptr in all {
            if !seen.insert(*ptr) {
                return Err(format!("block {ptr:#x} is in two places"));
            }
        }
        if s.peak_allocated_bytes < s.allocated_bytes || s.peak_reserved_bytes < s.reserved_bytes {
            return Err("a peak is below its current value".to_string());
        }
        Ok(())
    }

    fn hand_out(&mut self, block: HostBlock) -> HostBlock {
        self.live.insert(block.ptr, block.size);
        let s = &mut self.stats;
        s.allocated_bytes += block.size;
        s.peak_allocated_bytes = s.peak_allocated_bytes.max(s.allocated_bytes);
        block
    }

    fn make_free(&mut self, block: HostBlock) {
        self.free.entry(block.size).or_default().push(block.ptr);
        self.stats.cached_bytes += block.size;
    }

    fn out_of_memory(&self, requested: usize, message: String) -> CudaError {
        CudaError::PinnedOutOfMemory {
            requested: format_bytes(requested),
            held: format_bytes(self.stats.allocated_bytes + self.stats.pending_bytes),
            message,
        }
    }
}

/// The size class of a request: a power of two, at least [`MIN_HOST_BLOCK`]; `None` on overflow.
pub fn host_size_class(requested: usize) -> Option<usize> {
    requested.max(MIN_HOST_BLOCK).checked_next_power_of_two()
}

/// How a device copy uses a pinned buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UseKind {
    /// A host-to-device copy reads it.
    DeviceReads,
    /// A device-to-host copy writes it.
    DeviceWrites,
}

/// What device copies may still be using one pinned buffer: for each stream and kind of use, the
/// event recorded after the latest such copy. A later event on the same stream completes after
/// every earlier one (a stream runs in order), so it replaces them and the list stays short.
#[derive(Debug)]
pub struct PendingUses<E> {
    uses: Vec<PendingUse<E>>,
}

/// One entry of [`PendingUses`].
#[derive(Debug)]
pub struct PendingUse<E> {
    /// The stream the copy was queued on (a device's ordinal: one stream per device).
    pub stream: usize,
    pub kind: UseKind,
    pub event: E,
}

impl<E> Default for PendingUses<E> {
    fn default() -> Self {
        PendingUses { uses: Vec::new() }
    }
}

impl<E: UseEvent> PendingUses<E> {
    /// Records a copy of `kind` on `stream` followed by `event`; entries already completed are
    /// dropped.
    pub fn record(&mut self, stream: usize, kind: UseKind, event: E) {
        let superseded = |u: &PendingUse<E>| u.stream == stream && u.kind == kind;
        self.uses.retain(|u| !(superseded(u) || u.event.is_done()));
        self.uses.push(PendingUse { stream, kind, event });
    }

    /// What a new copy of `kind` on `stream` must wait for (on the device) before it touches the
    /// buffer: a read waits for writes queued on other streams, a write for every use queued on
    /// other streams. Uses on `stream` itself are ordered by the stream already.
    pub fn hazards(&self, stream: usize, kind: UseKind) -> impl Iterator<Item = &E> {
        self.uses
            .iter()
            .filter(move |u| {
                u.stream != stream && (kind == UseKind::DeviceWrites || u.kind == UseKind::DeviceWrites)
            })
            .map(|u| &u.event)
    }

    /// What the host must wait for before it reads the buffer: the device writes into it.
    pub fn writes(&self) -> impl Iterator<Item = &E> {
        self.uses.iter().filter(|u| u.kind == UseKind::DeviceWrites).map(|u| &u.event)
    }

    /// Every pending event.
    pub fn events(&self) -> impl Iterator<Item = &E> {
        self.uses.iter().map(|u| &u.event)
    }

    /// Forgets the writes once the host has waited for them.
    pub fn writes_done(&mut self) {
        self.uses.retain(|u| u.kind != UseKind::DeviceWrites);
    }

    /// Every event still pending, for giving the buffer back.
    pub fn into_events(self) -> Vec<E> {
        self.uses.into_iter().map(|u| u.event).collect()
    }

    pub fn len(&self) -> usize {
        self.uses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uses.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    #[derive(Clone, Debug)]
    struct Flag(Rc<Cell<bool>>);

    impl UseEvent for Flag {
        fn is_done(&self) -> bool {
            self.0.get()
        }
    }

    fn flag() -> Flag {
        Flag(Rc::new(Cell::new(false)))
    }

    fn events<'a>(it: impl Iterator<Item = &'a Flag>) -> Vec<*const Cell<bool>> {
        it.map(|f| Rc::as_ptr(&f.0)).collect()
    }

    #[test]
    fn size_classes_are_powers_of_two_from_one_page() {
        assert_eq!(host_size_class(0), Some(4096));
        assert_eq!(host_size_class(4096), Some(4096));
        assert_eq!(host_size_class(4097), Some(8192));
        assert_eq!(host_size_class(3 << 20), Some(4 << 20));
        assert_eq!(host_size_class(usize::MAX), None);
    }

    #[test]
    fn a_later_use_on_the_same_stream_replaces_the_earlier_one_and_kinds_stay_apart() {
        let mut uses = PendingUses::default();
        let (w1, w2, r1) = (flag(), flag(), flag());
        uses.record(0, UseKind::DeviceWrites, w1.clone());
        uses.record(0, UseKind::DeviceReads, r1.clone());
        uses.record(0, UseKind::DeviceWrites, w2.clone());
        assert_eq!(uses.len(), 2, "the second write on stream 0 replaced the first");
        assert_eq!(events(uses.writes()), events([&w2].into_iter()));
        // Another stream keeps its own entries.
        let w3 = flag();
        uses.record(1, UseKind::DeviceWrites, w3.clone());
        assert_eq!(events(uses.writes()), events([&w2, &w3].into_iter()));
        // Completed entries are dropped at the next record.
        r1.0.set(true);
        w2.0.set(true);
        let r2 = flag();
        uses.record(1, UseKind::DeviceReads, r2.clone());
        assert_eq!(uses.len(), 2);
        uses.writes_done();
        assert_eq!(events(uses.into_events().iter()), events([&r2].into_iter()));
    }

    #[test]
    fn reads_wait_for_writes_on_other_streams_and_writes_for_everything_there() {
        let mut uses = PendingUses::default();
        let (w0, r0, r1) = (flag(), flag(), flag());
        uses.record(0, UseKind::DeviceWrites, w0.clone());
        uses.record(0, UseKind::DeviceReads, r0.clone());
        uses.record(1, UseKind::DeviceReads, r1.clone());
        // A read on stream 1 waits for stream 0's write only; on stream 0, for nothing.
        assert_eq!(events(uses.hazards(1, UseKind::DeviceReads)), events([&w0].into_iter()));
        assert!(uses.hazards(0, UseKind::DeviceReads).next().is_none());
        // A write on stream 0 waits for stream 1's read; on stream 2 for all three.
        assert_eq!(events(uses.hazards(0, UseKind::DeviceWrites)), events([&r1].into_iter()));
        assert_eq!(events(uses.hazards(2, UseKind::DeviceWrites)).len(), 3);
    }
}
