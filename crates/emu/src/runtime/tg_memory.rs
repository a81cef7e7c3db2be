//! Threadgroup memory. Each worker has an arena, a slice of one region the process reserves once
//! (`PROT_NONE`): a guard, then one room per threadgroup array, each room its read-write data
//! (256 KiB, so that any one array fits: Apple's 32 KiB, a CUDA block's 227 KiB) and a guard as
//! large after it. An array
//! lies flush with a guard, as buffers do ([`Placement`](crate::Placement)): its end (rounded up
//! to 16 bytes) against the guard after its room, or, in a start-placed run, its start against the
//! guard before it; so a read or a write just past it faults, naming the array. The bytes on its
//! other side (the 64 before its start, or the 64 after its end, and the rounding's slack) hold
//! canaries, checked at each threadgroup barrier and after the threadgroup. An array is filled
//! with the poison byte at its first use in each threadgroup. One region for every worker lets
//! the threadgroup-memory check's hooks (`racecheck.rs`) tell a threadgroup address with one
//! compare.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::ops::Range;
use std::sync::{Mutex, OnceLock};

use crate::{EmuError, sanitize};

use super::sched::{Sched, abandon_fiber, cur_sched};
use super::warp::MAX_SHARED;

/// Apple's threadgroup memory limit (a CUDA launch has its own: `Sched::tg_limit`).
pub(super) const TG_LIMIT: usize = kernelgen::contract::limits::MAX_THREADGROUP_MEMORY_BYTES as usize;
/// A room's data (any one array fits: Apple's limit, or a CUDA block's largest shared memory,
/// rounded up to 64 KiB pages), and the guard after it.
const ROOM: usize = (if TG_LIMIT > MAX_SHARED { TG_LIMIT } else { MAX_SHARED }).next_multiple_of(64 * 1024);
const ROOM_SPAN: usize = 2 * ROOM;
/// Threadgroup arrays one threadgroup may use (distinct declarations reached).
pub(super) const MAX_ARRAYS: usize = 128;
/// A worker's arena: a guard, then its rooms.
const ARENA_SPAN: usize = ROOM + MAX_ARRAYS * ROOM_SPAN;
/// Arenas in the region: the workers that may run threadgroups at once (the pool's helpers and
/// every thread that dispatches).
const ARENAS: usize = 512;
/// Canary bytes on an array's unguarded side.
pub(super) const TG_REDZONE: usize = 64;
/// The canaries' byte.
pub(super) const CANARY: u8 = 0xA5;
/// Arrays start 16-byte aligned at least (what a vector view of one needs).
const ARRAY_ALIGN: usize = 16;

const _: () = assert!(ROOM % 4096 == 0 && ROOM >= MAX_SHARED && ROOM >= TG_LIMIT, "rooms are whole pages, and any one array fits");

/// A threadgroup array of the running threadgroup: where it lies, and its declaration.
pub(super) struct TgSite {
    /// The address of its first byte.
    pub(super) start: usize,
    pub(super) size: usize,
    /// The size of its elements (for the element of a byte, in reports).
    pub(super) element: usize,
    pub(super) line: u32,
    pub(super) name: String,
    /// The canary bytes (addresses) before it and after it.
    canaries: [Range<usize>; 2],
}

impl TgSite {
    /// The offset from its start of its first canary byte that was overwritten.
    fn overwritten(&self) -> Option<isize> {
        self.canaries.iter().find_map(|c| {
            let bytes = unsafe { std::slice::from_raw_parts(c.start as *const u8, c.len()) };
            bytes.iter().position(|&b| b != CANARY).map(|k| (c.start + k) as isize - self.start as isize)
        })
    }

    /// `byte N of threadgroup array `a`...`: where `offset` (from its start) lies, in words.
    pub(super) fn describe(&self, offset: isize, file_name: &str) -> String {
        let (name, size, line) = (&self.name, self.size, self.line);
        if offset < 0 {
            format!("{} bytes before the start of threadgroup array `{name}` ({size} bytes, declared at {file_name}:{line})", -offset)
        } else if offset as usize >= size {
            format!("byte {offset} of threadgroup array `{name}`, past its end ({size} bytes, declared at {file_name}:{line})")
        } else {
            format!("threadgroup array `{name}` at byte {offset}")
        }
    }
}

