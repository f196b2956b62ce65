//! What a checkpoint save and load guarantee under stress: ambiguous keys and disagreeing tied
//! values are refused, concurrent saves leave one whole file, a failed or killed save leaves the
//! old file whole, a symlink stays a link, and a huge damaged file is rejected from its header.
//! Every test checks the files on disk, not only the error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

use devcheck::checkpoint::{CheckpointError, LoadOptions};
use devcheck::{Device, Error, Module, Param, Tensor};

const CPU: Device = Device::Cpu;

/// Set in a child process this file starts to act out a failure (see [`run_child`]).
const CHILD: &str = "DEVCHECK_CHECKPOINT_CHILD";

/// Enters the target's scratch folder: tests use relative paths, so rendered errors are stable.
fn enter_scratch() {
    static CWD: Once = Once::new();
    CWD.call_once(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("checkpoint_safety");
        std::fs::create_dir_all(&dir).expect("scratch folder");
        std::env::set_current_dir(&dir).expect("enter scratch folder");
    });
}

/// `name` in the scratch folder, with whatever an earlier run left there removed.
fn scratch(name: &str) -> PathBuf {
    enter_scratch();
    let path = PathBuf::from(name);
    if path.exists() || path.is_symlink() {
        let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir_all(&path));
    }
    path
}

/// The checkpoint error `error` carries, when it is one.
fn checkpoint_error(error: &Error) -> Option<&CheckpointError> {
    match error {
        Error::Checkpoint(detail) => detail.downcast_ref(),
        _ => None,
    }
}

/// The temporary files a save left in `dir`.
fn leftovers(dir: &Path, name: &str) -> Vec<String> {
    let prefix = format!(".{name}.");
    std::fs::read_dir(dir)
        .expect("scratch folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".tmp"))
        .collect()
}

fn snapshot(name: &str, error: &Error) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"tests/checkpoint_safety\.rs:\d+:\d+", "tests/checkpoint_safety.rs:[LINE]");
    settings.bind(|| insta::assert_snapshot!(name, error.render(100)));
}

#[derive(Module)]
struct Maps {
    m: BTreeMap<String, BTreeMap<String, Tensor>>,
}

fn leaf(key: &str, value: f64) -> devcheck::Result<BTreeMap<String, Tensor>> {
    Ok(BTreeMap::from([(key.to_string(), Tensor::full([2], value, &CPU)?)]))
}

#[test]
fn keys_that_collide_or_contain_a_dot_are_refused_at_save_and_at_load() -> devcheck::Result<()> {
    // {"a": {"b.c"}} and {"a.b": {"c"}} are both `m.a.b.c`.
    let colliding = Maps {
        m: BTreeMap::from([("a".to_string(), leaf("b.c", 1.0)?), ("a.b".to_string(), leaf("c", 2.0)?)]),
    };
    let path = scratch("colliding.safetensors");
    std::fs::write(&path, b"an older checkpoint").expect("write");
    let error = colliding.save(&path).unwrap_err();
    let Some(CheckpointError::AmbiguousKeys { problems, .. }) = checkpoint_error(&error) else {
        panic!("{error:?}")
    };
    assert_eq!(problems.len(), 3, "two dotted segments, one shared key: {problems:?}");
    snapshot("colliding_keys_at_save", &error);
    assert_eq!(std::fs::read(&path).expect("read"), b"an older checkpoint", "nothing was written");

    // A dotted key alone cannot be split back on load either.
    let dotted = Maps { m: BTreeMap::from([("x.y".to_string(), leaf("z", 1.0)?)]) };
    assert!(matches!(
        dotted.save(scratch("dotted.safetensors")).as_ref().err().and_then(checkpoint_error),
        Some(CheckpointError::AmbiguousKeys { .. })
    ));
    assert!(!Path::new("dotted.safetensors").exists());

    // Loading into such a model: the same refusal, and the model is left as it was.
    let good = Maps { m: BTreeMap::from([("a".to_string(), leaf("c", 5.0)?)]) };
    let file = scratch("plain.safetensors");
    good.save(&file)?;
    let mut target = Maps {
        m: BTreeMap::from([("a".to_string(), leaf("b.c", 1.0)?), ("a.b".to_string(), leaf("c", 2.0)?)]),
    };
    let error = target.load_state_dict(&file, &CPU).unwrap_err();
    assert!(
        matches!(checkpoint_error(&error), Some(CheckpointError::AmbiguousKeys { action: "load", .. })),
        "{error:?}"
    );
    assert_eq!(target.m["a"]["b.c"].to_vec::<f32>()?, [1.0, 1.0]);
    // Plain keys load.
    let mut plain = Maps { m: BTreeMap::from([("a".to_string(), leaf("c", 0.0)?)]) };
    plain.load_state_dict(&file, &CPU)?;
    assert_eq!(plain.m["a"]["c"].to_vec::<f32>()?, [5.0, 5.0]);
    Ok(())
}

#[derive(Module)]
struct Tied {
    embed: Param,
    head: Param,
}

