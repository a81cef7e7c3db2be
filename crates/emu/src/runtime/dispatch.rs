//! One dispatch: its buffers armed, its threadgroups handed out to the workers in
//! assignment order, each threadgroup's fibers set up and run, the first error in that order
//! returned.

use std::ffi::c_void;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::time::Instant;

use crate::buffer::POISON;
use crate::sanitize::AsanFns;
use crate::{Binding, DeviceBuffer, DispatchStats, EmuError, Language, Placement, RunOrder, Waiter, sanitize};

use super::faults::{fault_error, register_asan_callback, waiter_of};
use super::args::{Buf, DispatchArgs};
use super::object::{ThreadFn, ThreadInfo};
use super::pool;
use super::sched::{CURRENT, Fiber, MAX_THREADS, NO_STACK, Pending, SIMD, Sched, SgCount, State, run_fibers};
use super::signals::{ensure_altstack, install_handlers};
use super::switch::{STACKS, STACK_COLORS, Stack};
use super::watchdog::{self, Watch};
use super::racecheck::{self, Found};
use super::tg_memory::{self, ARENA, Arena, TG_LIMIT};
use super::warp;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn order_into(out: &mut Vec<u32>, n: usize, order: RunOrder, salt: u64) {
    out.clear();
    out.extend(0..n as u32);
    match order {
        RunOrder::Forward => {}
        RunOrder::Reverse => out.reverse(),
        RunOrder::Shuffle(seed) => {
            let mut st = seed ^ salt.wrapping_mul(0xD605_BBB5_8C8A_BBD5);
            for i in (1..n).rev() {
                let j = (splitmix(&mut st) % (i as u64 + 1)) as usize;
                out.swap(i, j);
            }
        }
    }
}

struct Armed<'a, 'b> {
    buffers: &'a mut [Buf<'b>],
    sanitize: bool,
}

impl Drop for Armed<'_, '_> {
    fn drop(&mut self) {
        for b in self.buffers.iter_mut() {
            match b {
                Buf::Mut(b) | Buf::ReadOnly(b) => b.disarm(),
                Buf::Shared(b) => b.disarm_shared(self.sanitize),
            }
        }
    }
}

