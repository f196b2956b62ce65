//! Where a tensor was made: the caller's file:line:column and the op that made it.

use std::fmt;
use std::panic::Location;

/// The creation site of a tensor. Two pointers: a `&'static Location` filled in by
/// `#[track_caller]`, and the op's static name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    location: &'static Location<'static>,
    op: &'static str,
}

impl Origin {
    /// The origin of a tensor made by `op` at the caller's location.
    #[track_caller]
    #[inline]
    pub fn here(op: &'static str) -> Origin {
        Origin { location: Location::caller(), op }
    }

    /// An origin at an explicit location.
    pub fn new(op: &'static str, location: &'static Location<'static>) -> Origin {
        Origin { location, op }
    }

    pub fn op(&self) -> &'static str {
        self.op
    }

    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    pub fn file(&self) -> &'static str {
        self.location.file()
    }

    pub fn line(&self) -> u32 {
        self.location.line()
    }

    pub fn column(&self) -> u32 {
        self.location.column()
    }

    /// `src/model.rs:42:17`
    pub fn location_string(&self) -> String {
        format!("{}:{}:{}", self.file(), self.line(), self.column())
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` at {}", self.op, self.location_string())
    }
}

impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
