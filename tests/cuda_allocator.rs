//! The caching allocator against a simulated device of fixed capacity: exact statistics under
//! random alloc/free sequences, PyTorch's rounding and pooling, and out of memory.

use std::collections::BTreeMap;

use devcheck::Device;
use devcheck::cuda::allocator::{
    Allocation, CachingAllocator, MIN_BLOCK_SIZE, RawAllocError, RawAllocator, SMALL_REQUEST, SMALL_SEGMENT,
    round_size,
};
use proptest::prelude::*;

const MIB: usize = 1 << 20;

/// A device with `capacity` bytes that hands out non-overlapping address ranges.
#[derive(Debug)]
struct SimulatedDevice {
    capacity: usize,
    used: usize,
    next: u64,
    live: BTreeMap<u64, usize>,
}

impl SimulatedDevice {
    fn new(capacity: usize) -> Self {
        SimulatedDevice { capacity, used: 0, next: 0x7f00_0000_0000, live: BTreeMap::new() }
    }
}

impl RawAllocator for SimulatedDevice {
    fn device(&self) -> Device {
        Device::Cuda(0)
    }
    fn allocate(&mut self, size: usize) -> Result<u64, RawAllocError> {
        if size > self.capacity - self.used {
            return Err(RawAllocError::OutOfMemory);
        }
        let ptr = self.next;
        // A gap between segments, so merging across segments would be caught.
        self.next += size as u64 + 4096;
        self.used += size;
        self.live.insert(ptr, size);
        Ok(ptr)
    }
    fn free(&mut self, ptr: u64, size: usize) -> Result<(), RawAllocError> {
        match self.live.remove(&ptr) {
            Some(s) if s == size => {
                self.used -= size;
                Ok(())
            }
            other => Err(RawAllocError::Driver(format!("bad free of {ptr:#x} ({size} B), had {other:?}"))),
        }
    }
    fn mem_info(&self) -> Option<(usize, usize)> {
        Some((self.capacity - self.used, self.capacity))
    }
}

fn allocator(capacity: usize) -> CachingAllocator<SimulatedDevice> {
    CachingAllocator::new(SimulatedDevice::new(capacity))
}

#[test]
fn sizes_round_up_to_512_bytes() {
    assert_eq!(round_size(0), Some(512));
    assert_eq!(round_size(1), Some(512));
    assert_eq!(round_size(512), Some(512));
    assert_eq!(round_size(513), Some(1024));
    assert_eq!(round_size(usize::MAX), None);
    let mut a = allocator(64 * MIB);
    let x = a.allocate(100).unwrap();
    assert_eq!((x.size, x.requested), (512, 100));
    let s = a.stats();
    assert_eq!((s.allocated_bytes, s.requested_bytes, s.reserved_bytes), (512, 100, SMALL_SEGMENT));
}

#[test]
fn small_requests_share_a_2_mib_segment_and_large_ones_round_to_2_mib() {
    let mut a = allocator(64 * MIB);
    let x = a.allocate(SMALL_REQUEST).unwrap();
    let y = a.allocate(SMALL_REQUEST).unwrap();
    assert_eq!(y.ptr, x.ptr + SMALL_REQUEST as u64, "the second 1 MiB fills the same segment");
    assert_eq!(a.stats().segments, 1);
    let z = a.allocate(SMALL_REQUEST + 1).unwrap();
    assert_eq!(a.stats().reserved_bytes, 2 * SMALL_SEGMENT, "1 MiB + 1 B is large: its own 2 MiB segment");
    // The rest of that segment (just under 1 MiB) is too small to split off a large block.
    assert_eq!(z.size, 2 * MIB);
    let w = a.allocate(5 * MIB + 1).unwrap();
    assert_eq!(a.stats().reserved_bytes, 2 * SMALL_SEGMENT + 6 * MIB);
    assert_eq!(w.size, 6 * MIB);
    let v = a.allocate(3 * MIB).unwrap();
    a.free(v.ptr);
    // A 4 MiB segment split: 1.5 MiB taken, 2.5 MiB (more than 1 MiB) left free for reuse.
    let u = a.allocate(3 * MIB / 2).unwrap();
    assert_eq!((u.ptr, u.size), (v.ptr, 3 * MIB / 2));
    assert_eq!(a.stats().inactive_split_bytes, 5 * MIB / 2);
    a.check_invariants().unwrap();
}