struct CurrentGuard(*mut Sched);
impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// The process-wide default set by [`set_default_workers`] (0: none).
static DEFAULT_WORKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(crate) fn set_default_workers(n: usize) {
    DEFAULT_WORKERS.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// How many workers a dispatch uses when asked for 0 (automatic): the process-wide default
/// if one was set, else `KERNELGEN_EMU_WORKERS` if set to a positive number, else every core
/// this process may run on.
pub(crate) fn default_workers() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let set = DEFAULT_WORKERS.load(std::sync::atomic::Ordering::Relaxed);
    if set > 0 {
        return set;
    }
    *N.get_or_init(|| {
        std::env::var("KERNELGEN_EMU_WORKERS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// What the workers of one dispatch share: the threadgroups in assignment order, the next
/// one to hand out, and the first error in that order.
struct Shared<'m> {
    meta: &'m Meta,
    watch: &'m Watch,
    /// Threadgroups stopped at the time limit, and those that finished.
    stopped: std::sync::Mutex<Vec<[u32; 3]>>,
    finished: std::sync::atomic::AtomicU64,
    tg_order: Vec<u32>,
    next: std::sync::atomic::AtomicUsize,
    stop: std::sync::atomic::AtomicBool,
    /// (position in `tg_order`, failure): the failure of the earliest threadgroup.
    error: std::sync::Mutex<Option<(usize, Failure)>>,
    switches: std::sync::atomic::AtomicU64,
    /// The most threadgroup memory one threadgroup allocated, and its arrays.
    threadgroup_memory: std::sync::atomic::AtomicUsize,
    threadgroup_arrays: std::sync::Mutex<(usize, Vec<crate::ThreadgroupArray>)>,
    workers: usize,
}

/// Why one run of a dispatch failed.
struct Failure {
    error: EmuError,
    /// The error is a write found in a buffer's head (before its data, on its first page),
    /// which a start-placed run reports as a fault, with the thread and the line.
    head_write: bool,
}

impl Shared<'_> {
    fn fail(&self, pos: usize, error: EmuError) {
        self.record(pos, Failure { error, head_write: false });
    }

    fn record(&self, pos: usize, f: Failure) {
        let mut g = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|(p, _)| pos < *p) {
            *g = Some((pos, f));
        }
        self.stop.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// What every run of a dispatch shares: the threadgroup size (clamped to the grid), the
/// threadgroup count per dimension and in all, the sanitizer, the time limit's watch.
struct Shape<'w> {
    tg: [u32; 3],
    tgs: [u32; 3],
    n_tg: u64,
    asan: Option<&'static AsanFns>,
    watch: &'w Watch,
}

pub(crate) fn dispatch(mut a: DispatchArgs<'_, '_>) -> Result<DispatchStats, EmuError> {
    let start = Instant::now();
    let grid = a.grid;
    if grid.contains(&0) {
        return Ok(DispatchStats { elapsed: start.elapsed(), workers: 1, ..Default::default() });
    }
    // Both clamp the threadgroup to the grid (Metal's dispatchThreads; MLX 0.32's cuda_kernel,
    // `dim3 block(min(tx, gx), ...)`) and launch ceil(grid / threadgroup) of them per axis;
    // Metal cuts the edge threadgroups short, CUDA launches whole blocks.
    let tg = [a.threadgroup[0].min(grid[0]), a.threadgroup[1].min(grid[1]), a.threadgroup[2].min(grid[2])];
    let tgs = [grid[0].div_ceil(tg[0]), grid[1].div_ceil(tg[1]), grid[2].div_ceil(tg[2])];
    // threadgroups are numbered in u32 (their run order is a list of them)
    let n_tg = tgs.iter().map(|&t| u128::from(t)).product::<u128>();
    if n_tg > u128::from(u32::MAX) {
        return Err(EmuError::Launch {
            kernel: a.kernel.name.clone(),
            message: format!(
                "grid {grid:?} in threadgroups of {tg:?} is {n_tg} threadgroups; the emulator runs at most {} in one dispatch",
                u32::MAX
            ),
        });
    }
    let n_tg = n_tg as u64;
    let asan = if a.sanitize { sanitize::fns() } else { None };
    if a.sanitize && asan.is_none() {
        return Err(EmuError::Sanitizer { message: "the AddressSanitizer runtime is not loaded in this process".into() });
    }
    if let Some(f) = asan {
        register_asan_callback(f);
    }
    install_handlers();
    // the limit counts from here: both runs of Placement::Both, and every copy, are in it
    let watch = watchdog::watch(start.checked_add(a.time_limit))?;
    let shape = Shape { tg, tgs, n_tg, asan, watch: &watch };

    let buffers = std::mem::take(&mut a.buffers);
    // under sanitize heads and slack are ASan-poisoned: one run sees both sides
    let placement = if a.sanitize { Placement::End } else { a.placement };
    let has_head = |b: &Buf<'_>| b.get().head_len() > 0;
    let result = match placement {
        Placement::Both if buffers.iter().any(has_head) => {
            // what the end-placed run may change is copied before it, start-placed
            let mut copies = start_placed_copies(buffers, |b| matches!(b, Buf::Mut(_)) || has_head(b), a.workers)?;
            match run(&a, &shape, buffers) {
                Err(f) if !f.head_write => Err(f),
                first => match run_start_placed(&a, &shape, buffers, &mut copies) {
                    // the fault of the write the first run found in a head, or any other
                    Err(f) => Err(f),
                    Ok(_) => first,
                },
            }
        }
        Placement::Start => {
            let mut copies = start_placed_copies(buffers, |b| matches!(b, Buf::Shared(_)) && has_head(b), a.workers)?;
            run_start_placed(&a, &shape, buffers, &mut copies)
        }
        _ => run(&a, &shape, buffers),
    };
    result.map(|stats| DispatchStats { elapsed: start.elapsed(), ..stats }).map_err(|f| f.error)
}

/// Start-placed copies of the buffers `copied` selects (others are moved in place by
/// [`run_start_placed`]); a buffer bound in place and shared is never moved.
fn start_placed_copies(buffers: &[Buf<'_>], copied: impl Fn(&Buf<'_>) -> bool, threads: usize) -> Result<Vec<Option<DeviceBuffer>>, EmuError> {
    buffers.iter().map(|b| if copied(b) { b.get().try_start_placed_copy(threads).map(Some) } else { Ok(None) }).collect()
}

/// One run with every buffer's data flush with the guard before it: each buffer replaced by
/// its copy in `copies`, or moved there and back (a copy of a shared buffer is bound
/// read-only, as the buffer is).
fn run_start_placed(a: &DispatchArgs<'_, '_>, shape: &Shape<'_>, buffers: &mut [Buf<'_>], copies: &mut [Option<DeviceBuffer>]) -> Result<DispatchStats, Failure> {
    let place = |buffers: &mut [Buf<'_>], copies: &[Option<DeviceBuffer>], at_start: bool| {
        for (b, copy) in buffers.iter_mut().zip(copies) {
            if let (Buf::Mut(d) | Buf::ReadOnly(d), None) = (b, copy) {
                d.move_data(at_start);
            }
        }
    };
    place(buffers, copies, true);
    let mut placed: Vec<Buf<'_>> = buffers
        .iter_mut()
        .zip(copies.iter_mut())
        .map(|(b, copy)| match (b, copy) {
            (Buf::Mut(_), Some(c)) => Buf::Mut(c),
            (_, Some(c)) => Buf::ReadOnly(c),
            (Buf::Mut(d), None) => Buf::Mut(d),
            (Buf::ReadOnly(d), None) => Buf::ReadOnly(d),
            (Buf::Shared(d), None) => Buf::Shared(d),
        })
        .collect();
    let result = run_placed(a, shape, &mut placed, true);
    drop(placed);
    place(buffers, copies, false);
    result
}

/// One run of the dispatch on `buffers` as they are placed, threadgroup arrays end-placed.
fn run(a: &DispatchArgs<'_, '_>, shape: &Shape<'_>, buffers: &mut [Buf<'_>]) -> Result<DispatchStats, Failure> {
    run_placed(a, shape, buffers, false)
}

