//! What the tensor layer tells whoever watches a run on this thread: a tensor was created, moved
//! to another device, read on the host, computed from another, or an op's operands disagree on
//! their device. The tensor layer owns this hook and knows nothing about its observers: the
//! checker installs its recorder here while a dry run or a trace records, so the tensor core
//! never calls up into the checker. When nothing watches the thread, each report is one
//! thread-local test.
//!
//! It also keeps on whose behalf devcheck works: while a backward pass or an optimizer step runs
//! ops for one call of the user's, [`on_behalf_of`] says so, and observers attribute what those
//! ops do to that call rather than to a line inside devcheck.

use std::cell::Cell;
use std::panic::Location;

use super::Tensor;

type Loc = &'static Location<'static>;

/// Watches the tensors of one thread. Reports arrive in the order the tensor code makes them.
pub(crate) trait Observer: Sync {
    /// A constructor made `tensor` (`zeros`, `from_vec`, ...).
    fn created(&self, tensor: &Tensor);

    /// The constructor just reported reports itself under another op name (`zeros` is built on
    /// `full`).
    fn renamed(&self, tensor: &Tensor);

    /// An op computed `result`, on the device of its operand `source`.
    fn computed(&self, source: &Tensor, result: &Tensor);

    /// `source` was copied to another device as `moved`, at `call_site`.
    fn moved(&self, source: &Tensor, moved: &Tensor, call_site: Loc);

    /// A host read of `tensor` at `call_site`. True when the read should be answered with zeros
    /// (a tensor without data that a dry run lets through); false when it goes on as usual.
    fn host_read(&self, tensor: &Tensor, op: &'static str, call_site: Loc) -> bool;

    /// Operands of `op` on different devices. True when the observer lets the op go on (its
    /// result lands on the first operand's device); false when it must fail.
    fn device_mismatch(&self, op: &'static str, operands: &[(&str, &Tensor)], call_site: Loc) -> bool;
}

/// One call of the user's that devcheck's own work is done for (see [`on_behalf_of`]).
#[derive(Clone, Copy)]
pub(crate) struct UserCall {
    pub call_site: Loc,
    /// The backward pass: a device mismatch there only repeats one forward already reported (its
    /// gradients meet the tensors forward mixed), and the tensors it makes are gradients.
    pub echoes_only: bool,
}

thread_local! {
    static OBSERVER: Cell<Option<&'static dyn Observer>> = const { Cell::new(None) };
    static USER_CALL: Cell<Option<UserCall>> = const { Cell::new(None) };
}

/// Makes `observer` the one that watches this thread (`None`: nobody), returning the one before.
pub(crate) fn watch(observer: Option<&'static dyn Observer>) -> Option<&'static dyn Observer> {
    OBSERVER.with(|o| o.replace(observer))
}

#[inline]
fn observer() -> Option<&'static dyn Observer> {
    OBSERVER.with(Cell::get)
}

/// While alive, the ops run on this thread are devcheck's work for the user's call at
/// `call_site` (see [`UserCall`]).
pub(crate) struct OnBehalf {
    previous: Option<UserCall>,
}

pub(crate) fn on_behalf_of(call_site: Loc, echoes_only: bool) -> OnBehalf {
    let previous = USER_CALL.with(|c| c.replace(Some(UserCall { call_site, echoes_only })));
    OnBehalf { previous }
}

impl Drop for OnBehalf {
    fn drop(&mut self) {
        USER_CALL.with(|c| c.set(self.previous));
    }
}

/// The user's call devcheck is working for on this thread, if any.
pub(crate) fn user_call() -> Option<UserCall> {
    USER_CALL.with(Cell::get)
}

// ---- Reports, called by the tensor code ----

#[inline]
pub(crate) fn created(tensor: &Tensor) {
    if let Some(o) = observer() {
        o.created(tensor);
    }
}

#[inline]
pub(crate) fn renamed(tensor: &Tensor) {
    if let Some(o) = observer() {
        o.renamed(tensor);
    }
}

#[inline]
pub(crate) fn computed(source: &Tensor, result: &Tensor) {
    if let Some(o) = observer() {
        o.computed(source, result);
    }
}

#[inline]
pub(crate) fn moved(source: &Tensor, moved: &Tensor, call_site: Loc) {
    if let Some(o) = observer() {
        o.moved(source, moved, call_site);
    }
}

/// True when the read is to be answered with zeros (see [`Observer::host_read`]).
#[inline]
pub(crate) fn host_read(tensor: &Tensor, op: &'static str, call_site: Loc) -> bool {
    observer().is_some_and(|o| o.host_read(tensor, op, call_site))
}

/// True when the op may go on (see [`Observer::device_mismatch`]).
#[cold]
pub(crate) fn device_mismatch(op: &'static str, operands: &[(&str, &Tensor)], call_site: Loc) -> bool {
    observer().is_some_and(|o| o.device_mismatch(op, operands, call_site))
}
