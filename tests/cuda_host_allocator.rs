//! The caching allocator of pinned host memory against a simulated host: blocks are reused by
//! size class, a block still used by a device copy is reused only once the copy's event has
//! completed (and giving it back never waits), a data loader's steady state pins nothing new,
//! and the counters stay exact under random sequences.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use devcheck::Device;
use devcheck::cuda::allocator::RawAllocError;
use devcheck::cuda::host_allocator::{
    CachingHostAllocator, HostBlock, MIN_HOST_BLOCK, RawHostAllocator, UseEvent, host_size_class,
};
use proptest::prelude::*;

/// A simulated event: completes when the test says so, like a copy finishing on the device.
#[derive(Clone, Debug, Default)]
struct Copy(Arc<AtomicBool>);

impl Copy {
    fn finish(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl UseEvent for Copy {
    fn is_done(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A host with `capacity` bytes of lockable memory, handing out non-overlapping ranges.
#[derive(Debug)]
struct SimulatedHost {
    capacity: usize,
    pinned: BTreeMap<u64, usize>,
    next: u64,
    /// Calls to `allocate` and `free`: what the real driver would charge for.
    pins: usize,
    unpins: usize,
}

impl SimulatedHost {
    fn new(capacity: usize) -> Self {
        SimulatedHost { capacity, pinned: BTreeMap::new(), next: 0x7000_0000, pins: 0, unpins: 0 }
    }

    fn used(&self) -> usize {
        self.pinned.values().sum()
    }
}

impl RawHostAllocator for SimulatedHost {
    type Event = Copy;

    fn device(&self) -> Device {
        Device::Cuda(0)
    }

    fn allocate(&mut self, size: usize) -> Result<u64, RawAllocError> {
        if size > self.capacity - self.used() {
            return Err(RawAllocError::OutOfMemory);
        }
        self.pins += 1;
        let ptr = self.next;
        self.next += size as u64 + 4096;
        self.pinned.insert(ptr, size);
        Ok(ptr)
    }

    fn free(&mut self, ptr: u64, size: usize) -> Result<(), RawAllocError> {
        self.unpins += 1;
        match self.pinned.remove(&ptr) {
            Some(s) if s == size => Ok(()),
            other => Err(RawAllocError::Driver(format!("bad unpin of {ptr:#x} ({size} B), had {other:?}"))),
        }
    }
}

fn allocator(capacity: usize) -> CachingHostAllocator<SimulatedHost> {
    CachingHostAllocator::new(SimulatedHost::new(capacity))
}

const MIB: usize = 1 << 20;

#[test]
fn sizes_round_up_to_a_power_of_two_of_at_least_a_page() {
    assert_eq!(host_size_class(0), Some(MIN_HOST_BLOCK));
    assert_eq!(host_size_class(4097), Some(8192));
    assert_eq!(host_size_class(3 * MIB), Some(4 * MIB));
    assert_eq!(host_size_class(usize::MAX), None);
    let mut a = allocator(64 * MIB);
    let x = a.allocate(5000).unwrap();
    assert_eq!(x.size, 8192);
    assert_eq!(a.stats().reserved_bytes, 8192);
}

#[test]
fn a_block_a_copy_may_still_read_is_parked_and_reused_once_the_copy_completes() {
    let mut a = allocator(64 * MIB);
    let x = a.allocate(MIB).unwrap();
    let copy = Copy::default();
    assert!(a.release(x, vec![copy.clone()]), "giving back returns at once");
    assert!(!a.release(x, vec![]), "a double release is refused");
    let s = a.stats();
    assert_eq!((s.pending_blocks, s.pending_bytes, s.cached_bytes), (1, MIB, 0));
    let y = a.allocate(MIB).unwrap();
    assert_ne!(y.ptr, x.ptr, "the copy may still read x: another block");
    copy.finish();
    let z = a.allocate(MIB).unwrap();
    assert_eq!(z.ptr, x.ptr, "x is reused once its copy completed");
    let s = a.stats();
    assert_eq!((s.host_allocations, s.cache_hits, s.pending_blocks), (2, 1, 0));
    a.check_invariants().unwrap();
}

#[test]
fn a_block_waits_for_every_copy_that_used_it() {
    let mut a = allocator(64 * MIB);
    let x = a.allocate(4096).unwrap();
    let (upload, download) = (Copy::default(), Copy::default());
    a.release(x, vec![upload.clone(), download.clone()]);
    upload.finish();
    assert_eq!(a.reclaim_completed(), 0, "the second copy is still running");
    download.finish();
    assert_eq!(a.reclaim_completed(), 1);
    assert_eq!(a.stats().cached_bytes, 4096);
    a.check_invariants().unwrap();
}

#[test]
fn a_data_loaders_steady_state_pins_nothing_new() {
    // Each step pins a batch, copies it to the device (an event) and drops it; the copy of one
    // step completes during the next, as with a prefetching loader.
    let mut a = allocator(256 * MIB);
    let mut in_flight: Vec<Copy> = Vec::new();
    for step in 0..100 {
        let batch = a.allocate(3 * MIB + step % 7).unwrap();
        let copy = Copy::default();
        a.release(batch, vec![copy.clone()]);
        in_flight.push(copy);
        if in_flight.len() > 2 {
            in_flight.remove(0).finish();
        }
        a.check_invariants().unwrap();
    }
    let s = a.stats();
    assert!(s.host_allocations <= 4, "blocks are reused, not pinned per batch: {s:?}");
    assert_eq!(s.allocation_requests, 100);
    assert_eq!(a.raw().pins as u64, s.host_allocations);
    assert_eq!(a.raw().unpins, 0, "nothing is unpinned in the loop");
}

#[test]
fn a_full_host_releases_the_cache_and_retries_then_reports_what_is_held() {
    let mut a = allocator(12 * MIB);
    let kept = a.allocate(4 * MIB).unwrap();
    let cached = a.allocate(4 * MIB).unwrap();
    a.release(cached, vec![]);
    // 8 MiB pinned (4 cached): another 8 MiB fits only once the cached block is unpinned.
    let big = a.allocate(8 * MIB).unwrap();
    assert_eq!(a.raw().unpins, 1);
    let copy = Copy::default();
    a.release(big, vec![copy.clone()]);
    let err = a.allocate(6 * MIB).unwrap_err();
    insta::assert_snapshot!("pinned_out_of_memory", err.render(100));
    // Still usable, and a parked block is never unpinned under its copy.
    assert_eq!(a.empty_cache().unwrap(), 0);
    assert_eq!(a.stats().pending_bytes, 8 * MIB);
    copy.finish();
    assert_eq!(a.empty_cache().unwrap(), 8 * MIB);
    a.release(kept, vec![]);
    a.check_invariants().unwrap();
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize),
    /// Release a live block with this many copies still running.
    Release(usize, usize),
    /// Finish one running copy.
    Finish(usize),
    EmptyCache,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..3 * MIB).prop_map(Op::Alloc),
        4 => (any::<usize>(), 0usize..3).prop_map(|(i, n)| Op::Release(i, n)),
        3 => any::<usize>().prop_map(Op::Finish),
        1 => Just(Op::EmptyCache),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_sequences_never_hand_out_a_block_in_use_and_keep_the_counters_exact(
        ops in proptest::collection::vec(op(), 1..150)
    ) {
        let mut a = allocator(24 * MIB);
        let mut live: Vec<HostBlock> = Vec::new();
        // Released blocks whose copies have not all completed, with those copies.
        let mut parked: Vec<(HostBlock, Vec<Copy>)> = Vec::new();
        let mut running: Vec<Copy> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc(n) => match a.allocate(n) {
                    Ok(x) => {
                        prop_assert!(x.size >= n && x.size.is_power_of_two());
                        prop_assert!(live.iter().all(|l| l.ptr != x.ptr), "a live block is handed out again");
                        prop_assert!(
                            parked.iter().all(|(b, copies)| b.ptr != x.ptr || copies.iter().all(Copy::is_done)),
                            "a block is handed out while a copy may still use it"
                        );
                        live.push(x);
                    }
                    Err(e) => {
                        let text = e.render(100);
                        prop_assert!(text.contains("could not pin"), "{}", text);
                        // The cache was emptied first: what is pinned is in use or in flight.
                        prop_assert_eq!(a.stats().cached_bytes, 0);
                    }
                },
                Op::Release(i, copies) if !live.is_empty() => {
                    let x = live.swap_remove(i % live.len());
                    let copies: Vec<Copy> = (0..copies).map(|_| Copy::default()).collect();
                    running.extend(copies.iter().cloned());
                    prop_assert!(a.release(x, copies.clone()));
                    parked.push((x, copies));
                }
                Op::Release(..) => {}
                Op::Finish(i) if !running.is_empty() => running.swap_remove(i % running.len()).finish(),
                Op::Finish(_) => {}
                Op::EmptyCache => {
                    a.empty_cache().unwrap();
                    prop_assert_eq!(a.stats().cached_bytes, 0);
                }
            }
            parked.retain(|(_, copies)| !copies.iter().all(Copy::is_done));
            a.check_invariants().map_err(TestCaseError::fail)?;
            let s = a.stats();
            prop_assert_eq!(s.allocated_bytes, live.iter().map(|x| x.size).sum::<usize>());
            prop_assert_eq!(s.reserved_bytes, a.raw().used(), "reserved is what the host pinned");
            prop_assert!(s.pending_bytes >= parked.iter().map(|(b, _)| b.size).sum::<usize>());
        }
        for x in live {
            prop_assert!(a.release(x, vec![]));
        }
        for copy in running {
            copy.finish();
        }
        a.empty_cache().unwrap();
        prop_assert_eq!(a.raw().used(), 0, "everything is unpinned in the end");
    }
}
