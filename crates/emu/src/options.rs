//! How the emulator builds and runs: [`EmuOptions`] of an [`Emulator`](crate::Emulator), the
//! process-wide defaults of its worker count and time limit, and [`LoadOptions`] of one load.

use std::path::PathBuf;
use std::time::Duration;

use crate::runtime;
#[cfg(doc)]
use crate::{DispatchStats, EmuError, Emulator, sanitizer_env};

/// Set the worker count of every dispatch whose [`EmuOptions::workers`] is 0 (automatic),
/// in this process, overriding `$KERNELGEN_EMU_WORKERS`; 0 restores the automatic count.
/// This is what `kernelgen verify/run/emu --workers N` call.
pub fn set_default_workers(n: usize) {
    runtime::set_default_workers(n)
}

/// The worker count of a dispatch whose [`EmuOptions::workers`] is 0: the count set with
/// [`set_default_workers`], else `$KERNELGEN_EMU_WORKERS`, else one per core.
pub fn default_workers() -> usize {
    runtime::default_workers()
}

/// A dispatch's worker count: `workers`, or [`default_workers`] for 0 (automatic).
pub(crate) fn workers_or_default(workers: usize) -> usize {
    if workers == 0 { runtime::default_workers() } else { workers }
}

/// The process-wide time limit set with [`set_default_timeout`], in nanoseconds (0: none).
static DEFAULT_TIMEOUT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Set the time limit of every dispatch whose [`EmuOptions::timeout`] is `None`, in this
/// process, overriding `$KERNELGEN_EMU_TIMEOUT`. This is what `kernelgen
/// verify/run/emu --timeout SECS` call.
pub fn set_default_timeout(limit: Duration) {
    let nanos = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX).max(1);
    DEFAULT_TIMEOUT.store(nanos, std::sync::atomic::Ordering::Relaxed);
}

/// The time limit of a dispatch whose [`EmuOptions::timeout`] is `None`: the one set with
/// [`set_default_timeout`], else `$KERNELGEN_EMU_TIMEOUT` (seconds, as [`parse_timeout`]
/// reads them; ignored when it does not), else 60 s.
pub fn default_timeout() -> Duration {
    static FROM_ENV: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    match DEFAULT_TIMEOUT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => *FROM_ENV.get_or_init(|| {
            let env = std::env::var("KERNELGEN_EMU_TIMEOUT").ok();
            env.and_then(|v| parse_timeout(&v).ok()).unwrap_or(Duration::from_secs(60))
        }),
        nanos => Duration::from_nanos(nanos),
    }
}

/// A time limit in seconds (`--timeout SECS`, `$KERNELGEN_EMU_TIMEOUT`): a positive number,
/// fractions allowed, at most a million.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 1e6 => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!("`{text}` is not a time limit: give a number of seconds above 0 and at most 1000000 (e.g. 60, 0.5)")),
    }
}

/// Options of an [`Emulator`]. A [`Dispatch`](crate::Dispatch) may set its own `order`, `workers`,
/// `placement` and `timeout`.
#[derive(Clone, Debug)]
pub struct EmuOptions {
    /// Where compiled objects are cached (the default: docs/emulator.md, "Build cache").
    pub cache_dir: Option<PathBuf>,
    /// Build with AddressSanitizer and UBSan (needs the runtime preloaded: [`sanitizer_env`]).
    pub sanitize: bool,
    /// Order in which fibers of a threadgroup run, and threadgroups are assigned to workers.
    pub order: RunOrder,
    /// Keep the page after each buffer `PROT_NONE` and the gap protection armed during
    /// dispatch (default true; the far guard regions stay reserved either way).
    pub guard_pages: bool,
    /// Worker threads that run the threadgroups of a dispatch; 0 (the default) means
    /// `$KERNELGEN_EMU_WORKERS` if set, else one per core. Results do not depend on it.
    pub workers: usize,
    /// Check every loaded source as Metal first (default true; docs/emulator.md, "The Metal check"). Off
    /// only for tests of the emulator itself on code that Metal would reject.
    pub metal_check: bool,
    /// Where each buffer's data sits in its pages while a kernel runs, so which accesses
    /// just outside it fault (default [`Placement::Both`]: all of them).
    pub placement: Placement,
    /// The time a dispatch may run (both runs of [`Placement::Both`] together) before it is
    /// stopped with [`EmuError::Timeout`]; `None` (the default) means [`default_timeout`].
    pub timeout: Option<Duration>,
}

