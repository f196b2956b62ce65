//! What the op front end tells the checker while a dry run or a trace is recording on a thread.
//!
//! The tensor layer reports, through the hook it owns (`crate::tensor::observe`), the few places
//! where data is created, moved, read, or where operands disagree on their device; a
//! [`Recording`] installs this recorder there for its thread and takes it out when it ends. When
//! nothing records on the thread, each report is one thread-local test. Records are aggregated by call site as they arrive,
//! so a trace over a long training run stays small: its size grows with the number of distinct
//! lines, not with the number of steps.

use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::Location;
use std::sync::Weak;

use crate::device::Device;
use crate::error::Operand;
use crate::tensor::observe::{self, Observer, UserCall};
use crate::tensor::{Origin, Tensor};

use super::ledger::{Allocations, HostRead, Transfer};

type Loc = &'static Location<'static>;

thread_local! {
    static RECORDER: RefCell<Option<Box<Recorder>>> = const { RefCell::new(None) };
}

/// What a recorder is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `check_forward`: device mismatches are recorded and tolerated, and reads of fake tensors
    /// are answered with zeros, so one run finds every problem.
    DryRun { target: Device },
    /// `trace`: real runs; nothing is tolerated that would not be without the trace.
    Trace,
}

/// Tensors made by a constructor at one line, on a device other than the dry run's target.
#[derive(Clone, Debug)]
pub(crate) struct CreationSite {
    pub origin: Origin,
    pub device: Device,
    pub count: usize,
    pub tensor: Operand,
}

/// A device mismatch tolerated during a dry run.
#[derive(Clone, Debug)]
pub(crate) struct MismatchSite {
    pub op: &'static str,
    pub call_site: Loc,
    pub operands: Vec<Operand>,
    pub count: usize,
    /// The index of the earlier mismatch whose result is one of these operands: this one only
    /// repeats it further down the same computation.
    pub follows: Option<usize>,
}

/// Data moved A→B and then back B→A.
#[derive(Clone, Debug)]
pub(crate) struct RoundTrip {
    /// Where it went A→B.
    pub out_site: Loc,
    /// Where it came back B→A.
    pub back_site: Loc,
    pub home: Device,
    pub away: Device,
    pub count: usize,
    pub bytes: usize,
    pub tensor: Operand,
}

/// The same data moved to the same device more than once.
#[derive(Clone, Debug)]
pub(crate) struct RepeatedMove {
    pub call_site: Loc,
    pub to: Device,
    /// How many times the data was moved (the first one included).
    pub count: usize,
    pub bytes: usize,
    pub tensor: Operand,
}

