//! The data loader: batches, seeded shuffling, and a background thread that prepares the next
//! batches while the model trains on the current one.

use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::Dataset;
use crate::error::{Error, Result};

/// Iterates over a [`Dataset`] in batches (PyTorch's `DataLoader`). Each call to
/// [`iter`](DataLoader::iter) (or `for batch in &loader`) is one epoch; with shuffling on, every
/// epoch draws a new order from the loader's seed, so a run is reproducible.
///
/// By default a background thread prepares up to two batches ahead ([`DataLoader::prefetch`]).
/// Batches are made on the device of the dataset's tensors (the CPU, normally); move them with
/// `x.to(&device)?` in the training loop.
pub struct DataLoader<D: Dataset> {
    dataset: Arc<D>,
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    pin_memory: bool,
    prefetch: usize,
    seed: u64,
    epoch: AtomicU64,
}

impl<D: Dataset> DataLoader<D> {
    /// Batches of `batch_size` samples in order, the last one possibly smaller; two batches
    /// prefetched. The shuffling seed is drawn from the seeded generator ([`crate::manual_seed`]).
    #[track_caller]
    pub fn new(dataset: D, batch_size: usize) -> Result<DataLoader<D>> {
        if batch_size == 0 {
            return Err(Error::InvalidArgument {
                op: "DataLoader::new",
                detail: "batch_size is 0".to_string(),
                help: "32 to 64 is a good starting point; lower it if the device runs out of memory"
                    .to_string(),
                location: Location::caller(),
            });
        }
        Ok(DataLoader {
            dataset: Arc::new(dataset),
            batch_size,
            shuffle: false,
            drop_last: false,
            pin_memory: false,
            prefetch: 2,
            seed: crate::random::next_u64(),
            epoch: AtomicU64::new(0),
        })
    }

