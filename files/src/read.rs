//! Reading a file a user named, or one found in their tree, without letting it hang the run or
//! take all its memory: special files (a FIFO waits for a writer forever, `/dev/zero` never
//! ends, a socket cannot be read) are refused before anything is read, and no more than a limit
//! is ever read.

use std::fs::File;
use std::io::{self, Read as _};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("it is not a regular file (a FIFO, a device or a socket)")]
    NotAFile,
    #[error("it is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Opens `path` for reading if it is a regular file (through symbolic links). The open itself
/// never waits: a FIFO is opened without blocking and then refused.
pub fn open_regular(path: &Path) -> Result<File, ReadError> {
    let file = open_nonblocking(path)?;
    if !file.metadata()?.is_file() {
        return Err(ReadError::NotAFile);
    }
    Ok(file)
}

/// The whole of a regular file, if it is at most `limit` bytes (checked as it is read, so a file
/// that grows meanwhile is refused too, never read past the limit).
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path)?;
    let len = file.metadata()?.len();
    if len > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).map_or(true, |n| n > limit) {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // O_NONBLOCK only changes how a FIFO or a device opens; for a regular file it means nothing.
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn special_files_are_refused_without_waiting() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let fifo = dir.path().join("devcheck.toml");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("no NUL");
        // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(matches!(read_limited(&fifo, 1 << 20), Err(ReadError::NotAFile)));
        assert!(matches!(open_regular(&fifo), Err(ReadError::NotAFile)));
        assert!(matches!(read_limited(Path::new("/dev/zero"), 1 << 20), Err(ReadError::NotAFile)));
    }

    #[test]
    fn a_file_is_read_whole_up_to_the_limit_and_refused_past_it() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("m.py");
        let text = "import torch\n".repeat(1000);
        std::fs::write(&path, &text).expect("written");
        let n = text.len() as u64;
        assert_eq!(read_limited(&path, n).expect("read"), text.as_bytes());
        assert_eq!(read_limited(&path, n + 1).expect("read"), text.as_bytes());
        assert!(matches!(read_limited(&path, n - 1), Err(ReadError::TooLarge { .. })));
    }

    /// Files whose length the system does not know (procfs says 0) are read to their end all the
    /// same, and still no further than the limit.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_of_unknown_length_is_read_by_growing() {
        let path = Path::new("/proc/self/status");
        let bytes = read_limited(path, 1 << 20).expect("read");
        assert!(bytes.starts_with(b"Name:"), "{}", String::from_utf8_lossy(&bytes));
        assert!(matches!(read_limited(path, 16), Err(ReadError::TooLarge { .. })));
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_one_within_is_read() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'x'; 100]).expect("write");
        assert!(matches!(read_limited(&path, 99), Err(ReadError::TooLarge { limit: 99 })));
        assert_eq!(read_limited(&path, 100).expect("read").len(), 100);
    }
}
