//! Replacing a user's file so that neither it nor another program's edit of it is ever lost.
//! devcheck writes files in two places, and both come here: checkpoints
//! ([`write_atomically`]: create or replace, the last save wins) and `devcheck lint --fix`
//! ([`replace_if_unchanged`]: a compare-and-swap against the text that was linted).
//!
//! Both write the new contents to a temporary file beside the target (a fresh name, created
//! exclusively), give it the target's permissions (and owner, where allowed), sync it to disk and
//! only then put it in place; the folder is synced after. At every moment the path holds the old
//! contents or the new ones, whole: a full disk, a failed sync or a kill at any step leaves the
//! original as it was (a kill may leave the temporary file, `.NAME.devcheck-*.tmp`, beside it).
//! A symbolic link is followed: the link stays, its target is replaced.
//!
//! # Concurrent edits (`replace_if_unchanged`)
//! A plain "read, compare, rename" loses what another program writes between the compare and
//! the rename. Here, on Linux:
//!
//! 1. The file is opened for reading and compared with the text that was linted.
//! 2. A write *lease* is taken on it (`F_SETLEASE`): the kernel grants it only while no other
//!    program has the file open, and from then on any program that opens it waits until the
//!    lease is released, which tells us it tried. No lease while another program holds the
//!    file open (retried for a second): the file is left alone ([`ReplaceError::Busy`]). The
//!    new file is leased too, so that nobody opens it before step 5 is done.
//! 3. The contents are compared again, then the new file and the old are swapped in one step
//!    (`renameat2(RENAME_EXCHANGE)`), so the old file is still at hand under the temporary name.
//! 4. If the file swapped out is not the one read (another program saved over it), or another
//!    program tried to open it meanwhile, or its contents changed, the swap is undone: the old
//!    file is put back, the leases are released, and the program that was waiting opens the
//!    original. The run reports the file as changed and writes nothing.
//! 5. Otherwise the old file's last name is removed while its lease still holds, and its lease
//!    is released. A program that had found the file just before the swap and was about to open
//!    it (its open waited on the lease) may open it now: the lease is taken once more, which
//!    succeeds only when no other program has the file open, and whatever was appended to the
//!    old file is appended to the new one. Only then is the new file's lease released, so what
//!    others append to it comes after: appends keep their order.
//!
//! What remains: a program that holds the file open from before step 2 and keeps it open (it
//! makes step 2 fail: the file is not fixed); a write that is not an append made through a
//! descriptor opened in the instant of step 5 (it is kept beside the file as
//! `.NAME.devcheck-conflict-*`, reported, never dropped). Where leases are not available (other
//! systems; file systems without them, such as NFS; a file another user owns), steps 2 and 5
//! rely on comparing contents, and a write that lands after the last comparison through a
//! descriptor opened before the swap is lost; where the swap is not available, the file is
//! renamed over, after a last comparison of its identity and contents. A file with several hard
//! links is never replaced ([`ReplaceError::HardLinked`]): a new file would split the names.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read as _, Seek as _, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a file was not replaced. The file is unchanged in every case, and so is every edit
/// another program made to it.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    #[error("the file is read-only")]
    ReadOnly,
    #[error("the file changed on disk since it was read")]
    Changed,
    #[error("another program has the file open")]
    Busy,
    #[error("it is not a regular file")]
    NotAFile,
    #[error(
        "it has {links} hard links: a new file would split them (the other names would keep the old text)"
    )]
    HardLinked { links: u64 },
    #[error(
        "the file changed on disk while it was replaced; the other program's version is kept as `{}`",
        .kept.display()
    )]
    ConflictKept { kept: PathBuf },
    #[error("could not {step}: {source}")]
    Io {
        step: &'static str,
        #[source]
        source: io::Error,
    },
}

