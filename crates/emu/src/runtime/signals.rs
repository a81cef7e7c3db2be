//! Faults in a GPU thread: the SIGSEGV/SIGBUS/SIGFPE/SIGILL handler records the fault and
//! resumes the scheduler as if the fiber had switched back to it; the watchdog's interrupt
//! (a dispatch past its time limit) does the same from the kernel's code; every other
//! signal goes to the handler that was there before.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::Once;
use std::sync::atomic::Ordering;

use crate::EmuError;

use super::insn;
use super::sched::{CURRENT, Sched, State};
use super::switch::kgemu_rt_resume;

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

/// This thread's alternate signal stack, where the fault handler runs (a fiber's stack
/// may be the one that overflowed).
pub(super) fn ensure_altstack() -> Result<(), EmuError> {
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    unsafe { libc::sigaltstack(null_mut(), &mut old) };
    if old.ss_flags & libc::SS_DISABLE == 0 && old.ss_size >= 16 * 1024 {
        return Ok(());
    }
    const SIZE: usize = 256 * 1024;
    let mut mem = Vec::new();
    mem.try_reserve_exact(SIZE).map_err(|e| EmuError::Memory { what: format!("cannot allocate a {SIZE}-byte signal stack: {e}") })?;
    mem.resize(SIZE, 0);
    let ss = libc::stack_t { ss_sp: mem.as_ptr() as *mut c_void, ss_flags: 0, ss_size: mem.len() };
    if unsafe { libc::sigaltstack(&ss, null_mut()) } != 0 {
        return Err(EmuError::Memory { what: format!("cannot install a signal stack: {}", std::io::Error::last_os_error()) });
    }
    ALT.with(|a| *a.borrow_mut() = Some(AltStack { mem }));
    Ok(())
}

thread_local! {
    static ALT: RefCell<Option<AltStack>> = const { RefCell::new(None) };
}

/// The faults a GPU thread may raise, and the watchdog's interrupt.
fn signals() -> [c_int; 5] {
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, interrupt_signal()]
}
static mut OLD_ACTIONS: [Option<libc::sigaction>; 5] = [None; 5];
static INSTALL: Once = Once::new();

/// The signal the watchdog interrupts a worker with (`watchdog.rs`): a real-time signal,
/// sent with [`INTERRUPT_TAG`]'s address as its value, so that the handler tells it from
/// the same signal sent by anyone else (which goes to their handler).
fn interrupt_signal() -> c_int {
    libc::SIGRTMAX() - 3
}

static INTERRUPT_TAG: u8 = 0;

/// Interrupt thread `t` (running a dispatch past its deadline).
///
/// # Safety
/// `t` must be a live thread.
pub(super) unsafe fn interrupt(t: libc::pthread_t) {
    let value = libc::sigval { sival_ptr: std::ptr::addr_of!(INTERRUPT_TAG) as *mut c_void };
    unsafe { libc::pthread_sigqueue(t, interrupt_signal(), value) };
}

fn handler_addr() -> usize {
    on_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize
}

pub(super) fn install_handlers() {
    INSTALL.call_once(|| unsafe {
        for (i, &sig) in signals().iter().enumerate() {
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
        for (i, &sig) in signals().iter().enumerate() {
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

/// From a signal handler: end the GPU thread on the CPU and return to the scheduler as if
/// it had switched back to it.
unsafe fn resume_scheduler(s: *mut Sched, gregs: &mut [libc::greg_t]) {
    unsafe {
        (*(*s).fibers.as_mut_ptr().add((*s).cur)).state = State::Exited;
        if let Some(f) = (*s).asan {
            (f.start_switch)(null_mut(), (*s).os_stack_bottom, (*s).os_stack_size);
        }
        gregs[libc::REG_RSP as usize] = (*s).sched_sp as i64;
        gregs[libc::REG_RIP as usize] = kgemu_rt_resume as *const () as usize as i64;
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct RawFault {
    pub(super) sig: c_int,
    /// The address accessed: `si_addr` of a page fault; of a general-protection fault
    /// (`refused`), decoded from the instruction (`None` where it cannot be).
    pub(super) addr: Option<usize>,
    pub(super) pc: usize,
    /// A write (`Some(true)`) or a read; `None` where the instruction was not decoded.
    pub(super) write: Option<bool>,
    /// A general-protection fault: the processor refused the address itself (not
    /// canonical, or a misaligned aligned-vector access) and gives none.
    pub(super) refused: bool,
    pub(super) fiber: usize,
}

/// The x86 exception number of a general-protection fault (`REG_TRAPNO`); a page fault is 14.
const TRAP_GENERAL_PROTECTION: i64 = 13;

/// The access of a fault at `pc`: from the page fault's error code (bit 1: a write) and
/// `si_addr`, or, for a general-protection fault, from the instruction at `pc` decoded.
unsafe fn access_of(sig: c_int, info: *mut libc::siginfo_t, gregs: &[libc::greg_t]) -> (Option<usize>, Option<bool>, bool) {
    unsafe {
        let refused = sig == libc::SIGSEGV && gregs[libc::REG_TRAPNO as usize] == TRAP_GENERAL_PROTECTION;
        if !refused {
            let err = gregs[libc::REG_ERR as usize] as usize;
            return (Some((*info).si_addr() as usize), Some(err & 2 != 0), false);
        }
        // The instruction's bytes, read by the kernel: they stop at an unmapped page
        // where the longest instruction would run past the code's last one.
        let pc = gregs[libc::REG_RIP as usize] as usize;
        let mut code = [0u8; 15];
        let local = libc::iovec { iov_base: code.as_mut_ptr() as *mut c_void, iov_len: code.len() };
        let remote = libc::iovec { iov_base: pc as *mut c_void, iov_len: code.len() };
        let n = libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0);
        let access = if n > 0 { insn::decode(&code[..n as usize], &insn::registers(gregs)) } else { None };
        (access.and_then(|a| a.addr), access.map(|a| a.write), true)
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    unsafe {
        let s = CURRENT.with(|c| c.get());
        let in_fiber = !s.is_null() && (*s).in_fiber;
        let gregs = &mut (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs;
        if sig == interrupt_signal()
            && (*info).si_code == libc::SI_QUEUE
            && (*info).si_value().sival_ptr as *const u8 == std::ptr::addr_of!(INTERRUPT_TAG)
        {
            // The watchdog's: stop the GPU thread if its dispatch expired and it is in the
            // kernel's own code (elsewhere, in the runtime or a library, it may hold a lock
            // or be half way through an update; the watchdog signals again).
            let pc = gregs[libc::REG_RIP as usize] as usize;
            if in_fiber && (*s).expired.as_ref().is_some_and(|e| e.load(Ordering::Acquire)) && (*s).code.contains(&pc) {
                (*s).timed_out = true;
                resume_scheduler(s, gregs);
            }
            return;
        }
        if in_fiber {
            let pc = gregs[libc::REG_RIP as usize] as usize;
            if (*s).fault.is_none() {
                let (addr, write, refused) = access_of(sig, info, &gregs[..]);
                (*s).fault = Some(RawFault { sig, addr, pc, write, refused, fiber: (*s).cur });
            }
            resume_scheduler(s, gregs);
            return;
        }
        // Not ours: hand over to the previous handler (or the default action).
        let i = signals().iter().position(|&x| x == sig).unwrap_or(0);
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