fn tied(value: f64) -> devcheck::Result<Tied> {
    let embed = Param::new(Tensor::full([3, 2], value, &CPU)?);
    Ok(Tied { head: embed.clone(), embed })
}

#[test]
fn a_tied_parameter_loads_only_when_its_paths_hold_the_same_values() -> devcheck::Result<()> {
    let path = scratch("tied.safetensors");
    tied(4.0)?.save(&path)?;
    let mut model = tied(0.0)?;
    model.load_state_dict(&path, &CPU)?;
    assert!(model.embed.same_param(&model.head), "still one parameter");
    assert_eq!(model.head.tensor().to_vec::<f32>()?, [4.0; 6]);

    // A file from an untied model: two different values for the one parameter.
    let untied = BTreeMap::from([
        ("embed".to_string(), Tensor::full([3, 2], 1.0, &CPU)?),
        ("head".to_string(), Tensor::full([3, 2], 2.0, &CPU)?),
    ]);
    let path = scratch("untied.safetensors");
    devcheck::checkpoint::save_tensors(&untied, &path)?;
    for strict in [true, false] {
        let mut model = tied(0.0)?;
        let error = model.load_state_dict_with(&path, &LoadOptions::new(&CPU).strict(strict)).unwrap_err();
        let Some(CheckpointError::TiedValuesDiffer { paths, .. }) = checkpoint_error(&error) else {
            panic!("{error:?}")
        };
        assert_eq!(paths, &["embed".to_string(), "head".to_string()]);
        assert_eq!(model.embed.tensor().to_vec::<f32>()?, [0.0; 6], "nothing loaded");
        if strict {
            snapshot("tied_values_differ", &error);
        }
    }
    Ok(())
}

#[derive(Module)]
struct Wide {
    weight: Param,
}

fn wide(value: f64, elements: usize) -> devcheck::Result<Wide> {
    Ok(Wide { weight: Param::new(Tensor::full([elements], value, &CPU)?) })
}

/// The one value every element of the checkpoint at `path` holds, or an error if it does not
/// load or is mixed.
fn uniform_value(path: &Path, elements: usize) -> devcheck::Result<f32> {
    let mut model = wide(-1.0, elements)?;
    model.load_state_dict(path, &CPU)?;
    let values = model.weight.tensor().to_vec::<f32>()?;
    assert!(values.iter().all(|&v| v == values[0]), "a checkpoint mixed from several saves");
    Ok(values[0])
}

#[test]
fn concurrent_saves_to_one_path_all_succeed_and_leave_one_whole_file() -> devcheck::Result<()> {
    const THREADS: usize = 8;
    const ELEMENTS: usize = 1 << 16;
    let path = scratch("shared.safetensors");
    for round in 0..4 {
        let results: Vec<devcheck::Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|thread| {
                    let path = &path;
                    scope.spawn(move || wide((round * THREADS + thread) as f64, ELEMENTS)?.save(path))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("no panic")).collect()
        });
        for result in results {
            result?;
        }
        let value = uniform_value(&path, ELEMENTS)? as usize;
        assert!((round * THREADS..(round + 1) * THREADS).contains(&value), "a save of this round won");
        assert_eq!(leftovers(Path::new("."), "shared.safetensors"), Vec::<String>::new());
    }
    // Saves that do not overlap: the last one wins.
    wide(1000.0, ELEMENTS)?.save(&path)?;
    assert_eq!(uniform_value(&path, ELEMENTS)?, 1000.0);
    Ok(())
}

#[cfg(unix)]
#[test]
fn saving_through_a_symlink_replaces_its_target_and_keeps_the_link() -> devcheck::Result<()> {
    let store = scratch("store");
    std::fs::create_dir(&store).expect("folder");
    let target = store.join("run-7.safetensors");
    wide(1.0, 4)?.save(&target)?;
    let link = scratch("latest.safetensors");
    std::os::unix::fs::symlink("store/run-7.safetensors", &link).expect("symlink");
    wide(2.0, 4)?.save(&link)?;
    assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink(), "still a link");
    assert_eq!(std::fs::read_link(&link).expect("link"), Path::new("store/run-7.safetensors"));
    assert_eq!(uniform_value(&target, 4)?, 2.0);
    assert_eq!(leftovers(&store, "run-7.safetensors"), Vec::<String>::new());
    Ok(())
}

/// Bytes this process has read so far (Linux), to tell whether a load read a file's data.
fn bytes_read() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines().find_map(|l| l.strip_prefix("rchar:")).and_then(|v| v.trim().parse().ok())
}

/// A file of `len` bytes that starts with `head` and takes no disk space for the rest.
fn sparse_file(name: &str, head: &[u8], len: u64) -> PathBuf {
    let path = scratch(name);
    let file = std::fs::File::create(&path).expect("create");
    std::io::Write::write_all(&mut &file, head).expect("write");
    file.set_len(len).expect("grow");
    path
}

