//! Replacing a user's file so that it is never lost: the new text goes to a temporary file in
//! the same folder (a fresh name, created exclusively), gets the old file's permissions, is
//! synced to disk, and is renamed over the old file; then the folder is synced. At every moment
//! the path holds the old text or the new one, whole: a full disk, a failed sync or a kill at any
//! step leaves the original as it was (a kill may leave the temporary file beside it). On
//! failure the temporary file is removed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a file was not replaced. The file is unchanged in every case.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplaceError {
    #[error("the file is read-only")]
    ReadOnly,
    #[error("the file changed on disk since it was read")]
    Changed,
    #[error("it is not a regular file")]
    NotAFile,
    #[error("could not {step}: {source}")]
    Io {
        step: &'static str,
        #[source]
        source: io::Error,
    },
}

/// The system calls a replacement makes that can fail half-way; tests stand in for them to
/// fail at each step.
pub(crate) trait FileSystem {
    fn write(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }
    fn sync(&mut self, file: &File) -> io::Result<()> {
        file.sync_all()
    }
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
}

/// The real file system.
pub(crate) struct Disk;

impl FileSystem for Disk {}

/// Replaces the file at `path` (through symbolic links: the link stays, its target changes)
/// with `contents`, if it still holds `expected`.
pub(crate) fn replace_file(path: &Path, expected: &[u8], contents: &[u8]) -> Result<(), ReplaceError> {
    replace_file_with(&mut Disk, path, expected, contents)
}

pub(crate) fn replace_file_with(
    fs_ops: &mut dyn FileSystem,
    path: &Path,
    expected: &[u8],
    contents: &[u8],
) -> Result<(), ReplaceError> {
    let io = |step: &'static str| move |source: io::Error| ReplaceError::Io { step, source };
    // The rename must replace the file the link points to, not the link.
    let target = fs::canonicalize(path).map_err(io("find the file"))?;
    let meta = fs::metadata(&target).map_err(io("read the file's metadata"))?;
    if !meta.is_file() {
        return Err(ReplaceError::NotAFile);
    }
    // A file marked read-only, or one the user may not write, is not for a fix to rewrite, even
    // where the folder would allow the rename (or the user is privileged).
    if meta.permissions().readonly() {
        return Err(ReplaceError::ReadOnly);
    }
    let mut current = match OpenOptions::new().read(true).write(true).open(&target) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Err(ReplaceError::ReadOnly),
        Err(e) => return Err(io("open the file")(e)),
    };
    let mut on_disk = Vec::with_capacity(expected.len());
    current.read_to_end(&mut on_disk).map_err(io("read the file"))?;
    drop(current);
    if on_disk != expected {
        return Err(ReplaceError::Changed);
    }
    let folder = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (temp_path, mut temp) = create_temp(&folder, &target).map_err(io("create a temporary file"))?;
    let written = (|| {
        fs_ops.write(&mut temp, contents).map_err(io("write the temporary file"))?;
        temp.set_permissions(meta.permissions()).map_err(io("copy the file's permissions"))?;
        keep_owner(&temp, &meta);
        fs_ops.sync(&temp).map_err(io("sync the temporary file to disk"))?;
        drop(temp);
        fs_ops.rename(&temp_path, &target).map_err(io("rename the temporary file over the file"))
    })();
    if let Err(e) = written {
        // Best effort: the original is untouched either way.
        let _ = fs::remove_file(&temp_path);
        return Err(e);
    }
    // The rename is done; syncing the folder makes it survive a power loss. Some systems cannot
    // open or sync a folder, and the file is whole either way, so a failure here is not one.
    if let Ok(dir) = File::open(&folder) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// A new file beside `target`, named `.{name}.devcheck-{pid}-{n}.tmp`, created exclusively so
