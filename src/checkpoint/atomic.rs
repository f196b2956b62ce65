//! Replacing a file so that it is never lost: the new contents go to a temporary file beside the
//! target, which is synced and then renamed over it.
//!
//! * A failure before the rename (a full disk, a killed process) leaves the old file as it was;
//!   the temporary file is removed (a killed process leaves it behind, named `.NAME.*.tmp`).
//! * Every write has its own temporary file, created with `create_new` under a name no other
//!   write uses (process id, a counter, a random number), so concurrent writes to one path never
//!   touch each other's data: each rename puts one complete file in place, and the last one
//!   wins.
//! * A symlink is followed and its target replaced; the link stays a link.
//! * A replaced file keeps its permissions.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Links followed before giving up (Linux's own limit is 40).
const MAX_LINKS: usize = 40;

/// Temporary names tried before giving up: only another file of the same random name could
/// collide.
const MAX_ATTEMPTS: usize = 16;

/// Replaces the file at `path` (or the file a symlink at `path` points to) with what `write`
/// writes, or leaves it untouched when anything fails. Returns the path written.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let target = resolve_links(path)?;
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names a folder, not a file"))?;
    let (temp_path, temp) = create_temp(&dir, &name.to_string_lossy())?;
    let written = fill(temp, &target, write).and_then(|()| std::fs::rename(&temp_path, &target));
    if let Err(error) = written {
        // The error to report is the write's; the temporary file may already be gone.
        let _ = std::fs::remove_file(&temp_path);
        return Err(error);
    }
    sync_dir(&dir);
    Ok(target)
}

/// `path` with every symlink in its last component followed: the file a save must replace.
/// A link to a file that does not exist yet resolves to that file's path.
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)?;
                current = match current.parent() {
                    // A relative link is relative to the folder the link is in.
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(io::Error::other(format!("more than {MAX_LINKS} symlinks in a row (a loop?)")))
}

/// A new file in `dir` that no other write uses, created by this call.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last_error = None;
    for _ in 0..MAX_ATTEMPTS {
        let unique = format!(
            ".{name}.{}.{}.{:016x}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u64>()
        );
        let temp_path = dir.join(unique);
        match OpenOptions::new().write(true).create_new(true).open(&temp_path) {
            Ok(file) => return Ok((temp_path, file)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last_error = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// Writes the contents, gives the file the target's permissions when it replaces one, and syncs
/// it to disk (a rename before the data is on disk could leave an empty file after a crash).
fn fill(file: File, target: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut out = BufWriter::new(file);
    write(&mut out)?;
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    match std::fs::metadata(target) {
        Ok(existing) => file.set_permissions(existing.permissions())?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    file.sync_all()
}

/// Syncs the folder so that the rename itself survives a crash. Best effort: the new file is in
/// place either way, and some file systems cannot sync a folder.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_files(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn a_failing_write_leaves_the_old_file_whole_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        std::fs::write(&path, b"the old checkpoint").unwrap();
        let result = write_atomically(&path, |out| {
            out.write_all(&[7u8; 100_000])?;
            // What a full disk reports.
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(std::fs::read(&path).unwrap(), b"the old checkpoint");
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    }

    #[cfg(unix)]
    #[test]
    fn a_relative_symlink_stays_a_link_and_its_target_is_replaced_in_its_own_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        let target = dir.path().join("store").join("real.bin");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("latest.bin");
        std::os::unix::fs::symlink("store/real.bin", &link).unwrap();
        let written = write_atomically(&link, |out| out.write_all(b"new")).unwrap();
        assert_eq!(written, target);
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // The temporary file was made beside the target (a rename cannot cross file systems).
        assert_eq!(temp_files(&dir.path().join("store")), Vec::<String>::new());
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_keeps_its_permissions_and_a_link_loop_is_an_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.bin");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&path, |out| out.write_all(b"new")).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);

        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        assert!(write_atomically(&a, |out| out.write_all(b"x")).is_err());
    }
}
