//! Datasets, the data loader (order, shuffling, prefetching, errors) and CSV reading.

use std::io::Write;

use devcheck::data::{DataLoader, Dataset, TensorDataset, read_csv};
use devcheck::{DType, Device, Tensor};

/// 10 samples: x[i] = [i, 10 i], y[i] = i.
fn numbered(n: usize) -> TensorDataset<(Tensor, Tensor)> {
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, 10.0 * i as f32]).collect();
    let y: Vec<i64> = (0..n as i64).collect();
    TensorDataset::new((
        Tensor::from_vec(x, [n, 2], &Device::Cpu).unwrap(),
        Tensor::from_vec(y, [n], &Device::Cpu).unwrap(),
    ))
    .unwrap()
}

fn labels_per_batch(loader: &DataLoader<TensorDataset<(Tensor, Tensor)>>) -> Vec<Vec<i64>> {
    loader
        .iter()
        .map(|b| {
            let (x, y) = b.unwrap();
            let y: Vec<i64> = y.to_vec().unwrap();
            let x: Vec<f32> = x.to_vec().unwrap();
            // Inputs and labels of a batch stay paired.
            assert_eq!(x.chunks(2).map(|r| r[0] as i64).collect::<Vec<_>>(), y);
            y
        })
        .collect()
}

#[test]
fn batches_in_order_with_a_short_last_batch() {
    let loader = DataLoader::new(numbered(10), 4).unwrap();
    assert_eq!(loader.len(), 3);
    assert_eq!(labels_per_batch(&loader), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
    let dropping = DataLoader::new(numbered(10), 4).unwrap().drop_last(true);
    assert_eq!(dropping.len(), 2);
    assert_eq!(labels_per_batch(&dropping), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
}

#[test]
fn shuffling_is_a_new_permutation_each_epoch_and_reproducible() {
    let epochs = |seed: u64| {
        let loader = DataLoader::new(numbered(50), 8).unwrap().shuffle(true).seed(seed);
        (0..3).map(|_| labels_per_batch(&loader).concat()).collect::<Vec<_>>()
    };
    let a = epochs(7);
    for epoch in &a {
        let mut sorted = epoch.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<i64>>(), "every sample once per epoch");
    }
    assert_ne!(a[0], a[1], "epochs are shuffled differently");
    assert_ne!(a[0], (0..50).collect::<Vec<i64>>());
    assert_eq!(a, epochs(7), "the same seed gives the same epochs");
    assert_ne!(a, epochs(8));
}

#[test]
fn the_default_seed_follows_manual_seed() {
    let run = || {
        devcheck::manual_seed(11);
        let loader = DataLoader::new(numbered(20), 5).unwrap().shuffle(true);
        labels_per_batch(&loader)
    };
    assert_eq!(run(), run());
}

#[test]
fn prefetching_changes_nothing_but_timing() {
    let with = DataLoader::new(numbered(23), 4).unwrap().shuffle(true).seed(3).prefetch(3);
    let without = DataLoader::new(numbered(23), 4).unwrap().shuffle(true).seed(3).prefetch(0);
    assert_eq!(labels_per_batch(&with), labels_per_batch(&without));
}

#[test]
fn an_abandoned_epoch_stops_the_worker() {
    let loader = DataLoader::new(numbered(1000), 1).unwrap().prefetch(1);
    for _ in 0..3 {
        let first = loader.iter().next().unwrap().unwrap();
        assert_eq!(first.1.to_vec::<i64>().unwrap(), vec![0]);
        // Dropping the iterator with 999 batches to go must not hang.
    }
}

#[test]
fn batches_come_out_on_the_cpu_even_with_pin_memory() {
    let loader = DataLoader::new(numbered(6), 4).unwrap().pin_memory(true);
    if !devcheck::cuda::is_available() {
        assert!(!loader.pins_memory(), "no accelerator: nothing to pin for");
    }
    for batch in &loader {
        let (x, y) = batch.unwrap();
        assert_eq!((x.device(), y.device()), (Device::Cpu, Device::Cpu));
        // With a GPU the batches are page-locked, ready for `to_non_blocking`.
        assert_eq!((x.is_pinned(), y.is_pinned()), (loader.pins_memory(), loader.pins_memory()));
    }
}

/// Fails or panics at a chosen sample.
struct Faulty {
    fail_at: usize,
    panic: bool,
}

impl Dataset for Faulty {
    type Batch = Tensor;

    fn len(&self) -> usize {
        8
    }

    fn batch(&self, indices: &[usize]) -> devcheck::Result<Tensor> {
        if indices.contains(&self.fail_at) {
            if self.panic {
                panic!("sample {} is corrupt", self.fail_at);
            }
            return Tensor::from_vec(vec![1.0f32], [2], &Device::Cpu);
        }
        Tensor::zeros([indices.len()], &Device::Cpu)
    }
}

#[test]
fn dataset_errors_reach_the_training_loop() {
    for prefetch in [0, 2] {
        let loader = DataLoader::new(Faulty { fail_at: 5, panic: false }, 2).unwrap().prefetch(prefetch);
        let results: Vec<bool> = loader.iter().map(|b| b.is_ok()).collect();
        assert_eq!(results, vec![true, true, false, true], "prefetch {prefetch}");
    }
}

#[test]
fn a_panic_in_the_worker_is_raised_in_the_loop() {
    let loader = DataLoader::new(Faulty { fail_at: 5, panic: true }, 2).unwrap().prefetch(2);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loader.iter().count()));
    let message = outcome.expect_err("the panic is not swallowed");
    assert_eq!(message.downcast_ref::<String>().map(String::as_str), Some("sample 5 is corrupt"));
}