#[test]
fn a_huge_file_is_judged_by_its_header_without_reading_its_data() -> devcheck::Result<()> {
    const HUGE: u64 = 3 << 30;
    // Not JSON: rejected after reading the header.
    let garbage = [&64u64.to_le_bytes()[..], &[b'#'; 64]].concat();
    let garbage = sparse_file("garbage-header.safetensors", &garbage, HUGE);
    // A valid header for one tensor of 3 GiB, and a model that wants another shape.
    let header =
        format!(r#"{{"weight":{{"dtype":"F32","shape":[{}],"data_offsets":[0,{HUGE}]}}}}"#, HUGE / 4);
    let valid = [&(header.len() as u64).to_le_bytes()[..], header.as_bytes()].concat();
    let valid = sparse_file("huge-valid.safetensors", &valid, 8 + header.len() as u64 + HUGE);

    let before = bytes_read();
    let error = wide(0.0, 4)?.load_state_dict(&garbage, &CPU).unwrap_err();
    assert!(matches!(checkpoint_error(&error), Some(CheckpointError::Malformed { .. })), "{error:?}");
    let error = wide(0.0, 4)?.load_state_dict(&valid, &CPU).unwrap_err();
    assert!(matches!(checkpoint_error(&error), Some(CheckpointError::Mismatch(_))), "{error:?}");
    let inventory = devcheck::check::inspect_checkpoint(&valid)?;
    assert_eq!(inventory.bytes() as u64, HUGE);
    if let (Some(before), Some(after)) = (before, bytes_read()) {
        // Other tests of this process read small files meanwhile; the data is gigabytes.
        assert!(after - before < 256 << 20, "read {} bytes", after - before);
    }
    Ok(())
}

/// Runs the test `name` of this file again in a child process with [`CHILD`] set to `mode`.
fn run_child(name: &str, mode: &str) -> std::process::Child {
    // The test's full name in the binary: this module's path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, module)| module);
    let full = if module.is_empty() { name.to_string() } else { format!("{module}::{name}") };
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", full.as_str(), "--nocapture", "--test-threads", "1"])
        .env(CHILD, mode)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the child")
}

#[cfg(target_os = "linux")]
#[test]
fn a_save_that_fails_midway_leaves_the_old_checkpoint_whole() -> devcheck::Result<()> {
    const ELEMENTS: usize = 1 << 18; // 1 MiB: past the child's file size limit
    enter_scratch();
    if std::env::var(CHILD).as_deref() == Ok("file-size-limit") {
        // Writes past 256 KiB fail with EFBIG (SIGXFSZ ignored), as a full disk fails with ENOSPC.
        // SAFETY: plain libc calls on this process's own limits and signal disposition.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit { rlim_cur: 256 << 10, rlim_max: 256 << 10 };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
        }
        let error = wide(2.0, ELEMENTS)?.save(Path::new("limited.safetensors")).unwrap_err();
        println!("child error: {}", error.render(100));
        return Ok(());
    }
    let path = scratch("limited.safetensors");
    wide(1.0, 1024)?.save(&path)?;
    let old = std::fs::read(&path).expect("old file");
    let child = run_child("a_save_that_fails_midway_leaves_the_old_checkpoint_whole", "file-size-limit");
    let output = child.wait_with_output().expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("cannot write checkpoint `limited.safetensors`"), "{stdout}");
    assert_eq!(std::fs::read(&path).expect("file"), old, "the old checkpoint is untouched");
    assert_eq!(leftovers(Path::new("."), "limited.safetensors"), Vec::<String>::new());
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_save_killed_midway_leaves_a_whole_checkpoint() -> devcheck::Result<()> {
    const ELEMENTS: usize = 1 << 21; // 8 MiB a save
    enter_scratch();
    if std::env::var(CHILD).as_deref() == Ok("save-forever") {
        let (a, b) = (wide(1.0, ELEMENTS)?, wide(2.0, ELEMENTS)?);
        println!("child: saving");
        loop {
            a.save("killed.safetensors")?;
            b.save("killed.safetensors")?;
        }
    }
    let path = scratch("killed.safetensors");
    wide(1.0, ELEMENTS)?.save(&path)?;
    for delay_ms in [5, 40, 120] {
        let mut child = run_child("a_save_killed_midway_leaves_a_whole_checkpoint", "save-forever");
        // Wait until the child is saving (libtest prints its own lines first); keep the pipe
        // open until it is killed, so that it never fails on a closed stdout instead.
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().expect("piped")));
        assert!(
            lines.any(|l| l.expect("child output").ends_with("child: saving")),
            "the child started saving"
        );
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("reaped");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "killed, not exited"
        );
        drop(lines);
        let value = uniform_value(&path, ELEMENTS)?;
        assert!(value == 1.0 || value == 2.0, "a whole checkpoint of one save, got {value}");
        // A killed save cannot remove its temporary file; the target is what matters.
        for temp in leftovers(Path::new("."), "killed.safetensors") {
            std::fs::remove_file(temp).expect("clean up");
        }
    }
    Ok(())
}
