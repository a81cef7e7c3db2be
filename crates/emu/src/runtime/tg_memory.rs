//! Threadgroup memory: each `threadgroup` array is allocated on first use in the worker's
//! arena, filled with the poison byte and followed by a canary red zone checked after the
//! threadgroup ran.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};

use crate::{EmuError, sanitize};

use super::sched::{abandon_fiber, cur_sched};

/// Apple's threadgroup memory limit (a CUDA launch has its own: `Sched::tg_limit`).
pub(super) const TG_LIMIT: usize = kernelgen::contract::limits::MAX_THREADGROUP_MEMORY_BYTES as usize;
/// Canary bytes after each threadgroup array.
pub(super) const TG_REDZONE: usize = 64;
/// A worker's threadgroup memory: every array, its red zone and alignment.
pub(super) const TG_ARENA: usize = 256 * 1024;
/// The red zones' byte.
pub(super) const CANARY: u8 = 0xA5;

/// A threadgroup array: where it lies in the arena, its size, and its declaration.
pub(super) struct TgSite {
    pub(super) offset: usize,
    pub(super) size: usize,
    pub(super) line: u32,
    pub(super) name: String,
}

pub(super) unsafe extern "C" fn rt_tg_alloc(site: u32, size: u64, align: u64, line: u32, name: *const c_char) -> *mut c_void {
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
        let (limit, whose) = (*s).tg_limit;
        if (*s).tg_data + size > limit || offset + size + TG_REDZONE > TG_ARENA {
            (*s).stop = true;
            (*s).abort = Some((
                format!("threadgroup memory exceeds {whose}: `{name}` needs {size} bytes with {} already declared", (*s).tg_data),
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

/// A worker thread's threadgroup memory (kept for the thread's life).
pub(super) struct Arena {
    pub(super) ptr: *mut u8,
}
impl Arena {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(TG_ARENA, 64).unwrap()
    }
    pub(super) fn new() -> Result<Arena, EmuError> {
        let ptr = unsafe { std::alloc::alloc(Self::layout()) };
        if ptr.is_null() {
            return Err(EmuError::Memory { what: format!("cannot allocate the {TG_ARENA} bytes of a worker's threadgroup memory") });
        }
        Ok(Arena { ptr })
    }
}
impl Drop for Arena {
    fn drop(&mut self) {
        sanitize::asan_unpoison(self.ptr as usize, TG_ARENA);
        unsafe { std::alloc::dealloc(self.ptr, Self::layout()) };
    }
}

thread_local! {
    pub(super) static ARENA: RefCell<Option<Arena>> = const { RefCell::new(None) };
}