/// The system calls a replacement makes that can fail half-way; tests stand in for them to
/// fail at each step or to act as another program at the worst moment.
pub trait FileSystem {
    fn write(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }
    fn sync(&mut self, file: &File) -> io::Result<()> {
        file.sync_all()
    }
    /// Puts `from` in place of `to`: an exchange where the system has one (`to`'s old file is
    /// then at `from`), else a rename.
    fn swap(&mut self, from: &Path, to: &Path) -> io::Result<Swapped> {
        swap(from, to)
    }
}

/// How [`FileSystem::swap`] put the new file in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swapped {
    /// The two names were exchanged: the old file is at the temporary name.
    Exchanged,
    /// The new file was renamed over the old one, which has no name left.
    Renamed,
}

/// The real file system.
pub struct Disk;

impl FileSystem for Disk {}

/// Replaces the file at `path` (through symbolic links: the link stays, its target changes) with
/// `contents`, if it still holds `expected`, without losing what another program writes to it
/// meanwhile (see the crate docs for how, and for what remains).
pub fn replace_if_unchanged(path: &Path, expected: &[u8], contents: &[u8]) -> Result<(), ReplaceError> {
    replace_if_unchanged_with(&mut Disk, path, expected, contents)
}

/// [`replace_if_unchanged`] through `fs_ops`.
pub fn replace_if_unchanged_with(
    fs_ops: &mut dyn FileSystem,
    path: &Path,
    expected: &[u8],
    contents: &[u8],
) -> Result<(), ReplaceError> {
    // The swap must replace the file the link points to, not the link.
    let target = fs::canonicalize(path).map_err(io_at("find the file"))?;
    let meta = fs::metadata(&target).map_err(io_at("read the file's metadata"))?;
    if !meta.is_file() {
        return Err(ReplaceError::NotAFile);
    }
    // A file marked read-only, or one the user may not write, is not for a fix to rewrite, even
    // where the folder would allow the swap (or the user is privileged).
    if meta.permissions().readonly() {
        return Err(ReplaceError::ReadOnly);
    }
    let links = hard_links(&meta);
    if links > 1 {
        return Err(ReplaceError::HardLinked { links });
    }
    match OpenOptions::new().write(true).open(&target) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Err(ReplaceError::ReadOnly),
        Err(e) => return Err(io_at("open the file")(e)),
    }
    // Read through one descriptor that stays on this file whatever happens to its name.
    let old = File::open(&target).map_err(io_at("open the file"))?;
    if !holds(&old, expected).map_err(io_at("read the file"))? {
        return Err(ReplaceError::Changed);
    }
    let folder = folder_of(&target);
    let (temp_path, mut temp) = create_temp(&folder, &target).map_err(io_at("create a temporary file"))?;
    let written = (|| {
        fs_ops.write(&mut temp, contents).map_err(io_at("write the temporary file"))?;
        temp.set_permissions(meta.permissions()).map_err(io_at("copy the file's permissions"))?;
        keep_owner(&temp, &meta);
        fs_ops.sync(&temp).map_err(io_at("sync the temporary file to disk"))
    })();
    if let Err(e) = written {
        // Best effort: the original is untouched either way.
        drop(temp);
        let _ = fs::remove_file(&temp_path);
        return Err(e);
    }
    let result = swap_in(fs_ops, (&old, &temp), &temp_path, &target, (expected, contents));
    drop(temp);
    // Whatever happened, the temporary name goes (after a swap, it names the old file).
    let _ = fs::remove_file(&temp_path);
    sync_dir(&folder);
    result
}

