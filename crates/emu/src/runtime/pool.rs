//! The process's pool of helper threads. A dispatch runs on the calling thread plus up to
//! `workers - 1` idle helpers (new ones are started while fewer than [`MAX_HELPERS`]
//! exist; when none is free the dispatch runs on fewer workers, which changes no result).

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