/// One run of the dispatch on `buffers` as they are placed; threadgroup arrays flush with the
/// guard before them when `tg_at_start` (with buffers start-placed), else after.
fn run_placed(a: &DispatchArgs<'_, '_>, shape: &Shape<'_>, buffers: &mut [Buf<'_>], tg_at_start: bool) -> Result<DispatchStats, Failure> {
    let Shape { tg, tgs, n_tg, asan, watch } = *shape;
    let grid = a.grid;
    let buf_ptrs: Vec<*mut u8> = buffers.iter().map(|b| b.get().data_ptr()).collect();
    let mut meta = a_meta(a, buffers);
    meta.tg = tg;
    meta.tgs = tgs;
    meta.grid = grid;
    meta.thread_fn = a.object.entries[a.entry];
    meta.bufs = buf_ptrs;
    meta.asan = asan;
    meta.stack_size = if a.sanitize { 1024 * 1024 } else { 256 * 1024 };
    meta.order = a.order;
    meta.tg_poison = a.threadgroup_poison;
    meta.tg_at_start = tg_at_start;
    meta.check = a.memory_check;
    meta.whole_blocks = a.language == Language::Cuda;
    meta.tg_limit = match a.language {
        Language::Metal => (TG_LIMIT, "Apple's 32 KiB"),
        Language::Cuda => warp::shared_limit(a.shared_memory),
    };
    meta.dynamic_shared = a.shared_memory as usize;
    meta.tg_params = a.threadgroup_memory.clone();
    for b in buffers.iter_mut() {
        match b {
            Buf::Mut(b) => b.arm(a.sanitize, a.guard_pages),
            Buf::ReadOnly(b) => {
                b.arm(a.sanitize, a.guard_pages);
                b.protect_read_only();
            }
            Buf::Shared(b) => b.arm_shared(a.sanitize),
        }
    }
    let armed = Armed { buffers, sanitize: a.sanitize };

    let mut tg_order = Vec::new();
    order_into(&mut tg_order, n_tg as usize, a.order, 0x5EED);
    if a.memory_check.is_some() {
        // the check's run is of the threadgroups it sees
        tg_order.retain(|&lin| racecheck::checks(lin as u64, tgs));
    }
    let n_tg = tg_order.len() as u64;
    let workers = a.workers.max(1).min(n_tg.min(usize::MAX as u64) as usize);
    let shared = Shared {
        workers,
        meta: &meta,
        watch,
        stopped: std::sync::Mutex::new(Vec::new()),
        finished: std::sync::atomic::AtomicU64::new(0),
        tg_order,
        next: std::sync::atomic::AtomicUsize::new(0),
        stop: std::sync::atomic::AtomicBool::new(false),
        error: std::sync::Mutex::new(None),
        switches: std::sync::atomic::AtomicU64::new(0),
        threadgroup_memory: std::sync::atomic::AtomicUsize::new(0),
        threadgroup_arrays: std::sync::Mutex::new((0, Vec::new())),
    };
    let used = pool::run(workers, &|| work(&shared));
    // the grid's threads; CUDA's whole blocks run past its edge (the dispatch's, as the grid's
    // size, whether or not the check ran them all)
    let threads = if a.language == Language::Cuda {
        shape.n_tg * tg.iter().map(|&t| t as u64).product::<u64>()
    } else {
        grid.iter().map(|&g| g as u64).product()
    };
    let switches = shared.switches.load(std::sync::atomic::Ordering::Relaxed);
    let error = shared.error.into_inner().unwrap_or_else(|p| p.into_inner());
    drop(armed);
    if watch.expired() {
        // the dispatch did not finish: whatever else went wrong, that is the report
        let mut threadgroups = shared.stopped.into_inner().unwrap_or_else(|p| p.into_inner());
        threadgroups.sort();
        let error = EmuError::Timeout {
            kernel: a.kernel.name.clone(),
            limit: a.time_limit,
            threadgroups,
            finished: shared.finished.into_inner(),
            total: n_tg,
        };
        return Err(Failure { error, head_write: false });
    }
    if let Some((_, f)) = error {
        return Err(f);
    }
    let threadgroup_arrays = shared.threadgroup_arrays.into_inner().unwrap_or_else(|p| p.into_inner()).1;
    Ok(DispatchStats { threads, threadgroups: n_tg, switches, workers: used, threadgroup_arrays, elapsed: Default::default() })
}