/// Steps 2 to 5 of the crate docs: `new` is the new file, open, at `temp`; `old` is the file
/// that was read. Both are leased while the swap is decided, so that nobody opens either: not
/// the old one, whose edits would be lost, nor the new one, whose appends would land before
/// those carried over from the old one.
fn swap_in(
    fs_ops: &mut dyn FileSystem,
    (old, new): (&File, &File),
    temp: &Path,
    target: &Path,
    (expected, contents): (&[u8], &[u8]),
) -> Result<(), ReplaceError> {
    let old_lease = Lease::take(old, Duration::from_secs(1));
    if matches!(old_lease, Lease::Busy) {
        return Err(ReplaceError::Busy);
    }
    // Nobody else has the new file: it was made by this call, under a fresh name.
    let new_lease = Lease::take(new, Duration::ZERO);
    let release = |old_lease: &Lease, new_lease: &Lease| {
        old_lease.release(old);
        new_lease.release(new);
    };
    let unchanged = holds(old, expected).map_err(io_at("read the file"))?
        && same_file(old, target).map_err(io_at("read the file's metadata"))?;
    if !unchanged {
        release(&old_lease, &new_lease);
        return Err(ReplaceError::Changed);
    }
    let swapped = match fs_ops.swap(temp, target) {
        Ok(s) => s,
        Err(e) => {
            release(&old_lease, &new_lease);
            return Err(io_at("put the new file in place")(e));
        }
    };
    if swapped == Swapped::Exchanged {
        // The name held the file that was read, nobody tried to open it, and it still holds the
        // text that was linted: the swap stands. Otherwise it is undone.
        let stands = same_file(old, temp).unwrap_or(false)
            && !old_lease.broken(old)
            && holds(old, expected).unwrap_or(false);
        if !stands {
            let undone = fs_ops.swap(temp, target);
            release(&old_lease, &new_lease);
            undone.map_err(io_at("put the original back after a concurrent edit"))?;
            // Without a lease on the new file, a program may have appended to it in that
            // instant: those bytes belong to the original.
            if matches!(new_lease, Lease::Unavailable) {
                carry_appends(new, contents, target)?;
            }
            return Err(ReplaceError::Changed);
        }
        // The old file's last name goes while nobody else can open it.
        let _ = fs::remove_file(temp);
    }
    old_lease.release(old);
    let settled = settle(old, expected, new, target);
    new_lease.release(new);
    settled
}

/// Step 5 of the crate docs: once nobody else has the old file open, whatever was appended to it
/// since it was read is appended to the new file (still leased, so before anyone else's).
fn settle(old: &File, expected: &[u8], new: &File, target: &Path) -> Result<(), ReplaceError> {
    let lease = Lease::take(old, Duration::from_secs(5));
    let now = read_all(old).map_err(io_at("read the replaced file"))?;
    lease.release(old);
    if now == expected {
        return Ok(());
    }
    match now.strip_prefix(expected) {
        Some(tail) => append_to(new, tail).map_err(io_at("carry over what another program appended")),
        None => Err(ReplaceError::ConflictKept { kept: keep_conflict(target, &now)? }),
    }
}

/// After an undone swap where the new file could not be leased: a program may have opened
/// `target` in the instant it held the new file and appended to it; those bytes go to `target`,
/// which holds the original again.
fn carry_appends(new: &File, contents: &[u8], target: &Path) -> Result<(), ReplaceError> {
    let now = read_all(new).map_err(io_at("read the set-aside file"))?;
    if now == contents {
        return Ok(());
    }
    match now.strip_prefix(contents) {
        Some(tail) => OpenOptions::new()
            .append(true)
            .open(target)
            .and_then(|f| append_to(&f, tail))
            .map_err(io_at("carry over what another program appended")),
        None => Err(ReplaceError::ConflictKept { kept: keep_conflict(target, &now)? }),
    }
}

fn append_to(mut file: &File, tail: &[u8]) -> io::Result<()> {
    file.seek(io::SeekFrom::End(0))?;
    file.write_all(tail)?;
    file.sync_all()
}

/// Saves a version another program wrote that cannot be merged by appending, beside `target`.
fn keep_conflict(target: &Path, bytes: &[u8]) -> Result<PathBuf, ReplaceError> {
    let folder = folder_of(target);
    let (path, mut file) =
        create_named(&folder, target, "conflict", "").map_err(io_at("keep another program's version"))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(io_at("keep another program's version"))?;
    Ok(path)
}