/// The process's threadgroup memory: every worker's arena.
pub(super) struct Region {
    base: usize,
    /// Arenas no worker holds, and how many were ever handed out.
    free: Mutex<(Vec<usize>, usize)>,
}

impl Region {
    pub(super) fn base(&self) -> usize {
        self.base
    }

    pub(super) fn span(&self) -> usize {
        ARENAS * ARENA_SPAN
    }
}

/// The region, reserved at the first use.
pub(super) fn region() -> Result<&'static Region, EmuError> {
    static REGION: OnceLock<Result<Region, String>> = OnceLock::new();
    let r = REGION.get_or_init(|| {
        let len = ARENAS * ARENA_SPAN;
        // Reserved address space: only the rooms of the arenas in use are made read-write.
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if map == libc::MAP_FAILED {
            return Err(format!("cannot reserve the {len} bytes of address space of threadgroup memory: {}", std::io::Error::last_os_error()));
        }
        Ok(Region { base: map as usize, free: Mutex::new((Vec::new(), 0)) })
    });
    r.as_ref().map_err(|what| EmuError::Memory { what: what.clone() })
}

/// A worker thread's threadgroup memory (kept for the thread's life).
pub(super) struct Arena {
    pub(super) ptr: *mut u8,
    index: usize,
}

impl Arena {
    pub(super) fn new() -> Result<Arena, EmuError> {
        let r = region()?;
        let index = {
            let mut free = r.free.lock().unwrap_or_else(|p| p.into_inner());
            match free.0.pop() {
                Some(i) => i,
                None if free.1 < ARENAS => {
                    free.1 += 1;
                    free.1 - 1
                }
                None => {
                    return Err(EmuError::Memory { what: format!("more than {ARENAS} threads run threadgroups at once (each needs its threadgroup memory)") });
                }
            }
        };
        let arena = Arena { ptr: (r.base + index * ARENA_SPAN) as *mut u8, index };
        for k in 0..MAX_ARRAYS {
            let room = arena.room(k) as *mut c_void;
            if unsafe { libc::mprotect(room, ROOM, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
                let e = std::io::Error::last_os_error();
                return Err(EmuError::Memory { what: format!("cannot map a worker's threadgroup memory: {e}") });
            }
        }
        Ok(arena)
    }

    /// The data of room `k`.
    fn room(&self, k: usize) -> *mut u8 {
        unsafe { self.ptr.add(ROOM + k * ROOM_SPAN) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for k in 0..MAX_ARRAYS {
            sanitize::asan_unpoison(self.room(k) as usize, ROOM);
        }
        unsafe {
            libc::madvise(self.ptr as *mut c_void, ARENA_SPAN, libc::MADV_DONTNEED);
            libc::mprotect(self.ptr as *mut c_void, ARENA_SPAN, libc::PROT_NONE);
        }
        if let Ok(r) = region() {
            r.free.lock().unwrap_or_else(|p| p.into_inner()).0.push(self.index);
        }
    }
}

thread_local! {
    pub(super) static ARENA: RefCell<Option<Arena>> = const { RefCell::new(None) };
}

/// Whether `addr` lies in the arena at `arena` (its rooms or its guards).
pub(super) fn in_arena(arena: *mut u8, addr: usize) -> bool {
    (arena as usize..arena as usize + ARENA_SPAN).contains(&addr)
}

/// The array of the running threadgroup an address of its arena belongs to, and the address's
/// offset from that array's start: the array of its room, or of the guard's side it lies on
/// (the nearer array: a guard lies past one room's array and before the next one's).
pub(super) fn locate(sites: &[TgSite], arena: *mut u8, addr: usize) -> Option<(usize, isize)> {
    if !in_arena(arena, addr) || sites.is_empty() {
        return None;
    }
    let rel = (addr as isize) - (arena as isize + ROOM as isize);
    let room = rel.div_euclid(ROOM_SPAN as isize);
    let offset = |k: usize| addr as isize - sites[k].start as isize;
    if rel >= 0 && rel.rem_euclid(ROOM_SPAN as isize) < ROOM as isize {
        return ((room as usize) < sites.len()).then(|| (room as usize, offset(room as usize)));
    }
    // a guard: after room `room` (the first one is before room 0)
    let past = usize::try_from(room).ok().filter(|&k| k < sites.len()).map(|k| (k, offset(k)));
    let before = usize::try_from(room + 1).ok().filter(|&k| k < sites.len()).map(|k| (k, offset(k)));
    match (past, before) {
        (Some(p), Some(b)) => Some(if p.1 - sites[p.0].size as isize <= -b.1 { p } else { b }),
        (p, b) => p.or(b),
    }
}

/// The first array of the running threadgroup whose canaries were overwritten: its index, and
/// the offset of the byte from its start.
pub(super) unsafe fn overwritten(s: *mut Sched) -> Option<(usize, isize)> {
    unsafe { (*s).site_list.iter().enumerate().find_map(|(k, site)| site.overwritten().map(|o| (k, o))) }
}

/// After a threadgroup: its canaries no longer ASan-poisoned (the next threadgroup lays its
/// arrays out again).
pub(super) unsafe fn release_sites(s: *mut Sched) {
    unsafe {
        if (*s).asan.is_some() {
            for site in &(*s).site_list {
                for c in &site.canaries {
                    sanitize::asan_unpoison(c.start, c.len());
                }
            }
        }
    }
}

pub(super) unsafe extern "C" fn rt_tg_alloc(site: u32, size: u64, align: u64, element: u64, line: u32, name: *const c_char) -> *mut c_void {
    unsafe {
        let s = cur_sched();
        let site = site as usize;
        if let Some(Some(k)) = (*s).sites.get(site) {
            return (*s).site_list[*k].start as *mut c_void;
        }
        let name = if name.is_null() { String::from("?") } else { CStr::from_ptr(name).to_string_lossy().into_owned() };
        let size = size as usize;
        let k = (*s).site_list.len();
        let refuse = |message: String| -> ! {
            (*s).stop = true;
            (*s).abort = Some((message, line, (*s).cur));
            abandon_fiber(s)
        };
        let (limit, whose) = (*s).tg_limit;
        if (*s).tg_data + size > limit {
            refuse(format!("threadgroup memory exceeds {whose}: `{name}` needs {size} bytes with {} already declared", (*s).tg_data));
        }
        if k == MAX_ARRAYS {
            refuse(format!("`{name}` is the threadgroup's {}th threadgroup array; the emulator runs at most {MAX_ARRAYS}", k + 1));
        }
        let room = (*s).arena as usize + ROOM + k * ROOM_SPAN;
        let align = (align as usize).max(ARRAY_ALIGN);
        let (start, canaries) = if (*s).tg_at_start {
            let end = room + size;
            (room, [room..room, end..(end.next_multiple_of(ARRAY_ALIGN) + TG_REDZONE).min(room + ROOM)])
        } else {
            let start = (room + ROOM - size) & !(align - 1);
            (start, [start.saturating_sub(TG_REDZONE).max(room)..start, start + size..room + ROOM])
        };
        std::ptr::write_bytes(start as *mut u8, (*s).tg_poison, size);
        for c in &canaries {
            std::ptr::write_bytes(c.start as *mut u8, CANARY, c.len());
            if (*s).asan.is_some() {
                sanitize::asan_poison(c.start, c.len());
            }
        }
        (*s).tg_data += size;
        if (*s).sites.len() <= site {
            (*s).sites.resize(site + 1, None);
        }
        (*s).sites[site] = Some(k);
        (*s).site_list.push(TgSite { start, size, element: (element as usize).max(1), line, name, canaries });
        if (*s).check.is_some() {
            super::racecheck::array_allocated(s, k);
        }
        start as *mut c_void
    }
}

/// A `[[threadgroup(index)]]` kernel parameter: a threadgroup array of the dispatch's size for
/// `index` (the launch checked that it gave one for every index the kernel declares).
pub(super) unsafe extern "C" fn rt_tg_param(index: u32, site: u32, align: u64, element: u64, line: u32, name: *const c_char) -> *mut c_void {
    unsafe {
        let s = cur_sched();
        let size = (*s).tg_params.get(index as usize).copied().unwrap_or(0);
        rt_tg_alloc(site, size as u64, align, element, line, name)
    }
}