/// One worker: its own scheduler, fiber stacks, threadgroup memory and signal stack; takes
/// threadgroups in assignment order until they run out or one fails.
fn work(shared: &Shared<'_>) {
    use std::sync::atomic::Ordering;
    // the watchdog may interrupt this thread from here on, and not after it returns
    let _watched = shared.watch.enter();
    // memory this worker cannot have fails the dispatch (ahead of every threadgroup's error)
    if let Err(e) = ensure_altstack() {
        return shared.fail(0, e);
    }
    let m = shared.meta;
    let tg_threads = (m.tg[0] * m.tg[1] * m.tg[2]) as usize;
    ARENA.with(|ar| {
        let mut ar = ar.borrow_mut();
        let arena = match &*ar {
            Some(a) => a.ptr,
            None => match Arena::new() {
                Ok(a) => ar.insert(a).ptr,
                Err(e) => return shared.fail(0, e),
            },
        };
        let mut sched = Box::new(Sched {
            sched_sp: null_mut(),
            fibers: Vec::with_capacity(MAX_THREADS),
            infos: Vec::with_capacity(MAX_THREADS),
            cur: 0,
            in_fiber: false,
            order: std::ptr::null(),
            order_len: 0,
            round_pos: 0,
            ready: 0,
            live: 0,
            tg_blocked: 0,
            sgs: Vec::with_capacity(MAX_THREADS / SIMD),
            pending: None,
            stop: false,
            stacks: std::ptr::null(),
            free_stacks: Vec::with_capacity(MAX_THREADS),
            thread_fn: m.thread_fn,
            bufs: m.bufs.as_ptr(),
            fault: None,
            report: None,
            asan_headline: [0; 200],
            abort: None,
            asan: m.asan,
            os_stack_bottom: std::ptr::null(),
            os_stack_size: 0,
            sched_fake: null_mut(),
            fakes: Vec::new(),
            switches: 0,
            arena,
            tg_at_start: m.tg_at_start,
            tg_data: 0,
            sites: Vec::new(),
            site_list: Vec::new(),
            stack_ranges: Vec::new(),
            tg_poison: m.tg_poison,
            expired: shared.watch.expired_flag(),
            code: m.code.clone(),
            timed_out: false,
            check: m.check,
            shadow: Default::default(),
            found: None,
            tg_barrier_flags: 0,
            warp_waits: 0,
            tg_limit: m.tg_limit,
            dynamic_shared: m.dynamic_shared,
            tg_params: m.tg_params.clone(),
        });
        let s: *mut Sched = &mut *sched;
        if m.asan.is_some() {
            // the OS thread's stack, for ASan's fiber-switch annotations
            unsafe {
                let mut attr: libc::pthread_attr_t = std::mem::zeroed();
                if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) == 0 {
                    let mut addr: *mut c_void = null_mut();
                    let mut size: usize = 0;
                    libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
                    libc::pthread_attr_destroy(&mut attr);
                    (*s).os_stack_bottom = addr;
                    (*s).os_stack_size = size;
                }
            }
        }
        let prev = CURRENT.with(|c| c.replace(s));
        let _cur_guard = CurrentGuard(prev);
        STACKS.with(|st| {
            let mut st = st.borrow_mut();
            if st.0 != m.stack_size {
                st.1.clear();
                st.0 = m.stack_size;
            }
            while st.1.len() < tg_threads {
                match Stack::new(m.stack_size + STACK_COLORS) {
                    Ok(stack) => st.1.push(stack),
                    Err(e) => return shared.fail(0, e),
                }
            }
            let stacks = &st.1;
            unsafe { (*s).stack_ranges = stacks.iter().map(|k| (k.lo() as usize, k.size())).collect() };
            let ctx = Ctx { a: m, tg: m.tg, tgs: m.tgs, grid: m.grid };
            let mut fiber_order = Vec::new();
            while !shared.stop.load(Ordering::Acquire) && !shared.watch.expired() {
                let pos = shared.next.fetch_add(1, Ordering::Relaxed);
                if pos >= shared.tg_order.len() {
                    break;
                }
                let lin = shared.tg_order[pos] as u64;
                let tgs = m.tgs;
                let tgid = [
                    (lin % tgs[0] as u64) as u32,
                    ((lin / tgs[0] as u64) % tgs[1] as u64) as u32,
                    (lin / (tgs[0] as u64 * tgs[1] as u64)) as u32,
                ];
                match unsafe { run_threadgroup(s, &ctx, tgid, stacks, &mut fiber_order, m.order, lin) } {
                    Ok(()) => {}
                    Err(Stop::Error(e)) => {
                        shared.fail(pos, e);
                        break;
                    }
                    Err(Stop::TimedOut) => {
                        shared.stopped.lock().unwrap_or_else(|p| p.into_inner()).push(tgid);
                        break;
                    }
                }
                // memory the kernel must not have written
                for (i, &b) in m.buffers.iter().enumerate() {
                    if let Some((off, what)) = unsafe { (*b).find_overwrite() } {
                        let others = if shared.workers > 1 {
                            "; found after this threadgroup ran, but with several workers a threadgroup running at the same time may have written it (one worker names the writer)"
                        } else {
                            ""
                        };
                        let error = EmuError::Corruption {
                            kernel: m.kernel.clone(),
                            what: format!("byte {off} of buffer({i}){} was written: it lies in {what}{others}", m.buffer_name(i)),
                            metal_line: None,
                            threadgroup_position_in_grid: tgid,
                        };
                        // only a head lies before the data
                        shared.record(pos, Failure { error, head_write: off < 0 });
                        break;
                    }
                }
                shared.finished.fetch_add(1, Ordering::Relaxed);
                let tg_data = unsafe { (*s).tg_data };
                if tg_data > shared.threadgroup_memory.fetch_max(tg_data, Ordering::Relaxed) {
                    let mut most = shared.threadgroup_arrays.lock().unwrap_or_else(|p| p.into_inner());
                    if tg_data > most.0 {
                        let sites = unsafe { &(*s).site_list };
                        *most = (tg_data, sites.iter().map(|t| crate::ThreadgroupArray { name: t.name.clone(), bytes: t.size, line: t.line }).collect());
                    }
                }
            }
            if m.asan.is_some() {
                // stacks abandoned by a fault may keep stale ASan poison
                for stk in stacks.iter() {
                    sanitize::asan_unpoison(stk.lo() as usize, stk.size());
                }
            }
        });
        shared.switches.fetch_add(sched.switches, Ordering::Relaxed);
    });
}