#[test]
fn a_dry_run_loader_makes_fake_batches() {
    let _fake = devcheck::fake::enter();
    let x = Tensor::fake([12, 3], DType::F32, &Device::Cpu).unwrap();
    let y = Tensor::fake([12], DType::I64, &Device::Cpu).unwrap();
    let loader = DataLoader::new(TensorDataset::new((x, y)).unwrap(), 5).unwrap();
    let shapes: Vec<Vec<usize>> = loader.iter().map(|b| b.unwrap().0.shape().to_vec()).collect();
    assert_eq!(shapes, vec![vec![5, 3], vec![5, 3], vec![2, 3]]);
}

#[test]
fn random_split_is_seeded_disjoint_and_complete() {
    let data = numbered(101);
    let parts = data.random_split(&[0.8, 0.2], 42).unwrap();
    assert_eq!((parts[0].len(), parts[1].len()), (81, 20));
    let ids = |d: &TensorDataset<(Tensor, Tensor)>| d.tensors().1.to_vec::<i64>().unwrap();
    let mut all = [ids(&parts[0]), ids(&parts[1])].concat();
    all.sort_unstable();
    assert_eq!(all, (0..101).collect::<Vec<i64>>());
    let again = data.random_split(&[0.8, 0.2], 42).unwrap();
    assert_eq!(ids(&again[1]), ids(&parts[1]));
    assert_ne!(ids(&data.random_split(&[0.8, 0.2], 43).unwrap()[1]), ids(&parts[1]));
}

fn temp_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("devcheck-data-{}", std::process::id()))
}

fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = temp_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn read_csv_plain_gzipped_and_with_a_header() {
    let text = "a,b,c\n1,2,3\n\n4.5, -6 ,7e1\n";
    let plain = temp_file("table.csv", text.as_bytes());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    let zipped = temp_file("table.csv.gz", &gz.finish().unwrap());
    for path in [plain, zipped] {
        let t = read_csv(&path, true).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.5, -6.0, 70.0]);
    }
}

#[test]
fn the_bundled_digits_load() {
    let table = read_csv(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/digits.csv.gz"), false).unwrap();
    assert_eq!(table.shape(), &[1797, 65]);
    let labels = table.narrow(1, 64, 1).unwrap().to_vec::<f32>().unwrap();
    assert!(labels.iter().all(|&l| (0.0..=9.0).contains(&l) && l.fract() == 0.0));
    let pixels = table.narrow(1, 0, 64).unwrap();
    assert_eq!(pixels.max_all().unwrap().to_scalar::<f32>().unwrap(), 16.0);
}

fn render(e: devcheck::Error) -> String {
    devcheck::error::render_diagnostic(&e, 100).replace(&temp_dir().display().to_string(), "$TMP")
}

#[test]
fn bad_tables_say_where() {
    let header = temp_file("header.csv", b"x,y\n1,2\n");
    insta::assert_snapshot!("parse", render(read_csv(&header, false).unwrap_err()));
    let ragged = temp_file("ragged.csv", b"1,2\n3,4\n5\n");
    insta::assert_snapshot!("ragged", render(read_csv(&ragged, false).unwrap_err()));
}

#[test]
fn mismatched_sample_counts_are_refused() {
    let x = Tensor::zeros([10, 2], &Device::Cpu).unwrap();
    let y = Tensor::zeros([9], (DType::I64, &Device::Cpu)).unwrap();
    insta::assert_snapshot!(render(TensorDataset::new((x, y)).unwrap_err()));
    insta::assert_snapshot!(render(DataLoader::new(numbered(3), 0).err().unwrap()));
}
