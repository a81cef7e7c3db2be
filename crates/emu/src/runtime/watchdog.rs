//! The time limit of a dispatch. One watchdog thread per process waits for the earliest
//! deadline of the dispatches running; past it, it marks the dispatch expired (its workers
//! take no more threadgroups) and interrupts each worker running it with a signal, whose
//! handler (`signals.rs`) abandons the GPU thread on that CPU thread as a fault does, if the
//! thread is in the kernel's own code; elsewhere (the runtime, a libm call) it lets it
//! run on, and the watchdog signals again a little later, until the dispatch returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::EmuError;

/// How often an expired dispatch's workers are signalled again while it has not returned.
const RESEND: Duration = Duration::from_millis(10);

/// The deadline of one dispatch, and the threads running it.
pub(super) struct Watch {
    deadline: Instant,
    expired: AtomicBool,
    threads: Mutex<Vec<libc::pthread_t>>,
}

impl Watch {
    /// Whether the deadline has passed (the dispatch must stop).
    pub(super) fn expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    /// The flag the signal handler reads.
    pub(super) fn expired_flag(&self) -> *const AtomicBool {
        &self.expired
    }

    /// The calling thread runs the dispatch until the guard drops (and may be interrupted
    /// until then, never after).
    pub(super) fn enter(&self) -> Entered<'_> {
        let me = unsafe { libc::pthread_self() };
        lock(&self.threads).push(me);
        Entered { watch: self, me }
    }

    fn interrupt(&self) {
        for &t in lock(&self.threads).iter() {
            // SAFETY: `t` is running the dispatch: it leaves `threads` (under this lock)
            // before it ends
            unsafe { super::signals::interrupt(t) };
        }
    }
}

pub(super) struct Entered<'w> {
    watch: &'w Watch,
    me: libc::pthread_t,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut threads = lock(&self.watch.threads);
        if let Some(i) = threads.iter().position(|&t| unsafe { libc::pthread_equal(t, self.me) } != 0) {
            threads.swap_remove(i);
        }
    }
}

/// A dispatch's watch, registered with the watchdog until it drops.
pub(super) struct Watched(Arc<Watch>);

impl std::ops::Deref for Watched {
    type Target = Watch;
    fn deref(&self) -> &Watch {
        &self.0
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut watches = lock(&WATCHES);
        watches.retain(|w| !Arc::ptr_eq(w, &self.0));
    }
}

static WATCHES: Mutex<Vec<Arc<Watch>>> = Mutex::new(Vec::new());
static CHANGED: Condvar = Condvar::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Watch a dispatch that must end by `deadline` (`None`: it never expires).
pub(super) fn watch(deadline: Option<Instant>) -> Result<Watched, EmuError> {
    let w = Arc::new(Watch { deadline: deadline.unwrap_or_else(Instant::now), expired: AtomicBool::new(false), threads: Mutex::new(Vec::new()) });
    if deadline.is_some() {
        start()?;
        lock(&WATCHES).push(w.clone());
        CHANGED.notify_all();
    }
    Ok(Watched(w))
}

/// Start the watchdog thread, once.
fn start() -> Result<(), EmuError> {
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    let started = STARTED.get_or_init(|| std::thread::Builder::new().name("kgemu-watchdog".into()).spawn(run).map(|_| ()).map_err(|e| e.to_string()));
    started.clone().map_err(|e| EmuError::Io(std::io::Error::other(format!("cannot start the emulator's watchdog thread (the time limit of every dispatch): {e}"))))
}

fn run() {
    let mut watches = lock(&WATCHES);
    loop {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for w in watches.iter() {
            let wake = if w.deadline <= now {
                w.expired.store(true, Ordering::Release);
                w.interrupt();
                now + RESEND
            } else {
                w.deadline
            };
            next = Some(next.map_or(wake, |n| n.min(wake)));
        }
        watches = match next {
            Some(t) => CHANGED.wait_timeout(watches, t.saturating_duration_since(now)).unwrap_or_else(|p| p.into_inner()).0,
            None => CHANGED.wait(watches).unwrap_or_else(|p| p.into_inner()),
        };
    }
}
