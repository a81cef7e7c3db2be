//! The fiber runtime: every GPU thread of a threadgroup is a fiber on the calling OS
//! thread, switched by a hand-written x86-64 context switch (callee-saved registers and
//! the stack pointer; no system call). Collectives, barriers and threadgroup allocations
//! reach this module through the `Rt` table handed to each kernel object at load.
//!
//! The scheduler state is reached through a raw pointer (from the signal handler and from
//! the fibers' callbacks alike); short-lived references through it are intended.
#![allow(dangerous_implicit_autorefs)]

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::sync::Once;
use std::time::Instant;

use super::buffer::POISON;
use super::sanitize::{self, AsanFns};
use super::{Binding, DeviceBuffer, DispatchStats, EmuError, KernelSignature, RunOrder, Waiter};

const ABI_VERSION: u32 = 4;
const SIMD: usize = 32;
const MAX_THREADS: usize = 1024;
const TG_LIMIT: usize = 32 * 1024;
const TG_REDZONE: usize = 64;
const TG_ARENA: usize = 256 * 1024;
const CANARY: u8 = 0xA5;


// ------------------------------------------------------------------ context switch
std::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".globl kgemu_rt_switch",
    ".hidden kgemu_rt_switch",
    "kgemu_rt_switch:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "mov [rdi], rsp",
    "mov rsp, rsi",
    ".globl kgemu_rt_resume",
    ".hidden kgemu_rt_resume",
    "kgemu_rt_resume:",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".p2align 4",
    ".globl kgemu_rt_trampoline",
    ".hidden kgemu_rt_trampoline",
    "kgemu_rt_trampoline:",
    "mov rdi, r12",
    "call rbx",
    "ud2",
);

unsafe extern "C" {
    /// Save callee-saved registers on the current stack, store the stack pointer in
    /// `*save`, switch to `to` and restore the registers saved there.
    fn kgemu_rt_switch(save: *mut *mut u8, to: *mut u8);
    fn kgemu_rt_resume();
    fn kgemu_rt_trampoline();
}

// ------------------------------------------------------------------ ABI with the shim
/// Mirrors `kgemu::ThreadInfo` in the shim.
#[repr(C, align(16))]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct ThreadInfo {
    thread_position_in_grid: [u32; 4],
    threadgroup_position_in_grid: [u32; 4],
    thread_position_in_threadgroup: [u32; 4],
    threads_per_threadgroup: [u32; 4],
    threads_per_grid: [u32; 4],
    threadgroups_per_grid: [u32; 4],
    dispatch_threads_per_threadgroup: [u32; 4],
    grid_origin: [u32; 4],
    thread_index_in_simdgroup: u32,
    simdgroup_index_in_threadgroup: u32,
    thread_index_in_threadgroup: u32,
    threads_per_simdgroup: u32,
    simdgroups_per_threadgroup: u32,
    dispatch_simdgroups_per_threadgroup: u32,
    thread_execution_width: u32,
    thread_index_in_quadgroup: u32,
    quadgroup_index_in_threadgroup: u32,
    quadgroups_per_threadgroup: u32,
    dispatch_quadgroups_per_threadgroup: u32,
    pad: [u32; 1],
}

type CollFn = unsafe extern "C" fn(*const *mut c_void, u32);
type ThreadFn = unsafe extern "C" fn(*const *mut u8, *const ThreadInfo);

/// Mirrors `kgemu::Rt` in the shim.
#[repr(C)]
struct Rt {
    abi: u32,
    thread_info_size: u32,
    collective: unsafe extern "C" fn(*mut c_void, CollFn, u32, u32),
    barrier: unsafe extern "C" fn(u32, u32),
    tg_alloc: unsafe extern "C" fn(u32, u64, u64, u32, *const c_char) -> *mut c_void,
    asan_note: unsafe extern "C" fn(usize, u64, u32, usize),
    ubsan_note: unsafe extern "C" fn(*const c_char, *const c_char, u32, u32, usize, *const c_char, usize, u32),
}

static RT: Rt = Rt {
    abi: ABI_VERSION,
    thread_info_size: std::mem::size_of::<ThreadInfo>() as u32,
    collective: rt_collective,
    barrier: rt_barrier,
    tg_alloc: rt_tg_alloc,
    asan_note: rt_asan_note,
    ubsan_note: rt_ubsan_note,
};

/// Names of the collective operation ids (`kgemu::Op` in the shim).
fn op_name(op: u32) -> &'static str {
    const NAMES: [&str; 22] = [
        "?",
        "simd_sum",
        "simd_product",
        "simd_max",
        "simd_min",
        "simd_and",
        "simd_or",
        "simd_xor",
        "simd_broadcast",
        "simd_broadcast_first",
        "simd_shuffle",
        "simd_shuffle_down",
        "simd_shuffle_up",
        "simd_shuffle_xor",
        "simd_any",
        "simd_all",
        "simd_prefix_inclusive_sum",
        "simd_prefix_exclusive_sum",
        "simd_is_first",
        "simd_prefix_inclusive_product",
        "simd_prefix_exclusive_product",
        "simd_ballot",
    ];
    NAMES.get(op as usize).copied().unwrap_or("a collective")
}

// ------------------------------------------------------------------ loaded objects
pub(crate) struct Object {
    _lib: libloading::os::unix::Library,
    entries: Vec<ThreadFn>,
    path: PathBuf,
}

unsafe impl Send for Object {}
unsafe impl Sync for Object {}

impl Object {
    pub fn load(path: &Path, symbols: &[String], file_name: &str) -> Result<Object, EmuError> {
        let lib = unsafe {
            libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_LOCAL)
        }
        .map_err(|e| EmuError::Compile {
            file: file_name.to_string(),
            message: format!("the compiled object {} does not load: {e}", path.display()),
        })?;
        let bad = |what: String| EmuError::Compile { file: file_name.to_string(), message: what };
        unsafe {
            let init: libloading::os::unix::Symbol<unsafe extern "C" fn(*const Rt) -> u32> =
                lib.get(b"kgemu_init\0").map_err(|e| bad(format!("object has no kgemu_init: {e}")))?;
            if init(&RT) != ABI_VERSION {
                return Err(bad("the compiled object was built against a different shim ABI".into()));
            }
            let mut entries = Vec::new();
            for s in symbols {
                let f: libloading::os::unix::Symbol<ThreadFn> =
                    lib.get(s.as_bytes()).map_err(|e| bad(format!("object has no entry {s}: {e}")))?;
                entries.push(*f);
            }
            Ok(Object { _lib: lib, entries, path: path.to_path_buf() })
        }
    }
}

// ------------------------------------------------------------------ fiber stacks
struct Stack {
    map: *mut u8,
    len: usize,
}

/// The range the fiber stack tops are staggered over (see `prepare`); every stack has
/// this much more than its usable size.
const STACK_COLORS: usize = 64 * 1024;

