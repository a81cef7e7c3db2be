//! What went wrong in a threadgroup, in words: the sanitizers' callbacks that record an
//! error, and the `EmuError` a recorded fault, report, abort or wait becomes (with the
//! `.metal` line from the object's line tables).

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::Path;
use std::sync::Once;

use crate::sanitize::AsanFns;
use crate::{EmuError, Waiter};

use super::dispatch::Ctx;
use super::insn;
use super::object::op_name;
use super::sched::{Sched, State, cur_sched};
use super::switch::STACK_GUARD;
use super::tg_memory::{in_arena, locate};

/// A sanitizer's report, recorded by its callback for the scheduler to turn into an error.
pub(super) struct SanReport {
    pub(super) what: String,
    file_line: Option<(String, u32)>,
    pub(super) pc: usize,
    pub(super) addr: Option<(usize, u64, bool)>,
    pub(super) fiber: usize,
}

impl SanReport {
    /// Undefined behaviour the runtime found in fiber `fiber`, at `line` of the source.
    pub(super) fn at_line(what: String, line: u32, fiber: usize) -> SanReport {
        SanReport { what, file_line: Some((String::new(), line)), pc: 0, addr: None, fiber }
    }
}

pub(super) unsafe extern "C" fn rt_asan_note(addr: usize, size: u64, is_write: u32, pc: usize) {
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
pub(super) unsafe extern "C" fn rt_ubsan_note(
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

pub(super) fn register_asan_callback(a: &AsanFns) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Some(set) = a.set_report_callback {
            unsafe { set(Some(asan_report_callback)) };
        }
    });
}

pub(super) unsafe fn waiter_of(s: *mut Sched, file_name: &str, i: usize) -> Waiter {
    unsafe {
        let f = &*(*s).fibers.as_ptr().add(i);
        let at = match f.state {
            State::Coll => op_name(f.op).to_string(),
            State::Warp => super::warp::describe(s, i),
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
        if in_arena((*s).arena, addr) {
            return match locate(&(*s).site_list, (*s).arena, addr) {
                Some((k, offset)) => (*s).site_list[k].describe(offset, &ctx.a.file_name),
                None => "threadgroup memory outside every declared array".into(),
            };
        }
        for (lo, _) in &(*s).stack_ranges {
            if addr >= lo - STACK_GUARD && addr < *lo {
                return "the guard below the GPU thread's stack (stack overflow: too much thread memory)".into();
            }
        }
        if addr < 65536 { "a null pointer".to_string() } else { "memory outside every buffer".to_string() }
    }
}

pub(super) unsafe fn fault_error(s: *mut Sched, ctx: &Ctx<'_>, tgid: [u32; 3]) -> EmuError {
    unsafe {
        let pos = |fiber: usize| {
            let p = (*s).infos[fiber].thread_position_in_grid;
            [p[0], p[1], p[2]]
        };
        if let Some(f) = (*s).fault {
            let what = match f.sig {
                libc::SIGSEGV | libc::SIGBUS => {
                    let kind = match f.write {
                        Some(true) => "write",
                        Some(false) => "read",
                        None => "access",
                    };
                    let place = match (f.addr, f.refused) {
                        (Some(a), true) if !insn::canonical(a) => format!("at {a:#x}, a non-canonical address (far outside any buffer)"),
                        (Some(a), true) => format!(
                            "at {a:#x}, {}: refused by the processor (a general-protection fault: an aligned vector access of a misaligned address)",
                            describe_addr(s, ctx, a)
                        ),
                        (None, true) => "at a non-canonical address (far outside any buffer) or a misaligned vector access: \
                                         the processor gives no address for it (a general-protection fault)"
                            .to_string(),
                        (Some(a), false) => format!("at {a:#x}, {}", describe_addr(s, ctx, a)),
                        (None, false) => "at an unknown address".to_string(),
                    };
                    format!("invalid {kind} {place} ({})", sig_name(f.sig))
                }
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
                // an empty file: the source's own (`SanReport::at_line`)
                Some((f, l)) if f.is_empty() || f.ends_with(&ctx.a.file_name) || *f == ctx.a.file_name => Some((ctx.a.file_name.clone(), *l)),
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
pub(super) fn metal_line(so: &Path, pc: usize, file_name: &str) -> Option<(String, u32)> {
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
    let out = crate::compile::tool_command("addr2line")
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