/// Does `file` hold exactly `expected`, read from its start?
fn holds(file: &File, expected: &[u8]) -> io::Result<bool> {
    let len = file.metadata()?.len();
    if u64::try_from(expected.len()).ok() != Some(len) {
        return Ok(false);
    }
    Ok(read_all(file)? == expected)
}

fn read_all(mut file: &File) -> io::Result<Vec<u8>> {
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Is the file at `path` the one `file` has open?
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let (a, b) = (file.metadata()?, fs::metadata(path)?);
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

#[cfg(not(unix))]
fn same_file(_file: &File, _path: &Path) -> io::Result<bool> {
    Ok(true)
}

#[cfg(unix)]
fn hard_links(meta: &fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    meta.nlink()
}

#[cfg(not(unix))]
fn hard_links(_meta: &fs::Metadata) -> u64 {
    1
}

/// The new file in place of the old: exchanged where the system can (Linux 3.15+, on the file
/// systems that support it), else renamed over it.
pub fn swap(from: &Path, to: &Path) -> io::Result<Swapped> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt as _;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
        };
        let (from_c, to_c) = (c(from)?, c(to)?);
        // SAFETY: both pointers are valid NUL-terminated strings that outlive the call; the
        // directory descriptors are AT_FDCWD, so the paths are taken as given.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                from_c.as_ptr(),
                libc::AT_FDCWD,
                to_c.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if rc == 0 {
            return Ok(Swapped::Exchanged);
        }
        let error = io::Error::last_os_error();
        // Not supported by this kernel or file system: the rename below.
        if !matches!(error.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)) {
            return Err(error);
        }
    }
    fs::rename(from, to).map(|()| Swapped::Renamed)
}

/// `fcntl`'s command to choose the signal a broken lease sends (Linux's `F_SETSIG`, which the
/// libc crate does not name).
#[cfg(target_os = "linux")]
const F_SETSIG: libc::c_int = 10;

/// A write lease on the file that was read (Linux): while it is held, no other program has the
/// file open, and one that tries to open it waits and breaks the lease, which we can see.
enum Lease {
    Held,
    /// Another program kept the file open for the whole wait.
    Busy,
    /// No lease on this system, file system or file: only contents are compared.
    Unavailable,
}

impl Lease {
    #[cfg(target_os = "linux")]
    fn take(file: &File, wait: Duration) -> Lease {
        use std::os::fd::AsRawFd as _;
        let fd = file.as_raw_fd();
        // A broken lease signals its holder, with SIGIO by default, whose default action ends
        // the process; SIGURG's default is to ignore it, and nothing here handles it.
        // SAFETY: F_SETSIG on a descriptor this function borrows; no memory is passed.
        if unsafe { libc::fcntl(fd, F_SETSIG, libc::SIGURG) } != 0 {
            return Lease::Unavailable;
        }
        let start = Instant::now();
        loop {
            // SAFETY: as above.
            if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) } == 0 {
                return Lease::Held;
            }
            match io::Error::last_os_error().raw_os_error() {
                // Another program has the file open: it usually closes it at once.
                Some(libc::EAGAIN) if start.elapsed() < wait => std::thread::sleep(Duration::from_millis(2)),
                Some(libc::EAGAIN) => return Lease::Busy,
                _ => return Lease::Unavailable,
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn take(_file: &File, _wait: Duration) -> Lease {
        Lease::Unavailable
    }

    /// Has another program tried to open the file since the lease was taken?
    #[cfg(target_os = "linux")]
    fn broken(&self, file: &File) -> bool {
        use std::os::fd::AsRawFd as _;
        if !matches!(self, Lease::Held) {
            return false;
        }
        // While a break is pending, the lease reads as what it is being broken to.
        // SAFETY: F_GETLEASE on a borrowed descriptor; no memory is passed.
        let now = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLEASE) };
        now != libc::F_WRLCK
    }

    #[cfg(not(target_os = "linux"))]
    fn broken(&self, _file: &File) -> bool {
        false
    }

    fn release(&self, file: &File) {
        #[cfg(target_os = "linux")]
        if matches!(self, Lease::Held) {
            use std::os::fd::AsRawFd as _;
            // SAFETY: F_SETLEASE on a borrowed descriptor; no memory is passed. Releasing cannot
            // fail for a lease this descriptor holds.
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = file;
    }
}