#[test]
fn freed_blocks_are_reused_split_and_merged() {
    let mut a = allocator(64 * MIB);
    let x = a.allocate(1000).unwrap();
    let y = a.allocate(1000).unwrap();
    let z = a.allocate(1000).unwrap();
    assert!(a.free(y.ptr));
    assert!(!a.free(y.ptr), "a double free is refused and changes nothing");
    let y2 = a.allocate(600).unwrap();
    assert_eq!(y2.ptr, y.ptr, "the freed block is reused (best fit)");
    assert!(a.free(y2.ptr));
    assert!(a.free(x.ptr));
    // x and y merged: a 2048-byte request fits where they were, without a new segment.
    let xy = a.allocate(2048).unwrap();
    assert_eq!(xy.ptr, x.ptr);
    assert_eq!(a.stats().segments, 1);
    assert_eq!(a.stats().device_allocations, 1);
    assert!(a.free(xy.ptr) && a.free(z.ptr));
    let s = a.stats();
    assert_eq!((s.allocated_bytes, s.active_blocks, s.reserved_bytes), (0, 0, SMALL_SEGMENT));
    assert_eq!(s.peak_allocated_bytes, 3 * 1024);
    a.check_invariants().unwrap();
}

#[test]
fn empty_cache_releases_unused_segments_only() {
    let mut a = allocator(64 * MIB);
    let kept = a.allocate(4 * MIB).unwrap();
    let dropped = a.allocate(8 * MIB).unwrap();
    let small = a.allocate(10).unwrap();
    a.free(dropped.ptr);
    a.free(small.ptr);
    assert_eq!(a.stats().reserved_bytes, 4 * MIB + 8 * MIB + SMALL_SEGMENT);
    assert_eq!(a.empty_cache().unwrap(), 8 * MIB + SMALL_SEGMENT);
    let s = a.stats();
    assert_eq!((s.reserved_bytes, s.allocated_bytes, s.segments), (4 * MIB, 4 * MIB, 1));
    assert_eq!(a.raw().used, 4 * MIB);
    assert_eq!(s.peak_reserved_bytes, 4 * MIB + 8 * MIB + SMALL_SEGMENT);
    a.reset_peak_memory_stats();
    assert_eq!(a.stats().peak_reserved_bytes, 4 * MIB);
    a.free(kept.ptr);
    a.check_invariants().unwrap();
}

#[test]
fn a_full_device_releases_the_cache_and_retries_before_giving_up() {
    let mut a = allocator(16 * MIB);
    let x = a.allocate(10 * MIB).unwrap();
    a.free(x.ptr);
    // 10 MiB are cached; 12 MiB only fit once the cache is released.
    let y = a.allocate(12 * MIB).unwrap();
    let s = a.stats();
    assert_eq!((s.allocation_retries, s.device_frees, s.reserved_bytes), (1, 1, 12 * MIB));
    a.free(y.ptr);
    a.check_invariants().unwrap();
}

#[test]
fn out_of_memory_is_reported_with_the_numbers_and_leaves_the_pool_consistent() {
    let mut a = allocator(16 * MIB);
    let held = a.allocate(6 * MIB).unwrap();
    let cached = a.allocate(3 * MIB).unwrap();
    let _small = a.allocate(300 * 1024).unwrap();
    a.free(cached.ptr);
    let err = a.allocate(12 * MIB).unwrap_err();
    assert!(err.is_out_of_memory());
    insta::assert_snapshot!("out_of_memory", err.render(100));
    let s = a.stats();
    assert_eq!(s.ooms, 1);
    assert_eq!(s.allocated_bytes, 6 * MIB + 300 * 1024);
    assert_eq!(s.reserved_bytes, 6 * MIB + SMALL_SEGMENT, "the cached 4 MiB segment was released");
    a.check_invariants().unwrap();
    // The pool still works.
    let again = a.allocate(6 * MIB).unwrap();
    a.free(again.ptr);
    a.free(held.ptr);
    a.check_invariants().unwrap();
}

#[test]
fn out_of_memory_with_a_fragmented_cache_suggests_empty_cache_once() {
    let mut a = allocator(8 * MIB);
    // In each of three small segments a 512-byte tensor stays alive while the rest is freed:
    // reserved but unused ≫ allocated, and no segment can be released.
    let mut freed = Vec::new();
    for _ in 0..3 {
        let _kept = a.allocate(512).unwrap();
        freed.push(a.allocate(SMALL_REQUEST).unwrap());
        freed.push(a.allocate(SMALL_REQUEST - 512).unwrap());
    }
    for x in freed {
        a.free(x.ptr);
    }
    assert_eq!(a.stats().segments, 3);
    let err = a.allocate(4 * MIB).unwrap_err();
    insta::assert_snapshot!("out_of_memory_fragmented", err.render(100));
}