/// What the workers need to know about the dispatch.
pub(super) struct Meta {
    pub(super) kernel: String,
    pub(super) file_name: String,
    pub(super) so_path: PathBuf,
    /// The kernel object's code (see `Sched::code`).
    pub(super) code: std::ops::Range<usize>,
    buffer_names: Vec<String>,
    pub(super) buffers: Vec<*const DeviceBuffer>,
    tg: [u32; 3],
    tgs: [u32; 3],
    grid: [u32; 3],
    pub(super) thread_fn: ThreadFn,
    pub(super) bufs: Vec<*mut u8>,
    pub(super) asan: Option<&'static AsanFns>,
    stack_size: usize,
    pub(super) order: RunOrder,
    pub(super) tg_poison: u8,
    tg_at_start: bool,
    check: Option<crate::MemoryCheck>,
    /// Every threadgroup has the dispatch's size (CUDA's blocks), none cut at the grid's edge.
    whole_blocks: bool,
    tg_limit: (usize, &'static str),
    dynamic_shared: usize,
    tg_params: Vec<usize>,
}

// The raw pointers are to the dispatch's buffers, which outlive every worker; workers only
// read through them (the kernel writes the buffers' data).
unsafe impl Sync for Meta {}
unsafe impl Send for Meta {}

impl Meta {
    pub(super) fn buffer_name(&self, i: usize) -> String {
        self.buffer_names.get(i).filter(|n| !n.is_empty()).map(|n| format!(" `{n}`")).unwrap_or_default()
    }
}

unsafe extern "C" fn no_thread(_: *const *mut u8, _: *const ThreadInfo) {}

fn a_meta(a: &DispatchArgs<'_, '_>, buffers: &[Buf<'_>]) -> Meta {
    let n = buffers.len();
    let mut names = vec![String::new(); n];
    for p in &a.kernel.params {
        if let Binding::Buffer(i) = p.binding {
            if (i as usize) < n {
                names[i as usize] = p.name.clone();
            }
        }
    }
    Meta {
        kernel: a.kernel.name.clone(),
        file_name: a.file_name.to_string(),
        so_path: a.object.path.clone(),
        code: a.object.code.clone(),
        buffer_names: names,
        buffers: buffers.iter().map(|b| b.get() as *const DeviceBuffer).collect(),
        tg: [0; 3],
        tgs: [0; 3],
        grid: [0; 3],
        thread_fn: no_thread,
        bufs: Vec::new(),
        asan: None,
        stack_size: 0,
        order: RunOrder::Forward,
        tg_poison: POISON,
        tg_at_start: false,
        check: a.memory_check,
        whole_blocks: false,
        tg_limit: (TG_LIMIT, "Apple's 32 KiB"),
        dynamic_shared: 0,
        tg_params: Vec::new(),
    }
}

/// Why a threadgroup did not finish.
enum Stop {
    Error(EmuError),
    /// Stopped at the dispatch's time limit.
    TimedOut,
}

pub(super) struct Ctx<'m> {
    pub(super) a: &'m Meta,
    tg: [u32; 3],
    tgs: [u32; 3],
    grid: [u32; 3],
}

unsafe fn run_threadgroup(
    s: *mut Sched,
    ctx: &Ctx<'_>,
    tgid: [u32; 3],
    stacks: &[Stack],
    order: &mut Vec<u32>,
    run_order: RunOrder,
    lin: u64,
) -> Result<(), Stop> {
    unsafe {
        let tg = ctx.tg;
        let actual = if ctx.a.whole_blocks {
            tg
        } else {
            [tg[0].min(ctx.grid[0] - tgid[0] * tg[0]), tg[1].min(ctx.grid[1] - tgid[1] * tg[1]), tg[2].min(ctx.grid[2] - tgid[2] * tg[2])]
        };
        let n = (actual[0] * actual[1] * actual[2]) as usize;
        let n_sg = n.div_ceil(SIMD);
        let disp_n = (tg[0] * tg[1] * tg[2]) as usize;
        let mut base = ThreadInfo {
            threadgroup_position_in_grid: [tgid[0], tgid[1], tgid[2], 0],
            threads_per_threadgroup: [actual[0], actual[1], actual[2], 0],
            threads_per_grid: [ctx.grid[0], ctx.grid[1], ctx.grid[2], 0],
            threadgroups_per_grid: [ctx.tgs[0], ctx.tgs[1], ctx.tgs[2], 0],
            dispatch_threads_per_threadgroup: [tg[0], tg[1], tg[2], 0],
            threads_per_simdgroup: SIMD as u32,
            simdgroups_per_threadgroup: n_sg as u32,
            dispatch_simdgroups_per_threadgroup: disp_n.div_ceil(SIMD) as u32,
            thread_execution_width: SIMD as u32,
            quadgroups_per_threadgroup: n.div_ceil(4) as u32,
            dispatch_quadgroups_per_threadgroup: disp_n.div_ceil(4) as u32,
            ..Default::default()
        };
        let fibers = &mut (*s).fibers;
        fibers.clear();
        (*s).infos.clear();
        if (*s).asan.is_some() {
            (*s).fakes.clear();
            (*s).fakes.resize(n, null_mut());
        }
        let origin = [tgid[0] * tg[0], tgid[1] * tg[1], tgid[2] * tg[2]];
        let mut local = [0u32; 3];
        for t in 0..n {
            base.thread_position_in_threadgroup = [local[0], local[1], local[2], 0];
            base.thread_position_in_grid = [origin[0] + local[0], origin[1] + local[1], origin[2] + local[2], 0];
            base.thread_index_in_threadgroup = t as u32;
            base.thread_index_in_simdgroup = (t % SIMD) as u32;
            base.simdgroup_index_in_threadgroup = (t / SIMD) as u32;
            base.thread_index_in_quadgroup = (t % 4) as u32;
            base.quadgroup_index_in_threadgroup = (t / 4) as u32;
            (*s).infos.push(base);
            fibers.push(Fiber {
                sp: null_mut(),
                state: State::Ready,
                lane: null_mut(),
                coll: None,
                op: 0,
                line: 0,
                stack: NO_STACK,
            });
            local[0] += 1;
            if local[0] == actual[0] {
                local[0] = 0;
                local[1] += 1;
                if local[1] == actual[1] {
                    local[1] = 0;
                    local[2] += 1;
                }
            }
        }
        (*s).sgs.clear();
        for g in 0..n_sg {
            (*s).sgs.push(SgCount { live: (n - g * SIMD).min(SIMD) as u32, blocked: 0, barrier_flags: 0 });
        }
        (*s).ready = n;
        (*s).live = n;
        (*s).tg_blocked = 0;
        (*s).pending = None;
        (*s).stop = false;
        (*s).stacks = stacks.as_ptr();
        (*s).free_stacks.clear();
        (*s).free_stacks.extend((0..n.min(stacks.len()) as u32).rev());
        // threadgroup memory: fresh for each threadgroup
        (*s).tg_data = 0;
        (*s).sites.iter_mut().for_each(|x| *x = None);
        (*s).site_list.clear();
        (*s).found = None;
        (*s).check = ctx.a.check;
        if (*s).check.is_some() {
            racecheck::threadgroup_started(s, n_sg);
        }

        order_into(order, n, run_order, lin.wrapping_add(1));
        (*s).order = order.as_ptr();
        (*s).order_len = order.len();
        (*s).round_pos = 0;
        // the fibers hand over to each other; control comes back when none is ready
        (*s).timed_out = false;
        run_fibers(s);
        let result = threadgroup_result(s, ctx, tgid);
        tg_memory::release_sites(s);
        result
    }
}

/// How the threadgroup that just ran on `s` ended.
unsafe fn threadgroup_result(s: *mut Sched, ctx: &Ctx<'_>, tgid: [u32; 3]) -> Result<(), Stop> {
    unsafe {
        if (*s).timed_out {
            return Err(Stop::TimedOut);
        }
        if let Some(found) = (*s).found {
            return Err(Stop::Error(found_error(s, ctx, tgid, found)));
        }
        if (*s).fault.is_some() || (*s).report.is_some() || (*s).abort.is_some() {
            return Err(Stop::Error(fault_error(s, ctx, tgid)));
        }
        let file_name: &str = &ctx.a.file_name;
        let waiter = |i: usize| -> Box<Waiter> { Box::new(waiter_of(s, file_name, i)) };
        match (*s).pending {
            Some(Pending::Divergence { sg, first, second }) => {
                return Err(Stop::Error(EmuError::Divergence {
                    kernel: ctx.a.kernel.clone(),
                    threadgroup_position_in_grid: tgid,
                    simdgroup: sg,
                    first: waiter(first),
                    second: waiter(second),
                }));
            }
            Some(Pending::Barrier { first, second }) => {
                return Err(Stop::Error(EmuError::Barrier {
                    kernel: ctx.a.kernel.clone(),
                    threadgroup_position_in_grid: tgid,
                    first: waiter(first),
                    second: waiter(second),
                }));
            }
            Some(Pending::Overrun { array, offset, line }) => {
                let what = format!(
                    "a write ran outside threadgroup array `{}`: {} was overwritten; found at the threadgroup_barrier at {file_name}:{line} (the writing thread and line are not known: `kernelgen verify` finds them)",
                    (*s).site_list[array].name,
                    (*s).site_list[array].describe(offset, file_name),
                );
                let metal_line = Some((file_name.to_string(), line));
                return Err(Stop::Error(EmuError::Corruption { kernel: ctx.a.kernel.clone(), what, metal_line, threadgroup_position_in_grid: tgid }));
            }
            None => {}
        }
        debug_assert!((*s).live == 0, "fibers left without an error");
        // threadgroup arrays must not have been written outside
        if let Some((array, offset)) = tg_memory::overwritten(s) {
            let site = &(*s).site_list[array];
            let what = format!("a write ran outside threadgroup array `{}`: {} was overwritten; found after the threadgroup ran", site.name, site.describe(offset, file_name));
            let metal_line = Some((file_name.to_string(), site.line));
            return Err(Stop::Error(EmuError::Corruption { kernel: ctx.a.kernel.clone(), what, metal_line, threadgroup_position_in_grid: tgid }));
        }
        Ok(())
    }
}

/// The error of what the threadgroup-memory check found.
unsafe fn found_error(s: *mut Sched, ctx: &Ctx<'_>, tgid: [u32; 3], found: Found) -> EmuError {
    unsafe {
        let file_name = &ctx.a.file_name;
        let access = |a: &racecheck::Access| crate::TgAccess {
            thread_position_in_grid: {
                let p = (*s).infos[a.thread as usize].thread_position_in_grid;
                [p[0], p[1], p[2]]
            },
            write: a.write,
            metal_line: super::faults::metal_line(&ctx.a.so_path, ctx.a.code.start + a.pc as usize, file_name),
        };
        let array = |k: usize, byte: usize| {
            let site = &(*s).site_list[k];
            crate::TgElement { array: site.name.clone(), element: byte / site.element, byte, declared: (file_name.clone(), site.line) }
        };
        match found {
            Found::Race { array: k, byte, first, second } => EmuError::Race {
                kernel: ctx.a.kernel.clone(),
                threadgroup_position_in_grid: tgid,
                at: array(k, byte),
                same_simdgroup: first.thread as usize / super::sched::SIMD == second.thread as usize / super::sched::SIMD,
                first: access(&first),
                second: access(&second),
            },
            Found::Uninitialized { array: k, byte, read } => EmuError::UninitializedRead {
                kernel: ctx.a.kernel.clone(),
                threadgroup_position_in_grid: tgid,
                at: array(k, byte),
                read: access(&read),
            },
        }
    }
}

