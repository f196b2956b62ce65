//! A user's files, handled so that nothing of theirs is ever lost and no file can hang or
//! exhaust a run: devcheck reads configuration, checkpoints and source through [`read`], and
//! writes checkpoints and `--fix` results through [`replace`].

mod read;
mod replace;

pub use read::{ReadError, open_regular, read_limited};
pub use replace::{
    Disk, FileSystem, ReplaceError, Swapped, replace_if_unchanged, replace_if_unchanged_with, swap,
    write_atomically,
};