/// that two runs (or two threads) never share one.
fn create_temp(folder: &Path, target: &Path) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut last_error = None;
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let candidate = folder.join(format!(".{name}.devcheck-{}-{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&candidate) {
            Ok(f) => return Ok((candidate, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// The new file gets the old one's owner and group where the system allows it (it does for
/// the file's owner keeping their own group; changing the owner needs privileges). Where it
/// does not, the file belongs to whoever ran the fix, as any editor's save would.
#[cfg(unix)]
fn keep_owner(file: &File, meta: &fs::Metadata) {
    use std::os::unix::fs::MetadataExt as _;
    let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
}

#[cfg(not(unix))]
fn keep_owner(_file: &File, _meta: &fs::Metadata) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that fills up half-way through the write.
    struct FullDisk;

    impl FileSystem for FullDisk {
        fn write(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
            file.write_all(&bytes[..bytes.len() / 2])?;
            Err(io::Error::from_raw_os_error(libc_enospc()))
        }
    }

    /// The process "dies" after the temporary file is written and synced, before the rename.
    struct FailingRename;

    impl FileSystem for FailingRename {
        fn rename(&mut self, _: &Path, _: &Path) -> io::Result<()> {
            Err(io::Error::other("killed before the rename"))
        }
    }

    struct FailingSync;

    impl FileSystem for FailingSync {
        fn sync(&mut self, _: &File) -> io::Result<()> {
            Err(io::Error::other("input/output error"))
        }
    }

    fn libc_enospc() -> i32 {
        // ENOSPC is 28 on Linux and the BSDs, macOS included.
        28
    }

    fn folder_entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read the folder")
            .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn setup(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("model.rs");
        fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn a_failure_at_any_step_leaves_the_original_whole_and_no_temporary_file() {
        let original = "fn forward() {}\n".repeat(1000);
        let new = "fn forward(xs: &Tensor) {}\n".repeat(1000);
        let cases: [(&mut dyn FileSystem, &str); 3] = [
            (&mut FullDisk, "could not write the temporary file: No space left on device"),
            (&mut FailingSync, "could not sync the temporary file to disk: input/output error"),
            (
                &mut FailingRename,
                "could not rename the temporary file over the file: killed before the rename",
            ),
        ];
        for (fs_ops, message) in cases {
            let (dir, path) = setup(&original);
            let e = replace_file_with(fs_ops, &path, original.as_bytes(), new.as_bytes())
                .expect_err("the step fails");
            assert!(e.to_string().starts_with(message), "{e}");
            assert_eq!(fs::read_to_string(&path).expect("read"), original);
            assert_eq!(folder_entries(dir.path()), ["model.rs"]);
        }
    }

    #[test]
    fn the_file_is_replaced_with_its_permissions() {
        let (dir, path) = setup("old\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).expect("chmod");
        }
        replace_file(&path, b"old\n", b"new\n").expect("replaced");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new\n");
        assert_eq!(folder_entries(dir.path()), ["model.rs"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode, 0o640);
        }
    }

    #[test]
    fn a_changed_file_is_not_overwritten() {
        let (_dir, path) = setup("edited meanwhile\n");
        let e = replace_file(&path, b"as linted\n", b"fixed\n").expect_err("changed");
        assert!(matches!(e, ReplaceError::Changed));
        assert_eq!(fs::read_to_string(&path).expect("read"), "edited meanwhile\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_stays_a_link_and_its_target_is_replaced() {
        let (dir, path) = setup("old\n");
        let link = dir.path().join("link.rs");
        std::os::unix::fs::symlink("model.rs", &link).expect("symlink");
        replace_file(&link, b"old\n", b"new\n").expect("replaced");
        assert!(fs::symlink_metadata(&link).expect("lstat").file_type().is_symlink());
        assert_eq!(fs::read_to_string(&path).expect("read"), "new\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_read_only_file_is_left_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let (dir, path) = setup("old\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).expect("chmod");
        let e = replace_file(&path, b"old\n", b"new\n").expect_err("read-only");
        assert!(matches!(e, ReplaceError::ReadOnly));
        assert_eq!(fs::read_to_string(&path).expect("read"), "old\n");
        assert_eq!(folder_entries(dir.path()), ["model.rs"]);
    }
}