#[test]
fn memory_summary_is_a_table() {
    let mut a = allocator(64 * MIB);
    let x = a.allocate(3 * MIB).unwrap();
    let y = a.allocate(1000).unwrap();
    let _z = a.allocate(1000).unwrap();
    a.free(y.ptr);
    a.free(x.ptr);
    insta::assert_snapshot!("memory_summary", a.memory_summary());
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize),
    Free(usize),
    EmptyCache,
    ResetPeak,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..4096).prop_map(Op::Alloc),
        3 => (4096usize..2 * MIB).prop_map(Op::Alloc),
        2 => (2 * MIB..12 * MIB).prop_map(Op::Alloc),
        6 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::EmptyCache),
        1 => Just(Op::ResetPeak),
    ]
}

fn segment_size(rounded: usize) -> usize {
    if rounded <= SMALL_REQUEST { SMALL_SEGMENT } else { rounded.next_multiple_of(2 * MIB) }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_sequences_keep_the_stats_exact(ops in proptest::collection::vec(op(), 1..120)) {
        let capacity = 48 * MIB;
        let mut a = allocator(capacity);
        let mut live: Vec<Allocation> = Vec::new();
        let (mut peak_allocated, mut peak_reserved) = (0usize, 0usize);
        for op in ops {
            match op {
                Op::Alloc(n) => match a.allocate(n) {
                    Ok(x) => {
                        let rounded = round_size(n).unwrap();
                        prop_assert!(x.size >= rounded && x.size % MIN_BLOCK_SIZE == 0);
                        prop_assert!(x.size < rounded + MIN_BLOCK_SIZE || x.size <= rounded + SMALL_REQUEST);
                        prop_assert!(live.iter().all(|l| x.ptr + x.size as u64 <= l.ptr || l.ptr + l.size as u64 <= x.ptr),
                            "blocks never overlap");
                        live.push(x);
                    }
                    Err(e) => {
                        prop_assert!(e.is_out_of_memory(), "{e:?}");
                        // Every cached segment was released first, so it truly did not fit.
                        let needed = segment_size(round_size(n).unwrap());
                        prop_assert!(needed > capacity - a.raw().used);
                        prop_assert_eq!(a.stats().reserved_bytes - a.stats().allocated_bytes,
                            a.stats().inactive_split_bytes);
                    }
                },
                Op::Free(i) if !live.is_empty() => {
                    let x = live.swap_remove(i % live.len());
                    prop_assert!(a.free(x.ptr));
                }
                Op::Free(_) => prop_assert!(!a.free(0x1234)),
                Op::EmptyCache => {
                    a.empty_cache().unwrap();
                    prop_assert_eq!(a.stats().reserved_bytes - a.stats().allocated_bytes,
                        a.stats().inactive_split_bytes);
                }
                Op::ResetPeak => {
                    a.reset_peak_memory_stats();
                    peak_allocated = 0;
                    peak_reserved = 0;
                }
            }
            a.check_invariants().map_err(TestCaseError::fail)?;
            let s = a.stats();
            let allocated: usize = live.iter().map(|x| x.size).sum();
            let requested: usize = live.iter().map(|x| x.requested).sum();
            prop_assert_eq!(s.allocated_bytes, allocated);
            prop_assert_eq!(s.requested_bytes, requested);
            prop_assert_eq!(s.active_blocks, live.len());
            prop_assert_eq!(s.reserved_bytes, a.raw().used, "reserved is what the device handed out");
            prop_assert_eq!(s.segments, a.raw().live.len());
            peak_allocated = peak_allocated.max(allocated);
            peak_reserved = peak_reserved.max(s.reserved_bytes);
            prop_assert_eq!(s.peak_allocated_bytes, peak_allocated.max(s.allocated_bytes));
            prop_assert_eq!(s.peak_reserved_bytes, peak_reserved.max(s.reserved_bytes));
        }
        for x in live {
            prop_assert!(a.free(x.ptr));
        }
        a.empty_cache().unwrap();
        prop_assert_eq!(a.raw().used, 0);
        prop_assert_eq!(a.stats().reserved_bytes, 0);
    }
}