impl Default for EmuOptions {
    fn default() -> Self {
        EmuOptions {
            cache_dir: None,
            sanitize: false,
            order: RunOrder::Forward,
            guard_pages: true,
            metal_check: true,
            workers: 0,
            placement: Placement::Both,
            timeout: None,
        }
    }
}

/// Where a buffer's data sits in its read-write pages during a dispatch. Page protection
/// works by whole pages (4 KiB) and a buffer's length is rarely a multiple of one: with
/// the data flush with the guard after it, the bytes before its start on its first page
/// (the *head*) cannot fault, and with it flush with the guard before it, the bytes after
/// its end on its last page (the *slack*) cannot. Those bytes hold poison either way (a
/// read returns it, a write is an [`EmuError::Corruption`] found after the threadgroup).
/// Under sanitize both are ASan-poisoned, so one run catches every access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// Both, one after the other: every dispatch with a buffer that has a head runs once
    /// end-placed on the buffers given, then once start-placed on copies of them (made
    /// before it; inputs bound read-only are moved, not copied), so every access outside a
    /// buffer, before or after, read or write, faults naming the buffer and the offset. The
    /// first run's error is reported, except a write into a head, for which the second
    /// run's fault (the thread and the line) is. Twice the time of one run.
    Both,
    /// One run, each buffer's data flush with the guard after it: every access past the
    /// end faults; one before the start faults only from the page boundary on.
    End,
    /// One run, each buffer's data flush with the guard before it: every access before the
    /// start faults; one past the end faults only from the next page on.
    Start,
}

/// Run order of the fibers of a threadgroup (in every scheduling round), and the order in
/// which the threadgroups of a grid are assigned to workers (the order they run in with one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOrder {
    /// Fibers and threadgroups in index order.
    Forward,
    /// Fibers and threadgroups in reverse index order.
    Reverse,
    /// A permutation drawn from this seed (per threadgroup for fibers).
    Shuffle(u64),
}

/// How [`Emulator::load_with`] builds a source, beyond the [`EmuOptions`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadOptions {
    /// Searched for `#include "..."` and `#include <...>` (g++ `-I`), in order, after
    /// the directory of `file_name` (for `"..."`). `<metal_*>` headers always resolve
    /// to the emulator's standard library.
    pub include_dirs: Vec<PathBuf>,
    /// Predefined macros, `-DNAME` (`None`) or `-DNAME=VALUE`, after the ones every
    /// Metal compile has (`__METAL__`, `__METAL_VERSION__` = 310); a define of the same
    /// name replaces those.
    pub defines: Vec<(String, Option<String>)>,
    /// Values of `[[function_constant(index)]]` declarations, by index, as MLX sets them
    /// when it creates a pipeline (`MTLFunctionConstantValues`). Each program is
    /// compiled with its values (a new set is a new object).
    pub function_constants: Vec<(u32, FunctionConstant)>,
}

impl LoadOptions {
    /// Options with one include directory (e.g. MLX's `include/`, for `#include "mlx/..."`).
    pub fn with_include_dir(dir: impl Into<PathBuf>) -> LoadOptions {
        LoadOptions { include_dirs: vec![dir.into()], ..LoadOptions::default() }
    }
}

/// The value of one function constant.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum FunctionConstant {
    /// For `bool` constants.
    Bool(bool),
    /// For integer constants (range-checked against the declared type), or float ones.
    Int(i64),
    /// For `float`, `half` and `bfloat` constants (rounded to the declared type).
    Float(f64),
}

impl FunctionConstant {
    /// Parses `true`/`false`, an integer (decimal or `0x` hex) or a float literal.
    pub fn parse(text: &str) -> Option<FunctionConstant> {
        let t = text.trim();
        match t {
            "true" => return Some(FunctionConstant::Bool(true)),
            "false" => return Some(FunctionConstant::Bool(false)),
            _ => {}
        }
        let (neg, digits) = match t.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, t),
        };
        if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
            let v = i64::from_str_radix(h, 16).ok()?;
            return Some(FunctionConstant::Int(if neg { -v } else { v }));
        }
        if let Ok(v) = t.parse::<i64>() {
            return Some(FunctionConstant::Int(v));
        }
        t.trim_end_matches(['f', 'F']).parse::<f64>().ok().map(FunctionConstant::Float)
    }

    /// `bool`, `integer` or `float`.
    pub fn kind(self) -> &'static str {
        match self {
            FunctionConstant::Bool(_) => "bool",
            FunctionConstant::Int(_) => "integer",
            FunctionConstant::Float(_) => "float",
        }
    }
}