/// `PROT_NONE` bytes below every fiber stack (kernels are built with
/// `-fstack-clash-protection`, so an overflowing frame touches the guard's first page).
const STACK_GUARD: usize = 64 * 1024;

impl Stack {
    fn new(size: usize) -> Stack {
        let page = STACK_GUARD;
        let len = size + page;
        let map = unsafe {
            libc::mmap(
                null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            panic!("emulator: cannot map a fiber stack: {}", std::io::Error::last_os_error());
        }
        unsafe { libc::mprotect(map, page, libc::PROT_NONE) };
        Stack { map: map as *mut u8, len }
    }
    fn lo(&self) -> *mut u8 {
        unsafe { self.map.add(STACK_GUARD) }
    }
    fn size(&self) -> usize {
        self.len - STACK_GUARD
    }
    fn top(&self) -> *mut u8 {
        unsafe { self.map.add(self.len) }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.map as *mut c_void, self.len) };
    }
}

struct AltStack {
    mem: Vec<u8>,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let ss = libc::stack_t { ss_sp: null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
        unsafe { libc::sigaltstack(&ss, null_mut()) };
        let _ = self.mem.len();
    }
}

thread_local! {
    static CURRENT: Cell<*mut Sched> = const { Cell::new(null_mut()) };
    static STACKS: RefCell<(usize, Vec<Stack>)> = const { RefCell::new((0, Vec::new())) };
    static ALT: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

fn ensure_altstack() {
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    unsafe { libc::sigaltstack(null_mut(), &mut old) };
    if old.ss_flags & libc::SS_DISABLE == 0 && old.ss_size >= 16 * 1024 {
        return;
    }
    ALT.with(|a| {
        let mut a = a.borrow_mut();
        let mem = vec![0u8; 256 * 1024];
        let ss = libc::stack_t { ss_sp: mem.as_ptr() as *mut c_void, ss_flags: 0, ss_size: mem.len() };
        unsafe { libc::sigaltstack(&ss, null_mut()) };
        *a = Some(AltStack { mem });
    });
}

// ------------------------------------------------------------------ signals
const SIGNALS: [c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL];
static mut OLD_ACTIONS: [Option<libc::sigaction>; 4] = [None; 4];
static INSTALL: Once = Once::new();

fn handler_addr() -> usize {
    on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize
}

fn install_handlers() {
    INSTALL.call_once(|| unsafe {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler_addr();
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, &sa, &mut old);
            OLD_ACTIONS[i] = Some(old);
        }
    });
    // Someone (a sanitizer runtime, a test harness) may have replaced ours since.
    unsafe {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut cur);
            if cur.sa_sigaction != handler_addr() {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = handler_addr();
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
                OLD_ACTIONS[i] = Some(cur);
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct RawFault {
    sig: c_int,
    addr: usize,
    pc: usize,
    write: bool,
    fiber: usize,
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    unsafe {
        let s = CURRENT.with(|c| c.get());
        if !s.is_null() && (*s).in_fiber {
            let uc = ctx as *mut libc::ucontext_t;
            let gregs = &mut (*uc).uc_mcontext.gregs;
            let pc = gregs[libc::REG_RIP as usize] as usize;
            let err = gregs[libc::REG_ERR as usize] as usize;
            let addr = (*info).si_addr() as usize;
            let cur = (*s).cur;
            if (*s).fault.is_none() {
                (*s).fault = Some(RawFault { sig, addr, pc, write: err & 2 != 0, fiber: cur });
            }
            (*(*s).fibers.as_mut_ptr().add(cur)).state = State::Exited;
            if let Some(f) = (*s).asan {
                (f.start_switch)(null_mut(), (*s).os_stack_bottom, (*s).os_stack_size);
            }
            // Resume the scheduler as if the fiber had switched back to it.
            gregs[libc::REG_RSP as usize] = (*s).sched_sp as i64;
            gregs[libc::REG_RIP as usize] = kgemu_rt_resume as *const () as usize as i64;
            return;
        }
        // Not ours: hand over to the previous handler (or the default action).
        let i = SIGNALS.iter().position(|&x| x == sig).unwrap_or(0);
        let old = *std::ptr::addr_of!(OLD_ACTIONS[i]);
        match old {
            Some(o) if o.sa_sigaction != libc::SIG_DFL && o.sa_sigaction != libc::SIG_IGN => {
                if o.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) = std::mem::transmute(o.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(c_int) = std::mem::transmute(o.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

// ------------------------------------------------------------------ scheduler state
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Runnable: not started yet, or released from a collective or barrier.
    Ready,
    /// The fiber on the CPU.
    Running,
    Coll,
    /// 1: threadgroup_barrier, 2: simdgroup_barrier
    Barrier(u8),
    Exited,
}

/// What the scheduler reads and writes at every collective, barrier and switch, and no
/// more (40 bytes): a threadgroup's fibers are what must stay in cache between two
/// switches. The stack's bounds follow from `stack`; ASan's fake stacks are in `Sched`.
struct Fiber {
    /// Saved stack pointer; null until the fiber first runs.
    sp: *mut u8,
    lane: *mut c_void,
    coll: Option<CollFn>,
    op: u32,
    line: u32,
    /// The stack the fiber runs on (assigned when it first runs; `NO_STACK` before).
    stack: u32,
    state: State,
}

const _: () = assert!(std::mem::size_of::<Fiber>() == 40);

const NO_STACK: u32 = u32::MAX;

/// Per SIMD-group counts: lanes that have not returned, and of those the ones waiting
/// (at a collective, a simdgroup barrier or a threadgroup barrier).
#[derive(Clone, Copy, Default)]
struct SgCount {
    live: u32,
    blocked: u32,
}

/// A scheduling error found by a fiber, turned into an [`EmuError`] by the scheduler.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Divergence { sg: u32, first: usize, second: usize },
    Barrier { first: usize, second: usize },
}

struct TgSite {
    offset: usize,
    size: usize,
    line: u32,
    name: String,
}

struct SanReport {
    what: String,
    file_line: Option<(String, u32)>,
    pc: usize,
    addr: Option<(usize, u64, bool)>,
    fiber: usize,
}

struct Sched {
    sched_sp: *mut u8,
    fibers: Vec<Fiber>,
    infos: Vec<ThreadInfo>,
    cur: usize,
    in_fiber: bool,
    /// The run order of this threadgroup and the position in the current round.
    order: *const u32,
    order_len: usize,
    round_pos: usize,
    /// Fibers in state `Ready`.
    ready: usize,
    /// Fibers that have not returned, and of those the ones at a threadgroup barrier.
    live: usize,
    tg_blocked: usize,
    sgs: Vec<SgCount>,
    pending: Option<Pending>,
    /// `report`, `abort` or `pending` is set.
    stop: bool,
    /// The worker's fiber stacks, and the indices of those no fiber holds.
    stacks: *const Stack,
    free_stacks: Vec<u32>,
    thread_fn: ThreadFn,
    bufs: *const *mut u8,
    fault: Option<RawFault>,
    report: Option<SanReport>,
    asan_headline: [u8; 200],
    abort: Option<(String, u32, usize)>, // (message, line, fiber)
    asan: Option<&'static AsanFns>,
    os_stack_bottom: *const c_void,
    os_stack_size: usize,
    sched_fake: *mut c_void,
    /// Each fiber's fake stack, for ASan's fiber-switch annotations.
    fakes: Vec<*mut c_void>,
    switches: u64,
    arena: *mut u8,
    arena_used: usize,
    tg_data: usize,
    sites: Vec<Option<usize>>, // site id -> index into site_list
    site_list: Vec<TgSite>,
    /// This worker's fiber stacks (low end, size), for fault reports.
    stack_ranges: Vec<(usize, usize)>,
    /// The byte threadgroup memory starts as.
    tg_poison: u8,
}

#[inline(always)]
fn cur_sched() -> *mut Sched {
    CURRENT.with(|c| c.get())
}

#[inline(always)]
unsafe fn fiber(s: *mut Sched, i: usize) -> *mut Fiber {
    unsafe { (*s).fibers.as_mut_ptr().add(i) }
}

/// Whether the threadgroup must stop (a sanitizer report, a scheduling error, a refused
/// allocation): set with them, so the scheduler's hot path tests one flag.
#[inline(always)]
unsafe fn stopping(s: *mut Sched) -> bool {
    unsafe { (*s).stop }
}

/// The next ready fiber in run order, from the current position in the round; at the end
/// of a round the next one starts. `None` when no fiber is ready or the threadgroup stops.
#[inline(always)]
unsafe fn next_ready(s: *mut Sched) -> Option<usize> {
    unsafe {
        if (*s).ready == 0 || stopping(s) {
            return None;
        }
        loop {
            if (*s).round_pos == (*s).order_len {
                (*s).round_pos = 0;
            }
            let i = *(*s).order.add((*s).round_pos) as usize;
            (*s).round_pos += 1;
            let f = fiber(s, i);
            if (*f).state == State::Ready {
                (*f).state = State::Running;
                (*s).ready -= 1;
                // The fiber after this one in run order will most likely run next: fetch
                // the top of its stack (the registers it saved and the frames above them)
                // while this one runs. A switch is otherwise a cache miss on a cold stack.
                let k = *(*s).order.add(if (*s).round_pos == (*s).order_len { 0 } else { (*s).round_pos }) as usize;
                let sp = (*fiber(s, k)).sp;
                if !sp.is_null() {
                    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                    for line in 0..4 {
                        _mm_prefetch::<_MM_HINT_T0>(sp.wrapping_add(64 * line) as *const i8);
                    }
                }
                return Some(i);
            }
        }
    }
}

/// Give a fiber that has not run yet a stack and the initial frame `kgemu_rt_switch`
/// returns into: `fiber_entry(f)` through the trampoline.
#[inline(always)]
unsafe fn prepare(s: *mut Sched, i: usize) {
    unsafe {
        let f = fiber(s, i);
        if !(*f).sp.is_null() {
            return;
        }
        let k = (*s).free_stacks.pop().expect("a free fiber stack");
        let st = &*(*s).stacks.add(k as usize);
        (*f).stack = k;
        // Stagger the stack tops over 64 KiB (1024 distinct cache-line offsets) so that the
        // frames of a threadgroup's fibers spread over every set of the L1 and L2 caches
        // (the stacks are equally spaced, so their tops would otherwise share a few sets).
        let color = (k as usize * 1088) % STACK_COLORS;
        let top = st.top().sub(color);
        let sp = top.sub(56) as *mut usize;
        // r15 r14 r13 r12 rbx rbp ret
        *sp.add(0) = 0;
        *sp.add(1) = 0;
        *sp.add(2) = 0;
        *sp.add(3) = f as usize; // r12: argument
        *sp.add(4) = fiber_entry as *const () as usize; // rbx: entry
        *sp.add(5) = 0;
        *sp.add(6) = kgemu_rt_trampoline as *const () as usize;
        (*f).sp = sp as *mut u8;
    }
}

/// Where a switch goes: a fiber's saved stack pointer and stack, or the scheduler's.
#[inline(always)]
unsafe fn target(s: *mut Sched, next: Option<usize>) -> (*mut u8, *const c_void, usize) {
    unsafe {
        match next {
            Some(j) => {
                prepare(s, j);
                (*s).cur = j;
                let t = fiber(s, j);
                (*s).switches += 1;
                // the bounds only ASan's switch annotations need
                let (lo, size) = match (*s).asan {
                    Some(_) => {
                        let st = &*(*s).stacks.add((*t).stack as usize);
                        (st.lo() as *const c_void, st.size())
                    }
                    None => (std::ptr::null(), 0),
                };
                ((*t).sp, lo, size)
            }
            None => ((*s).sched_sp, (*s).os_stack_bottom, (*s).os_stack_size),
        }
    }
}

/// From the scheduler: run the threadgroup's fibers until none is ready.
unsafe fn run_fibers(s: *mut Sched) {
    unsafe {
        let Some(i) = next_ready(s) else { return };
        let (to, lo, size) = target(s, Some(i));
        (*s).in_fiber = true;
        if let Some(a) = (*s).asan {
            (a.start_switch)(&mut (*s).sched_fake, lo, size);
        }
        kgemu_rt_switch(&mut (*s).sched_sp, to);
        if let Some(a) = (*s).asan {
            (a.finish_switch)((*s).sched_fake, null_mut(), null_mut());
        }
        (*s).in_fiber = false;
    }
}

/// From a fiber that has blocked: run the next ready fiber (or return to the scheduler);
/// returns when this fiber is resumed.
#[inline(always)]
unsafe fn yield_fiber(s: *mut Sched) {
    unsafe {
        let i = (*s).cur;
        let f = fiber(s, i);
        let next = next_ready(s);
        let (to, lo, size) = target(s, next);
        match (*s).asan {
            Some(a) => {
                let fake = (*s).fakes.as_mut_ptr().add(i);
                (a.start_switch)(fake, lo, size);
                kgemu_rt_switch(&mut (*f).sp, to);
                (a.finish_switch)(*fake, null_mut(), null_mut());
            }
            // the switch in tail position: the resumed fiber returns straight to its kernel
            None => kgemu_rt_switch(&mut (*f).sp, to),
        }
    }
}

/// A lane of `sg` has blocked or returned: if every live lane of the SIMD-group now waits,
/// release it (evaluate its collective, or pass its simdgroup barrier) or record why not.
#[inline(always)]
unsafe fn sg_settled(s: *mut Sched, sg: usize) {
    unsafe {
        let c = *(*s).sgs.as_ptr().add(sg);
        if c.blocked >= c.live && c.live > 0 {
            sg_release(s, sg, c);
        }
    }
}

/// [`sg_settled`] once every live lane waits: out of line, so that the path every lane takes
/// into a collective keeps a small stack frame (the frames of all the fibers of a
/// threadgroup between two switches are what must stay in cache).
#[inline(never)]
unsafe fn sg_release(s: *mut Sched, sg: usize, c: SgCount) {
    unsafe {
        let n = (*s).fibers.len();
        let lo = sg * SIMD;
        let hi = (lo + SIMD).min(n);
        let mut first_coll: Option<usize> = None;
        let mut first_other: Option<usize> = None;
        let mut first_sgb: Option<usize> = None;
        let mut n_coll = 0u32;
        for i in lo..hi {
            let f = &*fiber(s, i);
            match f.state {
                State::Coll => {
                    n_coll += 1;
                    match first_coll {
                        None => first_coll = Some(i),
                        Some(j) => {
                            let g = &*fiber(s, j);
                            if (g.op, g.line) != (f.op, f.line) {
                                (*s).pending = Some(Pending::Divergence { sg: sg as u32, first: j, second: i }); (*s).stop = true;
                                return;
                            }
                        }
                    }
                }
                State::Barrier(k) => {
                    if k == 2 {
                        first_sgb.get_or_insert(i);
                    }
                    first_other.get_or_insert(i);
                }
                _ => {}
            }
        }
        if let Some(c0) = first_coll {
            if n_coll != c.live {
                (*s).pending = Some(Pending::Divergence { sg: sg as u32, first: c0, second: first_other.unwrap_or(c0) }); (*s).stop = true;
                return;
            }
            let mut lanes = [null_mut::<c_void>(); SIMD];
            let mut active = 0u32;
            for i in lo..hi {
                let f = fiber(s, i);
                if (*f).state == State::Coll {
                    lanes[i - lo] = (*f).lane;
                    active |= 1 << (i - lo);
                    (*f).state = State::Ready;
                }
            }
            let op = (*fiber(s, c0)).coll.expect("collective function");
            op(lanes.as_ptr(), active);
            (*s).ready += c.live as usize;
            (*(*s).sgs.as_mut_ptr().add(sg)).blocked = 0;
        } else if let Some(b0) = first_sgb {
            let line = (*fiber(s, b0)).line;
            for i in lo..hi {
                let f = &*fiber(s, i);
                if f.state != State::Exited && (f.state != State::Barrier(2) || f.line != line) {
                    (*s).pending = Some(Pending::Barrier { first: b0, second: i }); (*s).stop = true;
                    return;
                }
            }
            for i in lo..hi {
                let f = fiber(s, i);
                if (*f).state == State::Barrier(2) {
                    (*f).state = State::Ready;
                }
            }
            (*s).ready += c.live as usize;
            (*(*s).sgs.as_mut_ptr().add(sg)).blocked = 0;
        }
        // else: every live lane waits at a threadgroup barrier
    }
}

/// A fiber has reached a threadgroup barrier or returned: if every live thread now waits at
/// a threadgroup barrier, release them all (or record the mismatch).
#[inline(always)]
unsafe fn tg_settled(s: *mut Sched) {
    unsafe {
        if (*s).tg_blocked >= (*s).live && (*s).live > 0 && (*s).pending.is_none() {
            tg_release(s);
        }
    }
}

#[inline(never)]
unsafe fn tg_release(s: *mut Sched) {
    unsafe {
        let n = (*s).fibers.len();
        let mut first: Option<usize> = None;
        for i in 0..n {
            let f = &*fiber(s, i);
            if f.state == State::Exited {
                continue;
            }
            match first {
                None => first = Some(i),
                Some(j) => {
                    if f.line != (*fiber(s, j)).line {
                        (*s).pending = Some(Pending::Barrier { first: j, second: i }); (*s).stop = true;
                        return;
                    }
                }
            }
        }
        for i in 0..n {
            let f = fiber(s, i);
            if (*f).state == State::Barrier(1) {
                (*f).state = State::Ready;
            }
        }
        for c in (*s).sgs.iter_mut() {
            c.blocked = 0;
        }
        (*s).ready += (*s).tg_blocked;
        (*s).tg_blocked = 0;
    }
}

/// From a fiber that returned: account for it; returns the next fiber to run.
#[inline(always)]
unsafe fn retire(s: *mut Sched) -> Option<usize> {
    unsafe {
        let i = (*s).cur;
        let f = fiber(s, i);
        (*f).state = State::Exited;
        (*s).live -= 1;
        let sg = i / SIMD;
        (*(*s).sgs.as_mut_ptr().add(sg)).live -= 1;
        sg_settled(s, sg);
        tg_settled(s);
        next_ready(s)
    }
}

extern "C" fn fiber_entry(f: *mut Fiber) -> ! {
    unsafe {
        let s = cur_sched();
        if let Some(a) = (*s).asan {
            (a.finish_switch)(null_mut(), null_mut(), null_mut());
        }
        let mut idx = f.offset_from((*s).fibers.as_ptr()) as usize;
        loop {
            ((*s).thread_fn)((*s).bufs, (*s).infos.as_ptr().add(idx));
            let next = retire(s);
            match next {
                // a fiber that has not run yet takes over this stack: no switch
                Some(j) if (*fiber(s, j)).sp.is_null() => {
                    let (me, it) = (fiber(s, idx), fiber(s, j));
                    (*it).stack = (*me).stack;
                    (*it).sp = 1 as *mut u8; // started
                    (*me).stack = NO_STACK;
                    (*s).cur = j;
                    idx = j;
                }
                _ => {
                    // this stack is free again; nothing runs on it past the switch
                    let me = fiber(s, idx);
                    (*s).free_stacks.push((*me).stack);
                    (*me).stack = NO_STACK;
                    let (to, lo, size) = target(s, next);
                    if let Some(a) = (*s).asan {
                        (a.start_switch)(null_mut(), lo, size);
                    }
                    let mut dead: *mut u8 = null_mut();
                    kgemu_rt_switch(&mut dead, to);
                    std::process::abort();
                }
            }
        }
    }
}

unsafe extern "C" fn rt_collective(lane: *mut c_void, f: CollFn, op: u32, line: u32) {
    unsafe {
        let s = cur_sched();
        let i = (*s).cur;
        let fib = fiber(s, i);
        (*fib).state = State::Coll;
        (*fib).lane = lane;
        (*fib).coll = Some(f);
        (*fib).op = op;
        (*fib).line = line;
        let sg = i / SIMD;
        (*(*s).sgs.as_mut_ptr().add(sg)).blocked += 1;
        sg_settled(s, sg);
        yield_fiber(s);
    }
}

unsafe extern "C" fn rt_barrier(kind: u32, line: u32) {
    unsafe {
        let s = cur_sched();
        let i = (*s).cur;
        let fib = fiber(s, i);
        (*fib).state = State::Barrier(kind as u8);
        (*fib).line = line;
        let sg = i / SIMD;
        (*(*s).sgs.as_mut_ptr().add(sg)).blocked += 1;
        if kind == 1 {
            (*s).tg_blocked += 1;
        }
        sg_settled(s, sg);
        if kind == 1 {
            tg_settled(s);
        }
        yield_fiber(s);
    }
}

/// From a fiber: end the threadgroup's run for an error found in it (the scheduler reports
/// it); never returns.
unsafe fn abandon_fiber(s: *mut Sched) -> ! {
    unsafe {
        let f = fiber(s, (*s).cur);
        (*f).state = State::Exited;
        if let Some(a) = (*s).asan {
            (a.start_switch)(null_mut(), (*s).os_stack_bottom, (*s).os_stack_size);
        }
        let mut dead: *mut u8 = null_mut();
        kgemu_rt_switch(&mut dead, (*s).sched_sp);
        std::process::abort();
    }
}

unsafe extern "C" fn rt_tg_alloc(site: u32, size: u64, align: u64, line: u32, name: *const c_char) -> *mut c_void {
    unsafe {
        let s = cur_sched();
        let site = site as usize;
        if let Some(Some(k)) = (*s).sites.get(site) {
            return (*s).arena.add((*s).site_list[*k].offset) as *mut c_void;
        }
        let name = if name.is_null() { String::from("?") } else { CStr::from_ptr(name).to_string_lossy().into_owned() };
        let size = size as usize;
        let align = (align as usize).max(16);
        let offset = (*s).arena_used.div_ceil(align) * align;
        if (*s).tg_data + size > TG_LIMIT || offset + size + TG_REDZONE > TG_ARENA {
            (*s).stop = true;
            (*s).abort = Some((
                format!(
                    "threadgroup memory exceeds Apple's 32 KiB: `{name}` needs {size} bytes with {} already declared",
                    (*s).tg_data
                ),
                line,
                (*s).cur,
            ));
            abandon_fiber(s);
        }
        let p = (*s).arena.add(offset);
        std::ptr::write_bytes(p, (*s).tg_poison, size);
        std::ptr::write_bytes(p.add(size), CANARY, TG_REDZONE);
        if (*s).asan.is_some() {
            sanitize::asan_poison(p as usize + size, TG_REDZONE);
        }
        (*s).arena_used = offset + size + TG_REDZONE;
        (*s).tg_data += size;
        if (*s).sites.len() <= site {
            (*s).sites.resize(site + 1, None);
        }
        (*s).sites[site] = Some((*s).site_list.len());
        (*s).site_list.push(TgSite { offset, size, line, name });
        p as *mut c_void
    }
}

unsafe extern "C" fn rt_asan_note(addr: usize, size: u64, is_write: u32, pc: usize) {
    unsafe {
        let s = cur_sched();
        if s.is_null() {
            return;
        }
        // An ASan report (it knows the address) replaces a UBSan report of the same
        // access (UBSan's bounds check fires first on `a[32]` of a `float a[32]`).
        if let Some(r) = &(*s).report {
            if r.addr.is_some() || r.fiber != (*s).cur {
                return;
            }
        }
        let what = if is_write != 0 { "invalid write" } else { "invalid read" };
        (*s).stop = true;
        (*s).report = Some(SanReport {
            what: format!("AddressSanitizer: {what} of {size} byte(s) at {addr:#x}"),
            file_line: None,
            pc: pc.saturating_sub(1),
            addr: Some((addr, size, is_write != 0)),
            fiber: (*s).cur,
        });
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rt_ubsan_note(
    what: *const c_char,
    file: *const c_char,
    line: u32,
    _col: u32,
    pc: usize,
    type_name: *const c_char,
    ptr: usize,
    align: u32,
) {
    unsafe {
        let s = cur_sched();
        if s.is_null() || (*s).report.is_some() {
            return;
        }
        let text = |p: *const c_char| (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned());
        let mut what = text(what).unwrap_or_else(|| "undefined behaviour".into());
        if let Some(t) = text(type_name) {
            what = format!("{what} of {t} at {ptr:#x}");
            if align > 1 {
                what = format!("{what} (needs {align}-byte alignment)");
            }
        }
        (*s).stop = true;
        (*s).report = Some(SanReport {
            what: format!("UndefinedBehaviorSanitizer: {what}"),
            file_line: text(file).map(|f| (f, line)),
            pc: pc.saturating_sub(1),
            addr: (ptr != 0).then_some((ptr, 0, false)),
            fiber: (*s).cur,
        });
    }
}

/// ASan's report callback: keep the headline for the error message.
unsafe extern "C" fn asan_report_callback(report: *const c_char) {
    unsafe {
        let s = cur_sched();
        if s.is_null() || report.is_null() {
            return;
        }
        let text = CStr::from_ptr(report).to_bytes();
        let key = b"ERROR: AddressSanitizer: ";
        if let Some(pos) = text.windows(key.len()).position(|w| w == key) {
            let rest = &text[pos + 7..];
            let mut end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            if let Some(p) = rest[..end].windows(4).position(|w| w == b" on ") {
                end = p;
            }
            let line = &rest[..end.min((*s).asan_headline.len() - 1)];
            if (*s).asan_headline[0] == 0 {
                (*s).asan_headline[..line.len()].copy_from_slice(line);
            }
        }
    }
}

fn register_asan_callback(a: &AsanFns) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Some(set) = a.set_report_callback {
            unsafe { set(Some(asan_report_callback)) };
        }
    });
}

// ------------------------------------------------------------------ dispatch
pub(crate) struct DispatchArgs<'a, 'b> {
    pub object: &'a Object,
    pub entry: usize,
    pub kernel: &'a KernelSignature,
    pub file_name: &'a str,
    pub buffers: &'a mut [Buf<'b>],
    pub grid: [u32; 3],
    pub threadgroup: [u32; 3],
    pub order: RunOrder,
    /// The byte threadgroup memory is filled with before each threadgroup runs.
    pub threadgroup_poison: u8,
    pub sanitize: bool,
    pub guard_pages: bool,
    /// Worker threads to run threadgroups on (at least 1; the calling thread is one).
    pub workers: usize,
}

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

/// A buffer bound to a dispatch: one the kernel may write, one it may only read (its pages
/// read-only while the dispatch runs, so a write faults) that the dispatch owns for its
/// duration, or one it only reads and shares with other users (an input borrowed in place).
pub(crate) enum Buf<'b> {
    Mut(&'b mut DeviceBuffer),
    ReadOnly(&'b mut DeviceBuffer),
    Shared(&'b DeviceBuffer),
}

impl Buf<'_> {
    fn get(&self) -> &DeviceBuffer {
        match self {
            Buf::Mut(b) | Buf::ReadOnly(b) => b,
            Buf::Shared(b) => b,
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

/// A worker thread's threadgroup memory (kept for the thread's life).
struct Arena {
    ptr: *mut u8,
}
impl Arena {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(TG_ARENA, 64).unwrap()
    }
    fn new() -> Arena {
        let ptr = unsafe { std::alloc::alloc(Self::layout()) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout());
        }
        Arena { ptr }
    }
}
impl Drop for Arena {
    fn drop(&mut self) {
        sanitize::asan_unpoison(self.ptr as usize, TG_ARENA);
        unsafe { std::alloc::dealloc(self.ptr, Self::layout()) };
    }
}

thread_local! {
    static ARENA: RefCell<Option<Arena>> = const { RefCell::new(None) };
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
    tg_order: Vec<u32>,
    next: std::sync::atomic::AtomicUsize,
    stop: std::sync::atomic::AtomicBool,
    /// (position in `tg_order`, error): the error of the earliest threadgroup.
    error: std::sync::Mutex<Option<(usize, EmuError)>>,
    switches: std::sync::atomic::AtomicU64,
    workers: usize,
}

impl Shared<'_> {
    fn fail(&self, pos: usize, e: EmuError) {
        let mut g = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref().is_none_or(|(p, _)| pos < *p) {
            *g = Some((pos, e));
        }
        self.stop.store(true, std::sync::atomic::Ordering::Release);
    }
}

pub(crate) fn dispatch(a: DispatchArgs<'_, '_>) -> Result<DispatchStats, EmuError> {
    let start = Instant::now();
    let grid = a.grid;
    if grid.contains(&0) {
        return Ok(DispatchStats { elapsed: start.elapsed(), workers: 1, ..Default::default() });
    }
    let tg = [a.threadgroup[0].min(grid[0]), a.threadgroup[1].min(grid[1]), a.threadgroup[2].min(grid[2])];
    let tgs = [grid[0].div_ceil(tg[0]), grid[1].div_ceil(tg[1]), grid[2].div_ceil(tg[2])];
    let n_tg = tgs[0] as u64 * tgs[1] as u64 * tgs[2] as u64;
    let asan = if a.sanitize { sanitize::fns() } else { None };
    if a.sanitize && asan.is_none() {
        return Err(EmuError::Sanitizer { message: "the AddressSanitizer runtime is not loaded in this process".into() });
    }
    if let Some(f) = asan {
        register_asan_callback(f);
    }
    install_handlers();

    let buf_ptrs: Vec<*mut u8> = a.buffers.iter().map(|b| b.get().data_ptr()).collect();
    let mut meta = a_meta(&a);
    meta.tg = tg;
    meta.tgs = tgs;
    meta.grid = grid;
    meta.thread_fn = a.object.entries[a.entry];
    meta.bufs = buf_ptrs;
    meta.asan = asan;
    meta.stack_size = if a.sanitize { 1024 * 1024 } else { 256 * 1024 };
    meta.order = a.order;
    meta.tg_poison = a.threadgroup_poison;
    for b in a.buffers.iter_mut() {
        match b {
            Buf::Mut(b) => b.arm(a.sanitize, a.guard_pages),
            Buf::ReadOnly(b) => {
                b.arm(a.sanitize, a.guard_pages);
                b.protect_read_only();
            }
            Buf::Shared(b) => b.arm_shared(a.sanitize),
        }
    }
    let armed = Armed { buffers: a.buffers, sanitize: a.sanitize };

    let mut tg_order = Vec::new();
    order_into(&mut tg_order, n_tg as usize, a.order, 0x5EED);
    let workers = a.workers.max(1).min(n_tg.min(usize::MAX as u64) as usize);
    let shared = Shared {
        workers,
        meta: &meta,
        tg_order,
        next: std::sync::atomic::AtomicUsize::new(0),
        stop: std::sync::atomic::AtomicBool::new(false),
        error: std::sync::Mutex::new(None),
        switches: std::sync::atomic::AtomicU64::new(0),
    };
    let used = pool::run(workers, &|| work(&shared));
    let threads = grid.iter().map(|&g| g as u64).product();
    let switches = shared.switches.load(std::sync::atomic::Ordering::Relaxed);
    let error = shared.error.into_inner().unwrap_or_else(|p| p.into_inner());
    drop(armed);
    if let Some((_, e)) = error {
        return Err(e);
    }
    Ok(DispatchStats { threads, threadgroups: n_tg, switches, workers: used, elapsed: start.elapsed() })
}

/// One worker: its own scheduler, fiber stacks, threadgroup memory and signal stack; takes
/// threadgroups in assignment order until they run out or one fails.
fn work(shared: &Shared<'_>) {
    use std::sync::atomic::Ordering;
    ensure_altstack();
    let m = shared.meta;
    let tg_threads = (m.tg[0] * m.tg[1] * m.tg[2]) as usize;
    ARENA.with(|ar| {
        let mut ar = ar.borrow_mut();
        let arena = ar.get_or_insert_with(Arena::new).ptr;
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
            arena_used: 0,
            tg_data: 0,
            sites: Vec::new(),
            site_list: Vec::new(),
            stack_ranges: Vec::new(),
            tg_poison: m.tg_poison,
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
                st.1.push(Stack::new(m.stack_size + STACK_COLORS));
            }
            let stacks = &st.1;
            unsafe { (*s).stack_ranges = stacks.iter().map(|k| (k.lo() as usize, k.size())).collect() };
            let ctx = Ctx { a: m, tg: m.tg, tgs: m.tgs, grid: m.grid };
            let mut fiber_order = Vec::new();
            while !shared.stop.load(Ordering::Acquire) {
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
                if let Err(e) = unsafe { run_threadgroup(s, &ctx, tgid, stacks, &mut fiber_order, m.order, lin) } {
                    shared.fail(pos, e);
                    break;
                }
                // memory the kernel must not have written
                for (i, &b) in m.buffers.iter().enumerate() {
                    if let Some((off, what)) = unsafe { (*b).find_overwrite() } {
                        let others = if shared.workers > 1 {
                            "; found after this threadgroup ran, but with several workers a threadgroup running at the same time may have written it (one worker names the writer)"
                        } else {
                            ""
                        };
                        shared.fail(
                            pos,
                            EmuError::Corruption {
                                kernel: m.kernel.clone(),
                                what: format!(
                                    "byte {off} of buffer({i}){} was written: it lies in {what}{others}",
                                    m.buffer_name(i)
                                ),
                                metal_line: None,
                                threadgroup_position_in_grid: tgid,
                            },
                        );
                        break;
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

/// The process's pool of helper threads. A dispatch runs on the calling thread plus up to
/// `workers - 1` idle helpers (new ones are started while fewer than [`pool::MAX_HELPERS`]
/// exist; when none is free the dispatch runs on fewer workers, which changes no result).
mod pool {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Condvar, Mutex, mpsc};

    /// At most this many helper threads are ever started.
    pub const MAX_HELPERS: usize = 256;

    type Job = Box<dyn FnOnce() + Send + 'static>;

    struct Helper {
        tx: mpsc::Sender<Job>,
    }

    static IDLE: Mutex<Vec<Helper>> = Mutex::new(Vec::new());
    static STARTED: AtomicUsize = AtomicUsize::new(0);

    fn take(n: usize) -> Vec<Helper> {
        let mut got = Vec::with_capacity(n);
        {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            while got.len() < n {
                match idle.pop() {
                    Some(h) => got.push(h),
                    None => break,
                }
            }
        }
        while got.len() < n && STARTED.fetch_add(1, Ordering::Relaxed) < MAX_HELPERS {
            let (tx, rx) = mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new().name("kgemu-worker".into()).spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
            match spawned {
                Ok(_) => got.push(Helper { tx }),
                Err(_) => {
                    STARTED.fetch_sub(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        got
    }

    struct Latch {
        left: Mutex<usize>,
        done: Condvar,
        panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    }

    /// Waits for every sent job, even when the calling thread unwinds.
    struct WaitAll<'l>(&'l Latch);
    impl Drop for WaitAll<'_> {
        fn drop(&mut self) {
            let mut left = self.0.left.lock().unwrap_or_else(|p| p.into_inner());
            while *left > 0 {
                left = self.0.done.wait(left).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// Run `f` on `workers` threads at once (the calling thread and idle helpers) and
    /// return when every one has returned: how many threads ran it. A panic in a helper is
    /// re-raised here.
    pub fn run(workers: usize, f: &(dyn Fn() + Sync)) -> usize {
        let helpers = if workers > 1 { take(workers - 1) } else { Vec::new() };
        if helpers.is_empty() {
            f();
            return 1;
        }
        let latch = Arc::new(Latch { left: Mutex::new(0), done: Condvar::new(), panic: Mutex::new(None) });
        // SAFETY: `f` outlives every job: `WaitAll` blocks until each sent job has finished
        // (or was dropped unsent), on every path out of this function.
        let f_static: &'static (dyn Fn() + Sync) = unsafe { std::mem::transmute(f) };
        let mut sent = Vec::with_capacity(helpers.len());
        {
            let _wait = WaitAll(&latch);
            for h in helpers {
                let l = latch.clone();
                *latch.left.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                let job: Job = Box::new(move || {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f_static));
                    if let Err(p) = r {
                        *l.panic.lock().unwrap_or_else(|p| p.into_inner()) = Some(p);
                    }
                    let mut left = l.left.lock().unwrap_or_else(|p| p.into_inner());
                    *left -= 1;
                    l.done.notify_all();
                });
                if let Err(mpsc::SendError(job)) = h.tx.send(job) {
                    // the helper is gone: count the job as done
                    drop(job);
                    *latch.left.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                    STARTED.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                sent.push(h);
            }
            f();
        }
        let used = 1 + sent.len();
        IDLE.lock().unwrap_or_else(|p| p.into_inner()).extend(sent);
        if let Some(p) = latch.panic.lock().unwrap_or_else(|p| p.into_inner()).take() {
            std::panic::resume_unwind(p);
        }
        used
    }
}

/// What the workers need to know about the dispatch.
struct Meta {
    kernel: String,
    file_name: String,
    so_path: PathBuf,
    buffer_names: Vec<String>,
    buffers: Vec<*const DeviceBuffer>,
    tg: [u32; 3],
    tgs: [u32; 3],
    grid: [u32; 3],
    thread_fn: ThreadFn,
    bufs: Vec<*mut u8>,
    asan: Option<&'static AsanFns>,
    stack_size: usize,
    order: RunOrder,
    tg_poison: u8,
}

// The raw pointers are to the dispatch's buffers, which outlive every worker; workers only
// read through them (the kernel writes the buffers' data).
unsafe impl Sync for Meta {}
unsafe impl Send for Meta {}

impl Meta {
    fn buffer_name(&self, i: usize) -> String {
        self.buffer_names.get(i).filter(|n| !n.is_empty()).map(|n| format!(" `{n}`")).unwrap_or_default()
    }
}

unsafe extern "C" fn no_thread(_: *const *mut u8, _: *const ThreadInfo) {}

fn a_meta(a: &DispatchArgs<'_, '_>) -> Meta {
    let n = a.buffers.len();
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
        buffer_names: names,
        buffers: a.buffers.iter().map(|b| b.get() as *const DeviceBuffer).collect(),
        tg: [0; 3],
        tgs: [0; 3],
        grid: [0; 3],
        thread_fn: no_thread,
        bufs: Vec::new(),
        asan: None,
        stack_size: 0,
        order: RunOrder::Forward,
        tg_poison: POISON,
    }
}

struct Ctx<'m> {
    a: &'m Meta,
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
    salt: u64,
) -> Result<(), EmuError> {
    unsafe {
        let tg = ctx.tg;
        let actual = [
            tg[0].min(ctx.grid[0] - tgid[0] * tg[0]),
            tg[1].min(ctx.grid[1] - tgid[1] * tg[1]),
            tg[2].min(ctx.grid[2] - tgid[2] * tg[2]),
        ];
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
            (*s).sgs.push(SgCount { live: (n - g * SIMD).min(SIMD) as u32, blocked: 0 });
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
        (*s).arena_used = 0;
        (*s).tg_data = 0;
        (*s).sites.iter_mut().for_each(|x| *x = None);
        (*s).site_list.clear();

        order_into(order, n, run_order, salt.wrapping_add(1));
        (*s).order = order.as_ptr();
        (*s).order_len = order.len();
        (*s).round_pos = 0;
        // the fibers hand over to each other; control comes back when none is ready
        run_fibers(s);
        if (*s).fault.is_some() || (*s).report.is_some() || (*s).abort.is_some() {
            return Err(fault_error(s, ctx, tgid));
        }
        let file_name: &str = &ctx.a.file_name;
        let waiter = |i: usize| -> Box<Waiter> { Box::new(waiter_of(s, file_name, i)) };
        match (*s).pending {
            Some(Pending::Divergence { sg, first, second }) => {
                return Err(EmuError::Divergence {
                    kernel: ctx.a.kernel.clone(),
                    threadgroup_position_in_grid: tgid,
                    simdgroup: sg,
                    first: waiter(first),
                    second: waiter(second),
                });
            }
            Some(Pending::Barrier { first, second }) => {
                return Err(EmuError::Barrier {
                    kernel: ctx.a.kernel.clone(),
                    threadgroup_position_in_grid: tgid,
                    first: waiter(first),
                    second: waiter(second),
                });
            }
            None => {}
        }
        debug_assert!((*s).live == 0, "fibers left without an error");
        // threadgroup arrays must not have been written past their end
        for site in &(*s).site_list {
            let rz = (*s).arena.add(site.offset + site.size);
            sanitize::asan_unpoison(rz as usize, TG_REDZONE);
            let bytes = std::slice::from_raw_parts(rz, TG_REDZONE);
            if let Some(k) = bytes.iter().position(|&c| c != CANARY) {
                return Err(EmuError::Corruption {
                    kernel: ctx.a.kernel.clone(),
                    what: format!(
                        "a write ran past the end of threadgroup array `{}` ({} bytes): byte {} after its end was overwritten",
                        site.name, site.size, k
                    ),
                    metal_line: Some((ctx.a.file_name.clone(), site.line)),
                    threadgroup_position_in_grid: tgid,
                });
            }
        }
        Ok(())
    }
}

unsafe fn waiter_of(s: *mut Sched, file_name: &str, i: usize) -> Waiter {
    unsafe {
        let f = &*(*s).fibers.as_ptr().add(i);
        let at = match f.state {
            State::Coll => op_name(f.op).to_string(),
            State::Barrier(1) => "threadgroup_barrier".to_string(),
            State::Barrier(_) => "simdgroup_barrier".to_string(),
            State::Exited => "return".to_string(),
            State::Ready | State::Running => "running".to_string(),
        };
        let p = (*s).infos[i].thread_position_in_grid;
        Waiter {
            thread_position_in_grid: [p[0], p[1], p[2]],
            at,
            metal_line: (f.line > 0).then(|| (file_name.to_string(), f.line)),
        }
    }
}

fn sig_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        _ => "signal",
    }
}

/// Where an address lies: a buffer, threadgroup memory, a fiber stack guard.
unsafe fn describe_addr(s: *mut Sched, ctx: &Ctx<'_>, addr: usize) -> String {
    unsafe {
        for (i, b) in ctx.a.buffers.iter().enumerate() {
            if let Some(d) = (**b).describe(addr) {
                return format!("buffer({i}){} at {d}", ctx.a.buffer_name(i));
            }
        }
        let arena = (*s).arena as usize;
        if addr >= arena && addr < arena + TG_ARENA {
            let off = addr - arena;
            for site in &(*s).site_list {
                if off >= site.offset && off < site.offset + site.size {
                    return format!("threadgroup array `{}` at byte {}", site.name, off - site.offset);
                }
                if off >= site.offset + site.size && off < site.offset + site.size + TG_REDZONE {
                    return format!(
                        "byte {} of threadgroup array `{}`, past its end ({} bytes, declared at {}:{})",
                        off - site.offset,
                        site.name,
                        site.size,
                        ctx.a.file_name,
                        site.line
                    );
                }
            }
            return "threadgroup memory outside every declared array".into();
        }
        for (lo, _) in &(*s).stack_ranges {
            if addr >= lo - STACK_GUARD && addr < *lo {
                return "the guard below the GPU thread's stack (stack overflow: too much thread memory)".into();
            }
        }
        if addr < 65536 { "a null pointer".to_string() } else { "memory outside every buffer".to_string() }
    }
}

unsafe fn fault_error(s: *mut Sched, ctx: &Ctx<'_>, tgid: [u32; 3]) -> EmuError {
    unsafe {
        let pos = |fiber: usize| {
            let p = (*s).infos[fiber].thread_position_in_grid;
            [p[0], p[1], p[2]]
        };
        if let Some(f) = (*s).fault {
            let what = match f.sig {
                libc::SIGSEGV | libc::SIGBUS => format!(
                    "invalid {} at {:#x}, {} ({})",
                    if f.write { "write" } else { "read" },
                    f.addr,
                    describe_addr(s, ctx, f.addr),
                    sig_name(f.sig)
                ),
                libc::SIGFPE => "arithmetic exception: integer division by zero or overflow (SIGFPE)".to_string(),
                _ => "illegal instruction: a trap (unreachable code, __builtin_trap) was executed (SIGILL)".to_string(),
            };
            return EmuError::Fault {
                kernel: ctx.a.kernel.clone(),
                what,
                metal_line: metal_line(&ctx.a.so_path, f.pc, &ctx.a.file_name),
                thread_position_in_grid: pos(f.fiber),
                threadgroup_position_in_grid: tgid,
            };
        }
        if let Some(r) = &(*s).report {
            let mut what = r.what.clone();
            let head = &(*s).asan_headline;
            let hl = head.iter().position(|&c| c == 0).unwrap_or(head.len());
            if hl > 0 && r.what.starts_with("AddressSanitizer") {
                let h = String::from_utf8_lossy(&head[..hl]).trim().to_string();
                what = format!("{h}; {}", what.trim_start_matches("AddressSanitizer: "));
            }
            if let Some((addr, _, _)) = r.addr {
                what = format!("{what}, {}", describe_addr(s, ctx, addr));
            }
            let line = match &r.file_line {
                Some((f, l)) if f.ends_with(&ctx.a.file_name) || *f == ctx.a.file_name => Some((ctx.a.file_name.clone(), *l)),
                _ => metal_line(&ctx.a.so_path, r.pc, &ctx.a.file_name),
            };
            return EmuError::Fault {
                kernel: ctx.a.kernel.clone(),
                what,
                metal_line: line,
                thread_position_in_grid: pos(r.fiber),
                threadgroup_position_in_grid: tgid,
            };
        }
        let (msg, line, fiber) = (*s).abort.clone().unwrap_or_default();
        EmuError::Launch {
            kernel: ctx.a.kernel.clone(),
            message: format!(
                "{msg} ({}:{line}, GPU thread {:?}, threadgroup {:?})",
                ctx.a.file_name,
                pos(fiber),
                tgid
            ),
        }
    }
}

/// The `.metal` line of a program counter inside the kernel object, from its line
/// tables: the innermost inlined frame that lies in the `.metal` file.
fn metal_line(so: &Path, pc: usize, file_name: &str) -> Option<(String, u32)> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(pc as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    let fname = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    let same = std::fs::canonicalize(&fname).ok() == std::fs::canonicalize(so).ok();
    if !same {
        return None;
    }
    let off = pc - info.dli_fbase as usize;
    let out = super::compile::tool_command("addr2line")
        .arg("-e")
        .arg(so)
        .arg("-i")
        .arg(format!("{off:#x}"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text.lines() {
        let l = l.split(" (discriminator").next().unwrap_or(l);
        let Some((file, line)) = l.rsplit_once(':') else { continue };
        if file.ends_with(file_name) {
            if let Ok(n) = line.trim().parse::<u32>() {
                if n > 0 {
                    return Some((file_name.to_string(), n));
                }
            }
        }
    }
    None
}
