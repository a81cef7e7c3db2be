//! [`EmuError`], everything a load or a dispatch can report, each with a one-paragraph
//! `Display`.

use std::fmt;
use std::time::Duration;

use crate::MetalProblem;
#[cfg(doc)]
use crate::{DeviceBuffer, EmuOptions};

/// One waiting GPU thread, as reported by barrier and divergence errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// The waiting thread's `thread_position_in_grid`.
    pub thread_position_in_grid: [u32; 3],
    /// `threadgroup_barrier`, `simdgroup_barrier`, `simd_sum`, ...
    pub at: String,
    /// The `.metal` file and line it waits at, when known.
    pub metal_line: Option<(String, u32)>,
}

impl fmt::Display for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "thread {} waits at {}", ids(self.thread_position_in_grid), self.at)?;
        if let Some((file, line)) = &self.metal_line {
            write!(f, " ({file}:{line})")?;
        }
        Ok(())
    }
}

fn ids(v: [u32; 3]) -> String {
    format!("({}, {}, {})", v[0], v[1], v[2])
}

fn line_of(l: &Option<(String, u32)>) -> String {
    match l {
        Some((f, n)) => format!("at {f}:{n}"),
        None => "at an unknown line".into(),
    }
}

/// Everything that can go wrong. `Display` gives a one-paragraph report.
#[derive(Debug)]
#[non_exhaustive]
pub enum EmuError {
    /// The source did not prepare or compile; `message` has g++'s diagnostics (already
    /// pointing at `file` lines).
    Compile {
        /// The `.metal` file name given to the load.
        file: String,
        /// g++'s diagnostics, or why the source could not be prepared.
        message: String,
    },
    /// The source is not valid Metal: the Metal check found these problems (each at its
    /// file, line and column) before anything was compiled.
    InvalidMetal {
        /// The `.metal` file name given to the load.
        file: String,
        /// Every problem found, in source order.
        problems: Vec<MetalProblem>,
    },
    /// The compiled object of `file` reaches outside the emulator's runtime (a symbol of libc
    /// or another library, a constructor, ...): refused before it was loaded, so none of it
    /// ran. The Metal check refuses such sources; this is what a source that got past it meets.
    RefusedObject {
        /// The `.metal` file name given to the load.
        file: String,
        /// Each reason, e.g. "it refers to `system`, outside the emulator's runtime ...".
        reasons: Vec<String>,
    },
    /// The Metal check cannot run (no clang: the message says what to install), or cannot
    /// check this source (one of its limits: the source's size, its nesting, the time clang
    /// may take): nothing is known about the source, and nothing was compiled.
    MetalCheck {
        /// What is missing and how to install it, or the limit the source met.
        message: String,
    },
    /// A GPU thread faulted (guard region, poisoned gap, read-only input, sanitizer report, trap).
    Fault {
        /// The kernel dispatched.
        kernel: String,
        /// What faulted: the access, and the buffer and offset when it hit a guard region.
        what: String,
        /// The `.metal` file and line of the faulting access, when known.
        metal_line: Option<(String, u32)>,
        /// The faulting thread.
        thread_position_in_grid: [u32; 3],
        /// Its threadgroup.
        threadgroup_position_in_grid: [u32; 3],
    },
    /// Live threads of a threadgroup wait at different barriers.
    Barrier {
        /// The kernel dispatched.
        kernel: String,
        /// The threadgroup concerned.
        threadgroup_position_in_grid: [u32; 3],
        /// One waiting thread.
        first: Box<Waiter>,
        /// A thread waiting at another barrier.
        second: Box<Waiter>,
    },
    /// Lanes of one SIMD-group wait at different collectives (or a collective and a barrier).
    Divergence {
        /// The kernel dispatched.
        kernel: String,
        /// The threadgroup concerned.
        threadgroup_position_in_grid: [u32; 3],
        /// The SIMD-group's index in the threadgroup.
        simdgroup: u32,
        /// One waiting lane.
        first: Box<Waiter>,
        /// A lane waiting elsewhere.
        second: Box<Waiter>,
    },
    /// Memory outside what a threadgroup or a buffer owns was found overwritten after a
    /// threadgroup ran (a threadgroup array's redzone, or a buffer's poisoned gap).
    Corruption {
        /// The kernel dispatched.
        kernel: String,
        /// What was overwritten.
        what: String,
        /// The `.metal` file and line concerned, when known.
        metal_line: Option<(String, u32)>,
        /// The threadgroup after which it was found.
        threadgroup_position_in_grid: [u32; 3],
    },
    /// Bad dispatch: unknown kernel, bad grid or threadgroup, wrong buffer count, limits.
    Launch {
        /// The kernel named in the dispatch.
        kernel: String,
        /// What is wrong with the dispatch.
        message: String,
    },
    /// A dispatch ran past its time limit ([`EmuOptions::timeout`]) and was stopped: the
    /// GPU threads on the CPU abandoned, as at a fault; the emulator stays usable.
    Timeout {
        /// The kernel dispatched.
        kernel: String,
        /// The limit.
        limit: Duration,
        /// The threadgroups that were running when it was stopped.
        threadgroups: Vec<[u32; 3]>,
        /// How many threadgroups had finished, of `total`.
        finished: u64,
        /// The dispatch's threadgroups.
        total: u64,
    },
    /// Memory a dispatch needs cannot be had: a buffer, fiber stacks, threadgroup memory, a
    /// signal stack (the address space or the memory is exhausted, or a limit such as
    /// `ulimit -v` is reached). Nothing ran, or the dispatch stopped; the emulator stays usable.
    Memory {
        /// What could not be mapped, and the system's reason.
        what: String,
    },
    /// Sanitize mode requested but the sanitizer runtime is not loaded in this process.
    Sanitizer {
        /// What is missing and how to start the process.
        message: String,
    },
    /// A file or process operation failed (the message says which and why).
    Io(std::io::Error),
    /// The emulator's fiber runtime has not been ported to this target.
    Unsupported {
        /// The target this build is for.
        target: String,
    },
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmuError::Compile { file, message } => write!(f, "{file} does not compile for the MSL emulator:\n{message}"),
            EmuError::InvalidMetal { file, problems } => {
                let n = problems.len();
                write!(f, "{file} is not valid Metal ({n} problem{} Apple's compiler would reject):", if n == 1 { "" } else { "s" })?;
                for p in problems {
                    write!(f, "\n{p}")?;
                }
                Ok(())
            }
            EmuError::RefusedObject { file, reasons } => write!(
                f,
                "the compiled kernel of {file} is refused before it is loaded (none of it ran): {}",
                reasons.join("; ")
            ),
            EmuError::MetalCheck { message } => write!(f, "{message} (the emulator checks every source as Metal first)"),
            EmuError::Fault { kernel, what, metal_line, thread_position_in_grid, threadgroup_position_in_grid } => write!(
                f,
                "kernel `{kernel}` faulted {}: {what}; GPU thread_position_in_grid {}, threadgroup_position_in_grid {}",
                line_of(metal_line),
                ids(*thread_position_in_grid),
                ids(*threadgroup_position_in_grid)
            ),
            EmuError::Barrier { kernel, threadgroup_position_in_grid, first, second } => write!(
                f,
                "kernel `{kernel}`: barrier mismatch in threadgroup {}: {first}, while {second}; every live thread of a threadgroup must reach the same barrier",
                ids(*threadgroup_position_in_grid)
            ),
            EmuError::Divergence { kernel, threadgroup_position_in_grid, simdgroup, first, second } => write!(
                f,
                "kernel `{kernel}`: divergent SIMD-group {simdgroup} in threadgroup {}: {first}, while {second}; all live lanes of a SIMD-group must reach the same collective",
                ids(*threadgroup_position_in_grid)
            ),
            EmuError::Corruption { kernel, what, metal_line, threadgroup_position_in_grid } => write!(
                f,
                "kernel `{kernel}` corrupted memory in threadgroup {} ({}): {what}",
                ids(*threadgroup_position_in_grid),
                line_of(metal_line).trim_start_matches("at ")
            ),
            EmuError::Launch { kernel, message } => write!(f, "cannot dispatch kernel `{kernel}`: {message}"),
            EmuError::Timeout { kernel, limit, threadgroups, finished, total } => {
                write!(f, "kernel `{kernel}` ran past the time limit of {} s and was stopped: ", limit.as_secs_f64())?;
                const SHOWN: usize = 8;
                match threadgroups.len() {
                    0 => write!(f, "no threadgroup was running at that moment")?,
                    n => {
                        let list: Vec<String> = threadgroups.iter().take(SHOWN).map(|t| ids(*t)).collect();
                        write!(f, "threadgroup{} {}", if n == 1 { "" } else { "s" }, list.join(", "))?;
                        if n > SHOWN {
                            write!(f, " and {} more", n - SHOWN)?;
                        }
                        write!(f, " {} still running", if n == 1 { "was" } else { "were" })?;
                    }
                }
                write!(
                    f,
                    " ({finished} of {total} had finished). A kernel that never ends hangs: an endless loop, or a wait on memory \
                     that no other thread changes while it spins (a GPU thread runs here until it waits at a barrier or a \
                     collective). If it only needs longer, raise the limit (--timeout SECS, $KERNELGEN_EMU_TIMEOUT, EmuOptions::timeout)."
                )
            }
            EmuError::Memory { what } => write!(f, "MSL emulator: out of memory: {what}"),
            EmuError::Sanitizer { message } => write!(f, "sanitize mode unavailable: {message}"),
            EmuError::Io(e) => write!(f, "MSL emulator: {e}"),
            EmuError::Unsupported { target } => write!(
                f,
                "the MSL emulator runs on x86-64 Linux (with g++); this is {target}: run emulator commands on such a machine or in CI"
            ),
        }
    }
}

impl std::error::Error for EmuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EmuError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for EmuError {
    fn from(e: std::io::Error) -> Self {
        EmuError::Io(e)
    }
}