/// Replaces the file at `path` (or the file a symlink at `path` points to) with what `write`
/// writes, or leaves it untouched when anything fails; creates it when it does not exist.
/// Concurrent writes to one path never touch each other's data: each puts one complete file in
/// place, and the last one wins. Returns the path written.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let target = resolve_links(path)?;
    if target.file_name().is_none() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the path names a folder, not a file"));
    }
    let folder = folder_of(&target);
    let (temp_path, temp) = create_temp(&folder, &target)?;
    let written = fill(temp, &target, write).and_then(|()| fs::rename(&temp_path, &target));
    if let Err(error) = written {
        // The error to report is the write's; the temporary file may already be gone.
        let _ = fs::remove_file(&temp_path);
        return Err(error);
    }
    sync_dir(&folder);
    Ok(target)
}

/// Links followed before giving up (Linux's own limit is 40).
const MAX_LINKS: usize = 40;

/// `path` with every symlink in its last component followed: the file a save must replace.
/// A link to a file that does not exist yet resolves to that file's path.
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&current)?;
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

/// Writes the contents, gives the file the target's permissions when it replaces one, and syncs
/// it to disk (a rename before the data is on disk could leave an empty file after a crash).
fn fill(file: File, target: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut out = BufWriter::new(file);
    write(&mut out)?;
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    match fs::metadata(target) {
        Ok(existing) => file.set_permissions(existing.permissions())?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    file.sync_all()
}

fn folder_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A new file beside `target`, `.{name}.devcheck-{pid}-{n}-{random}.tmp`, created exclusively so
/// that two runs (or two threads) never share one.
fn create_temp(folder: &Path, target: &Path) -> io::Result<(PathBuf, File)> {
    create_named(folder, target, "", ".tmp")
}

fn create_named(folder: &Path, target: &Path, what: &str, suffix: &str) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let what = if what.is_empty() { String::new() } else { format!("{what}-") };
    let mut last_error = None;
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let candidate = folder.join(format!(
            ".{name}.devcheck-{what}{}-{n}-{:08x}{suffix}",
            std::process::id(),
            random_u32()
        ));
        match OpenOptions::new().read(true).write(true).create_new(true).open(&candidate) {
            Ok(f) => return Ok((candidate, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

/// A number no other process is likely to pick at the same moment (names only need to differ;
/// `create_new` makes a collision a retry, never a shared file).
fn random_u32() -> u32 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u32
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

fn io_at(step: &'static str) -> impl Fn(io::Error) -> ReplaceError {
    move |source| ReplaceError::Io { step, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that fills up half-way through the write.
    struct FullDisk;

    impl FileSystem for FullDisk {
        fn write(&mut self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
            file.write_all(&bytes[..bytes.len() / 2])?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        }
    }

    /// The process "dies" after the temporary file is written and synced, before the swap.
    struct FailingSwap;

    impl FileSystem for FailingSwap {
        fn swap(&mut self, _: &Path, _: &Path) -> io::Result<Swapped> {
            Err(io::Error::other("killed before the swap"))
        }
    }

    struct FailingSync;

    impl FileSystem for FailingSync {
        fn sync(&mut self, _: &File) -> io::Result<()> {
            Err(io::Error::other("input/output error"))
        }
    }

    /// Another program appends to the file at the worst moment: just before the swap, from
    /// another thread (an open of a leased file waits for the lease).
    struct AppendsDuringSwap(Option<std::thread::JoinHandle<()>>);

    impl FileSystem for AppendsDuringSwap {
        fn swap(&mut self, from: &Path, to: &Path) -> io::Result<Swapped> {
            if self.0.is_none() {
                let to = to.to_path_buf();
                self.0 = Some(std::thread::spawn(move || {
                    let mut f = OpenOptions::new().append(true).open(&to).expect("open to append");
                    f.write_all(b"appended meanwhile\n").expect("append");
                }));
                // Give the other program time to reach its open.
                std::thread::sleep(Duration::from_millis(50));
            }
            swap(from, to)
        }
    }

    /// Another program saves over the file (a new file renamed over it, as editors do) just
    /// before the swap. (It must not read the file: an open of a leased file from this process
    /// would wait for the lease this process holds.)
    struct SavedOverDuringSwap(bool);

    impl FileSystem for SavedOverDuringSwap {
        fn swap(&mut self, from: &Path, to: &Path) -> io::Result<Swapped> {
            if !self.0 {
                self.0 = true;
                let saved = to.with_file_name("editor-save.tmp");
                fs::write(&saved, b"the editor's version\n")?;
                fs::rename(&saved, to)?;
            }
            swap(from, to)
        }
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
        let path = dir.path().join("model.py");
        fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn a_failure_at_any_step_leaves_the_original_whole_and_no_temporary_file() {
        let original = "def forward(): pass\n".repeat(1000);
        let new = "def forward(x): pass\n".repeat(1000);
        let cases: [(&mut dyn FileSystem, &str); 3] = [
            (&mut FullDisk, "could not write the temporary file: No space left on device"),
            (&mut FailingSync, "could not sync the temporary file to disk: input/output error"),
            (&mut FailingSwap, "could not put the new file in place: killed before the swap"),
        ];
        for (fs_ops, message) in cases {
            let (dir, path) = setup(&original);
            let e = replace_if_unchanged_with(fs_ops, &path, original.as_bytes(), new.as_bytes())
                .expect_err("the step fails");
            assert!(e.to_string().starts_with(message), "{e}");
            assert_eq!(fs::read_to_string(&path).expect("read"), original);
            assert_eq!(folder_entries(dir.path()), ["model.py"]);
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
        replace_if_unchanged(&path, b"old\n", b"new\n").expect("replaced");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new\n");
        assert_eq!(folder_entries(dir.path()), ["model.py"]);
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
        let e = replace_if_unchanged(&path, b"as linted\n", b"fixed\n").expect_err("changed");
        assert!(matches!(e, ReplaceError::Changed));
        assert_eq!(fs::read_to_string(&path).expect("read"), "edited meanwhile\n");
    }

    #[test]
    fn an_append_at_the_moment_of_the_swap_is_never_lost() {
        for _ in 0..20 {
            let (dir, path) = setup("as linted\n");
            let mut fs_ops = AppendsDuringSwap(None);
            let result = replace_if_unchanged_with(&mut fs_ops, &path, b"as linted\n", b"fixed\n");
            fs_ops.0.take().expect("the other program ran").join().expect("it appended");
            let now = fs::read_to_string(&path).expect("read");
            // Either the swap was undone (the original and the append), or it stood and the
            // append was carried over to the new file.
            match result {
                Err(ReplaceError::Changed) => assert_eq!(now, "as linted\nappended meanwhile\n"),
                Ok(()) => assert_eq!(now, "fixed\nappended meanwhile\n"),
                Err(e) => panic!("unexpected: {e}"),
            }
            assert_eq!(folder_entries(dir.path()), ["model.py"]);
        }
    }

    #[test]
    fn a_save_over_the_file_at_the_moment_of_the_swap_is_kept() {
        let (dir, path) = setup("as linted\n");
        let e = replace_if_unchanged_with(&mut SavedOverDuringSwap(false), &path, b"as linted\n", b"fixed\n")
            .expect_err("changed");
        assert!(matches!(e, ReplaceError::Changed), "{e}");
        assert_eq!(fs::read_to_string(&path).expect("read"), "the editor's version\n");
        assert_eq!(folder_entries(dir.path()), ["model.py"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_stays_a_link_and_its_target_is_replaced() {
        let (dir, path) = setup("old\n");
        let link = dir.path().join("link.py");
        std::os::unix::fs::symlink("model.py", &link).expect("symlink");
        replace_if_unchanged(&link, b"old\n", b"new\n").expect("replaced");
        assert!(fs::symlink_metadata(&link).expect("lstat").file_type().is_symlink());
        assert_eq!(fs::read_to_string(&path).expect("read"), "new\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_linked_file_is_not_split() {
        let (dir, path) = setup("old\n");
        let other = dir.path().join("other-name.py");
        fs::hard_link(&path, &other).expect("link");
        let e = replace_if_unchanged(&path, b"old\n", b"new\n").expect_err("refused");
        assert_eq!(
            e.to_string(),
            "it has 2 hard links: a new file would split them (the other names would keep the old text)"
        );
        assert_eq!(fs::read(&path).expect("read"), b"old\n");
        assert_eq!(fs::read(&other).expect("read"), b"old\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_read_only_file_is_left_alone() {
        use std::os::unix::fs::PermissionsExt as _;
        let (dir, path) = setup("old\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).expect("chmod");
        let e = replace_if_unchanged(&path, b"old\n", b"new\n").expect_err("read-only");
        assert!(matches!(e, ReplaceError::ReadOnly));
        assert_eq!(fs::read_to_string(&path).expect("read"), "old\n");
        assert_eq!(folder_entries(dir.path()), ["model.py"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_another_program_keeps_open_is_left_alone() {
        let (_dir, path) = setup("old\n");
        // Another process holds it open for writing for longer than the wait.
        let mut holder = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3>>'{}'; sleep 3", path.display()))
            .spawn()
            .expect("sh runs");
        std::thread::sleep(Duration::from_millis(300));
        let e = replace_if_unchanged(&path, b"old\n", b"new\n");
        let _ = holder.kill();
        let _ = holder.wait();
        assert!(matches!(e, Err(ReplaceError::Busy)), "{e:?}");
        assert_eq!(fs::read_to_string(&path).expect("read"), "old\n");
    }

    #[test]
    fn write_atomically_leaves_the_old_file_whole_when_the_write_fails() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("model.safetensors");
        fs::write(&path, b"the old checkpoint").expect("write");
        let result = write_atomically(&path, |out| {
            out.write_all(&[7u8; 100_000])?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert_eq!(result.expect_err("fails").raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(fs::read(&path).expect("read"), b"the old checkpoint");
        assert_eq!(folder_entries(dir.path()), ["model.safetensors"]);
    }

    #[cfg(unix)]
    #[test]
    fn write_atomically_follows_a_relative_link_into_its_own_folder() {
        let dir = tempfile::tempdir().expect("a temp dir");
        fs::create_dir(dir.path().join("store")).expect("mkdir");
        let target = dir.path().join("store").join("real.bin");
        fs::write(&target, b"old").expect("write");
        let link = dir.path().join("latest.bin");
        std::os::unix::fs::symlink("store/real.bin", &link).expect("symlink");
        let written = write_atomically(&link, |out| out.write_all(b"new")).expect("written");
        assert_eq!(written, target);
        assert!(fs::symlink_metadata(&link).expect("lstat").file_type().is_symlink());
        assert_eq!(fs::read(&target).expect("read"), b"new");
        assert_eq!(folder_entries(&dir.path().join("store")), ["real.bin"]);
        assert_eq!(folder_entries(dir.path()), ["latest.bin", "store"]);
    }

    #[cfg(unix)]
    #[test]
    fn write_atomically_keeps_permissions_and_refuses_a_link_loop() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("shared.bin");
        fs::write(&path, b"old").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).expect("chmod");
        write_atomically(&path, |out| out.write_all(b"new")).expect("written");
        assert_eq!(fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o640);
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).expect("symlink");
        std::os::unix::fs::symlink("a", dir.path().join("b")).expect("symlink");
        assert!(write_atomically(&a, |out| out.write_all(b"x")).is_err());
    }
}