    /// Reorders the samples at random every epoch.
    #[must_use = "the builder returns the configured loader"]
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.shuffle = shuffle;
        self
    }

    /// The seed of the shuffling order (epoch `e` uses an order derived from `seed` and `e`).
    #[must_use = "the builder returns the configured loader"]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Leaves out the last batch when it would be smaller than `batch_size`.
    #[must_use = "the builder returns the configured loader"]
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Asks for batches in page-locked host memory ([`Dataset::pin_batch`]), which a GPU copies
    /// from asynchronously with `to_non_blocking`. Without a CUDA device this prints one warning
    /// per process and the loader carries on with ordinary memory, as PyTorch does.
    #[must_use = "the builder returns the configured loader"]
    pub fn pin_memory(mut self, pin_memory: bool) -> Self {
        self.pin_memory = pin_memory;
        if pin_memory && let Some(reason) = pinning_unavailable() {
            warn_once(reason);
        }
        self
    }

    /// How many batches the background thread may prepare ahead; 0 makes every batch in the
    /// calling thread, when it is asked for.
    #[must_use = "the builder returns the configured loader"]
    pub fn prefetch(mut self, batches: usize) -> Self {
        self.prefetch = batches;
        self
    }

    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Whether batches really are page-locked (false when pinning was asked for but is not
    /// available here).
    pub fn pins_memory(&self) -> bool {
        self.pin_memory && pinning_unavailable().is_none()
    }

    /// The number of batches in an epoch.
    pub fn len(&self) -> usize {
        let n = self.dataset.len();
        if self.drop_last { n / self.batch_size } else { n.div_ceil(self.batch_size) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One epoch of batches.
    pub fn iter(&self) -> Batches<D> {
        let epoch = self.epoch.fetch_add(1, Ordering::Relaxed);
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if self.shuffle {
            let seed = self.seed ^ epoch.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            order.shuffle(&mut StdRng::seed_from_u64(seed));
        }
        let mut chunks: Vec<Vec<usize>> = order.chunks(self.batch_size).map(<[usize]>::to_vec).collect();
        if self.drop_last && chunks.last().is_some_and(|c| c.len() < self.batch_size) {
            chunks.pop();
        }
        let expected = chunks.len();
        if self.prefetch > 0
            && let Some(background) =
                Background::spawn(self.dataset.clone(), chunks.clone(), self.prefetch, self.pins_memory())
        {
            return Batches { source: Source::Background(background), expected, produced: 0 };
        }
        Batches {
            source: Source::Inline {
                dataset: self.dataset.clone(),
                chunks: chunks.into_iter(),
                pin: self.pins_memory(),
            },
            expected,
            produced: 0,
        }
    }
}

impl<D: Dataset> IntoIterator for &DataLoader<D> {
    type Item = Result<D::Batch>;
    type IntoIter = Batches<D>;

    fn into_iter(self) -> Batches<D> {
        self.iter()
    }
}

/// One epoch of batches from a [`DataLoader`].
pub struct Batches<D: Dataset> {
    source: Source<D>,
    expected: usize,
    produced: usize,
}

enum Source<D: Dataset> {
    Inline { dataset: Arc<D>, chunks: std::vec::IntoIter<Vec<usize>>, pin: bool },
    Background(Background<D::Batch>),
}

/// The prefetching thread and the channel its batches arrive on.
struct Background<B> {
    batches: Option<Receiver<Result<B>>>,
    worker: Option<JoinHandle<()>>,
}

impl<B: Send + 'static> Background<B> {
    /// `None` when the thread cannot be started; the caller then makes batches itself.
    fn spawn<D: Dataset<Batch = B>>(
        dataset: Arc<D>,
        chunks: Vec<Vec<usize>>,
        depth: usize,
        pin: bool,
    ) -> Option<Self> {
        let (tx, rx) = sync_channel(depth);
        // The worker makes what the caller would: fake tensors in a dry run, and nothing recorded.
        let fake = crate::fake::is_active();
        let worker = std::thread::Builder::new()
            .name("devcheck-dataloader".to_string())
            .spawn(move || {
                let _fake = fake.then(crate::fake::enter);
                let _recording_off = crate::no_grad();
                for chunk in chunks {
                    // A closed channel means the epoch was abandoned: stop early.
                    if tx.send(make_batch(&*dataset, &chunk, pin)).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(Background { batches: Some(rx), worker: Some(worker) })
    }
}

impl<B> Drop for Background<B> {
    fn drop(&mut self) {
        // Close the channel first so a worker blocked on a full channel wakes up and stops.
        drop(self.batches.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl<D: Dataset> Iterator for Batches<D> {
    type Item = Result<D::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.produced == self.expected {
            return None;
        }
        let batch = match &mut self.source {
            Source::Inline { dataset, chunks, pin } => {
                let _recording_off = crate::no_grad();
                chunks.next().map(|chunk| make_batch(&**dataset, &chunk, *pin))
            }
            Source::Background(background) => {
                match background.batches.as_ref().map(Receiver::recv) {
                    Some(Ok(batch)) => Some(batch),
                    _ => {
                        // The worker stopped before the epoch's end: it panicked in the dataset.
                        // Re-raise that panic here rather than end the epoch early in silence.
                        if let Some(Err(panic)) = background.worker.take().map(JoinHandle::join) {
                            std::panic::resume_unwind(panic);
                        }
                        None
                    }
                }
            }
        };
        if batch.is_some() {
            self.produced += 1;
        }
        batch
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.expected - self.produced;
        (left, Some(left))
    }
}

impl<D: Dataset> ExactSizeIterator for Batches<D> {}

/// One batch, pinned when asked.
fn make_batch<D: Dataset>(dataset: &D, chunk: &[usize], pin: bool) -> Result<D::Batch> {
    let batch = dataset.batch(chunk)?;
    if pin { dataset.pin_batch(batch) } else { Ok(batch) }
}

/// Why batches cannot be page-locked here, if they cannot.
fn pinning_unavailable() -> Option<&'static str> {
    if crate::cuda::is_available() {
        return None;
    }
    Some("`pin_memory` is on but no CUDA device is available: batches stay in ordinary host memory")
}

fn warn_once(message: &str) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| eprintln!("warning: {message}"));
}