/// Everything recorded by one dry run or trace.
pub(crate) struct Recorder {
    pub mode: Mode,
    pub allocations: BTreeMap<Device, Allocations>,
    pub transfers: Vec<Transfer>,
    pub reads: Vec<HostRead>,
    pub creations: Vec<CreationSite>,
    pub mismatches: Vec<MismatchSite>,
    pub round_trips: Vec<RoundTrip>,
    pub repeated: Vec<RepeatedMove>,
    /// Dry run: the storages of the model's tensors and inputs with their names and roles, to
    /// name other handles on their data.
    pub storage_names: HashMap<usize, (String, Option<crate::tensor::TensorRole>)>,
    /// Dry run: the storages of the model's tensors (parameters, buffers, skipped fields).
    pub model_storages: HashSet<usize>,
    /// Dry run: results computed from a tolerated mismatch, with the index of that mismatch. Their
    /// device is wrong only because of it, so later mismatches they take part in are its echoes.
    tainted: HashMap<usize, (Weak<dyn Any + Send + Sync>, usize)>,
    /// The mismatch just tolerated, whose result is about to be allocated.
    pending_taint: Option<(Loc, usize)>,
    transfer_index: HashMap<(Loc, Device, Device), usize>,
    read_index: HashMap<(Loc, &'static str, Device), usize>,
    creation_index: HashMap<(Loc, Device), usize>,
    mismatch_index: HashMap<(Loc, &'static str), usize>,
    round_trip_index: HashMap<(Loc, Loc), usize>,
    repeated_index: HashMap<(usize, Device), usize>,
    last_creation: Option<usize>,
    /// Storages made by a move: where their data came from. Weak handles keep the addresses from
    /// being reused while recorded, without keeping any elements alive.
    moved_here: HashMap<usize, MovedData>,
    /// Storages moved away, per target device: how often, and the first call site.
    moved_away: HashMap<(usize, Device), MoveCount>,
    live_checks_due: usize,
}

struct MovedData {
    keep: Weak<dyn Any + Send + Sync>,
    from: Device,
    call_site: Loc,
}

struct MoveCount {
    keep: Weak<dyn Any + Send + Sync>,
    count: usize,
}

/// Dead storage handles are dropped once this many moves have been recorded since the last sweep.
const SWEEP_EVERY: usize = 4096;

impl Recorder {
    fn new(mode: Mode) -> Recorder {
        Recorder {
            mode,
            allocations: BTreeMap::new(),
            transfers: Vec::new(),
            reads: Vec::new(),
            creations: Vec::new(),
            mismatches: Vec::new(),
            round_trips: Vec::new(),
            repeated: Vec::new(),
            storage_names: HashMap::new(),
            model_storages: HashSet::new(),
            tainted: HashMap::new(),
            pending_taint: None,
            transfer_index: HashMap::new(),
            read_index: HashMap::new(),
            creation_index: HashMap::new(),
            mismatch_index: HashMap::new(),
            round_trip_index: HashMap::new(),
            repeated_index: HashMap::new(),
            last_creation: None,
            moved_here: HashMap::new(),
            moved_away: HashMap::new(),
            live_checks_due: SWEEP_EVERY,
        }
    }

    /// The tensor as reports show it. A tensor without a name of its own that shares storage with
    /// one of the model's tensors or inputs is reported as a view of it, with its name and role.
    fn describe(&self, tensor: &Tensor, role: &str) -> Operand {
        let mut operand = tensor.operand(role);
        if operand.name.is_none()
            && let Some((path, kind)) = self.storage_names.get(&storage_address(&tensor.storage_handle()))
        {
            operand.name = Some(path.clone());
            operand.kind = kind.clone();
            operand.view = true;
        }
        operand
    }

    /// An op result: `source` is the operand whose device it takes. A result of a tolerated
    /// mismatch, or of an op on such a result, carries the mismatch along.
    fn computed(&mut self, source: &Tensor, result: &Tensor) {
        self.allocation(result);
        self.last_creation = None;
        let root = match self.pending_taint.take() {
            Some((site, root)) if site == result.origin().location() => Some(root),
            _ if self.tainted.is_empty() => None,
            _ => self.tainted.get(&storage_address(&source.storage_handle())).map(|(_, root)| *root),
        };
        if let Some(root) = root {
            let handle = result.storage_handle();
            self.tainted.insert(storage_address(&handle), (handle, root));
        }
    }

    fn allocation(&mut self, tensor: &Tensor) {
        let totals = self.allocations.entry(tensor.device()).or_default();
        if tensor.is_fake() {
            totals.fake_tensors += 1;
            totals.fake_bytes += tensor.nbytes();
        } else {
            totals.tensors += 1;
            totals.bytes += tensor.nbytes();
        }
    }

    /// A constructor made `tensor`, reported as made at `origin`.
    fn created_at(&mut self, tensor: &Tensor, origin: Origin) {
        self.allocation(tensor);
        self.last_creation = None;
        let Mode::DryRun { target } = self.mode else { return };
        if tensor.device() == target {
            return;
        }
        let key = (origin.location(), tensor.device());
        let index = match self.creation_index.get(&key) {
            Some(&index) => {
                self.creations[index].count += 1;
                index
            }
            None => {
                let tensor = self.describe(tensor, "tensor");
                self.creations.push(CreationSite { origin, device: key.1, count: 1, tensor });
                self.creation_index.insert(key, self.creations.len() - 1);
                self.creations.len() - 1
            }
        };
        self.last_creation = Some(index);
    }

    fn renamed(&mut self, origin: Origin) {
        if let Some(index) = self.last_creation
            && let Some(site) = self.creations.get_mut(index)
            && site.origin.location() == origin.location()
        {
            site.origin = origin;
            site.tensor.origin = origin;
        }
    }

    fn moved(&mut self, source: &Tensor, moved: &Tensor, call_site: Loc) {
        self.allocation(moved);
        self.last_creation = None;
        let (from, to, bytes) = (source.device(), moved.device(), moved.nbytes());
        let source_handle = source.storage_handle();
        let source_address = storage_address(&source_handle);

        match self.transfer_index.get(&(call_site, from, to)) {
            Some(&index) => {
                let site = &mut self.transfers[index];
                site.count += 1;
                site.bytes += bytes;
            }
            None => {
                let tensor = self.describe(source, "tensor");
                let from_model = self.model_storages.contains(&source_address);
                self.transfers.push(Transfer { call_site, from, to, count: 1, bytes, tensor, from_model });
                self.transfer_index.insert((call_site, from, to), self.transfers.len() - 1);
            }
        }

        // Back where it came from: the data made a round trip.
        if let Some(earlier) = self.moved_here.get(&source_address)
            && earlier.from == to
        {
            let key = (earlier.call_site, call_site);
            match self.round_trip_index.get(&key) {
                Some(&index) => {
                    let trip = &mut self.round_trips[index];
                    trip.count += 1;
                    trip.bytes += bytes;
                }
                None => {
                    let tensor = self.describe(source, "tensor");
                    self.round_trips.push(RoundTrip {
                        out_site: earlier.call_site,
                        back_site: call_site,
                        home: to,
                        away: from,
                        count: 1,
                        bytes,
                        tensor,
                    });
                    self.round_trip_index.insert(key, self.round_trips.len() - 1);
                }
            }
        }

        // The same data sent to the same device again.
        let away = self
            .moved_away
            .entry((source_address, to))
            .or_insert_with(|| MoveCount { keep: source_handle.clone(), count: 0 });
        away.count += 1;
        if away.count >= 2 {
            let count = away.count;
            match self.repeated_index.get(&(source_address, to)) {
                Some(&index) => {
                    let repeated = &mut self.repeated[index];
                    repeated.count = count;
                    repeated.bytes += bytes;
                }
                None => {
                    let tensor = self.describe(source, "tensor");
                    // Both moves are counted: the first was needed, the second is the waste.
                    self.repeated.push(RepeatedMove { call_site, to, count, bytes: 2 * bytes, tensor });
                    self.repeated_index.insert((source_address, to), self.repeated.len() - 1);
                }
            }
        }

        let moved_handle = moved.storage_handle();
        self.moved_here
            .insert(storage_address(&moved_handle), MovedData { keep: moved_handle, from, call_site });
        self.sweep();
    }

    /// Forgets storages that no longer exist: they cannot be moved again. Their addresses may be
    /// reused from now on, which is safe once they are out of the tables.
    fn sweep(&mut self) {
        self.live_checks_due = self.live_checks_due.saturating_sub(1);
        if self.live_checks_due > 0 {
            return;
        }
        self.moved_here.retain(|_, data| data.keep.strong_count() > 0);
        self.moved_away.retain(|_, moves| moves.keep.strong_count() > 0);
        self.tainted.retain(|_, (keep, _)| keep.strong_count() > 0);
        // Entries of dead storages must not match a new storage at the same address.
        let live: std::collections::HashSet<usize> = self.moved_away.keys().map(|(a, _)| *a).collect();
        self.repeated_index.retain(|(address, _), _| live.contains(address));
        self.live_checks_due =
            SWEEP_EVERY.max(self.moved_here.len() + self.moved_away.len() + self.tainted.len());
    }

    fn read(&mut self, tensor: &Tensor, op: &'static str, call_site: Loc) {
        self.last_creation = None;
        let without_data = usize::from(tensor.is_fake());
        let key = (call_site, op, tensor.device());
        match self.read_index.get(&key) {
            Some(&index) => {
                let site = &mut self.reads[index];
                site.count += 1;
                site.bytes += tensor.nbytes();
                site.without_data += without_data;
            }
            None => {
                let described = self.describe(tensor, "tensor");
                self.reads.push(HostRead {
                    call_site,
                    op,
                    device: tensor.device(),
                    count: 1,
                    bytes: tensor.nbytes(),
                    without_data,
                    tensor: described,
                });
                self.read_index.insert(key, self.reads.len() - 1);
            }
        }
    }

    fn mismatch(&mut self, op: &'static str, operands: &[(&str, &Tensor)], call_site: Loc) {
        self.last_creation = None;
        // An operand computed from an earlier tolerated mismatch: the same problem, further down.
        let follows = operands.iter().find_map(|(_, t)| {
            self.tainted.get(&storage_address(&t.storage_handle())).map(|(_, root)| *root)
        });
        let index = match self.mismatch_index.get(&(call_site, op)) {
            Some(&index) => {
                self.mismatches[index].count += 1;
                index
            }
            None => {
                let operands: Vec<Operand> =
                    operands.iter().map(|(role, t)| self.describe(t, role)).collect();
                self.mismatches.push(MismatchSite { op, call_site, operands, count: 1, follows });
                self.mismatch_index.insert((call_site, op), self.mismatches.len() - 1);
                self.mismatches.len() - 1
            }
        };
        let root = follows.unwrap_or(self.mismatches[index].follows.unwrap_or(index));
        self.pending_taint = Some((call_site, root));
    }
}

fn storage_address(handle: &Weak<dyn Any + Send + Sync>) -> usize {
    Weak::as_ptr(handle) as *const () as usize
}

// ---------------------------------------------------------------------------------------------
// Starting and stopping

/// Records on this thread until [`Recording::finish`] (or drop). A recording started while
/// another is active suspends it; the outer one resumes afterwards.
pub(crate) struct Recording {
    outer: Option<Box<Recorder>>,
    finished: bool,
    // Recording is per thread: the guard must be dropped on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Recording {
    pub fn start(mode: Mode) -> Recording {
        let outer = RECORDER.with(|r| r.borrow_mut().replace(Box::new(Recorder::new(mode))));
        observe::watch(Some(&RECORDER_HOOKS));
        Recording { outer, finished: false, _not_send: std::marker::PhantomData }
    }

    /// Lets the recorder name views of these tensors' storages; `model`: they are the model's.
    pub fn name_storages(&self, named: impl IntoIterator<Item = (String, Tensor)>, model: bool) {
        with_recorder(|r| {
            for (path, tensor) in named {
                let address = storage_address(&tensor.storage_handle());
                if model {
                    r.model_storages.insert(address);
                }
                r.storage_names.entry(address).or_insert((path, tensor.role()));
            }
        });
    }

    /// Stops recording and returns what was recorded.
    pub fn finish(mut self) -> Box<Recorder> {
        self.finished = true;
        let recorder = RECORDER.with(|r| r.borrow_mut().take());
        self.restore_outer();
        recorder.unwrap_or_else(|| Box::new(Recorder::new(Mode::Trace)))
    }

    fn restore_outer(&mut self) {
        let outer = self.outer.take();
        observe::watch(outer.is_some().then_some(&RECORDER_HOOKS as &dyn Observer));
        RECORDER.with(|r| *r.borrow_mut() = outer);
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.finished {
            // A panic inside the recorded closure: drop this recording, resume the outer one.
            RECORDER.with(|r| r.borrow_mut().take());
            self.restore_outer();
        }
    }
}

fn with_recorder<R>(f: impl FnOnce(&mut Recorder) -> R) -> Option<R> {
    RECORDER.with(|r| {
        // A hook reached while the recorder is borrowed would be a bug in this file; skipping the
        // record is better than a panic inside a user's forward.
        let mut borrowed = r.try_borrow_mut().ok()?;
        borrowed.as_mut().map(|recorder| f(recorder))
    })
}

// ---------------------------------------------------------------------------------------------
// What the tensor layer reports (see `crate::tensor::observe`)

/// The recorder as the tensor layer's observer: installed on a thread while a [`Recording`] is
/// alive there, it adds each report to that thread's recorder.
struct RecorderHooks;

static RECORDER_HOOKS: RecorderHooks = RecorderHooks;

impl Observer for RecorderHooks {
    fn created(&self, tensor: &Tensor) {
        match observe::user_call() {
            Some(UserCall { echoes_only: true, .. }) => {
                with_recorder(|r| r.allocation(tensor));
            }
            Some(UserCall { call_site, .. }) => {
                with_recorder(|r| r.created_at(tensor, Origin::new(tensor.origin().op(), call_site)));
            }
            None => {
                with_recorder(|r| r.created_at(tensor, tensor.origin()));
            }
        }
    }

    fn renamed(&self, tensor: &Tensor) {
        with_recorder(|r| r.renamed(tensor.origin()));
    }

    fn computed(&self, source: &Tensor, result: &Tensor) {
        with_recorder(|r| r.computed(source, result));
    }

    fn moved(&self, source: &Tensor, moved: &Tensor, call_site: Loc) {
        let call_site = observe::user_call().map_or(call_site, |c| c.call_site);
        with_recorder(|r| r.moved(source, moved, call_site));
    }

    /// True when the tensor has no data and a dry run (or a trace inside a fake scope) records:
    /// the run goes on and the read is reported. Elsewhere reading a fake tensor stays an error.
    fn host_read(&self, tensor: &Tensor, op: &'static str, call_site: Loc) -> bool {
        let call_site = observe::user_call().map_or(call_site, |c| c.call_site);
        let mode = with_recorder(|r| {
            r.read(tensor, op, call_site);
            r.mode
        });
        let answer_fakes = match mode {
            Some(Mode::DryRun { .. }) => true,
            Some(Mode::Trace) => crate::fake::is_active(),
            None => false,
        };
        answer_fakes && tensor.is_fake()
    }

    /// A dry run records the mismatch and lets the op go on; a trace lets it fail.
    fn device_mismatch(&self, op: &'static str, operands: &[(&str, &Tensor)], call_site: Loc) -> bool {
        with_recorder(|r| {
            if !matches!(r.mode, Mode::DryRun { .. }) {
                return false;
            }
            match observe::user_call() {
                // Tolerated, not reported again.
                Some(UserCall { echoes_only: true, .. }) => {}
                Some(UserCall { call_site, .. }) => r.mismatch(op, operands, call_site),
                None => r.mismatch(op, operands, call_site),
            }
            true
        })
        .unwrap_or(false)
    }
}
