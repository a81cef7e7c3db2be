//! Standard output that survives being closed: `kernelgen list | head -1`
//! must not panic when `head` exits. A closed stdout (EPIPE) stops the
//! printing, quietly, never the work: the command finishes and exits with its
//! usual code, as if its output had been read. Any other write error is
//! reported once on stderr.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes one line (what `outln!` expands to).
pub fn line(args: fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("kernelgen: cannot write to standard output: {e}");
        }
    }
}

/// `println!` through [`line`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::out::line(format_args!($($arg)*)) };
}
pub(crate) use outln;
