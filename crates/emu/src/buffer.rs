//! Guarded device buffers.

use std::ops::Range;

use super::sanitize;
use crate::EmuError;

/// The poison byte: gaps, slack and fresh threadgroup memory are filled with it
/// (`0xFFFFFFFF` reads as a NaN float, `0xFFFF` as a NaN half/bfloat).
pub const POISON: u8 = 0xFF;

fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 { p as usize } else { 4096 }
    })
}

/// Bytes of `PROT_NONE` address space reserved after every buffer's data: 2^32 elements of
/// 16 bytes (a `uint` index, however it wrapped, times the largest vector element, `float4`),
/// so any access `a[i]` with a 32-bit index past the end faults in the buffer's own guard.
pub const GUARD_AFTER: usize = 64 << 30;
/// Bytes of `PROT_NONE` address space reserved before every buffer's data: 2^31 elements of
/// 16 bytes (the most negative `int` index times a `float4`).
pub const GUARD_BEFORE: usize = 32 << 30;

/// A guarded allocation bound to a `[[buffer(i)]]`.
///
/// Layout: `[guard: GUARD_BEFORE][head][data: len bytes][slack][guard: GUARD_AFTER]`. The
/// guards are `PROT_NONE` address space (reserved, never backed by memory), so every access
/// up to 32 GiB before the data or 64 GiB past its end faults, and the fault names this
/// buffer and the offset: that covers every `a[i]` with a 32-bit index (`uint` wrapped
/// around, or a negative `int`) on elements up to 16 bytes. If the address space cannot hold
/// that much (more than ~1300 buffers alive at once), the guards shrink, down to one page;
/// a buffer that does not fit even so is an [`EmuError::Memory`] (from the `try_`
/// constructors, which every launch uses; the others panic with it).
///
/// The data is placed so that its end is flush with the trailing guard, so reading one
/// element past the end faults. The start of the data must also be aligned (Metal buffers
/// are): the start is aligned to `align` bytes and the `slack` between the data's end and the
/// guard is `(-len) mod align` bytes. The *head*, between the start of the data's first page
/// and the data, is less than a page (none when `len + slack` is a multiple of the page
/// size): page protection cannot cover it, so it is filled with poison, ASan-poisoned under
/// sanitize, and checked after every threadgroup (a write there is an
/// [`crate::EmuError::Corruption`] naming the buffer and the negative offset). A dispatch
/// therefore also runs with the data flush with the leading guard (moved, or on a copy; see
/// [`crate::Placement`]), where an access just before the start faults; outside a dispatch
/// the data is always end-placed. The default
/// alignment, used by [`DeviceBuffer::zeroed`] and [`DeviceBuffer::from_bytes`], is the
/// largest power of two dividing `len`, capped at 16: every element type whose size divides
/// `len` is then naturally aligned *and* the end is flush (slack 0). A packed byte buffer that
/// the kernel reads as wider words (an expert slot read as `uint32_t`) should use
/// [`DeviceBuffer::zeroed_aligned`] with the alignment the kernel relies on; slack bytes are
/// filled with poison (and ASan-poisoned under sanitize) and checked after every threadgroup,
/// so a write there is still caught.
///
/// [`DeviceBuffer::set_regions`] declares the regions of a packed buffer; every byte
/// outside them is a gap: whole pages of a gap are made `PROT_NONE` while a dispatch runs
/// (a read or write there faults with the gap named), the other gap bytes are filled with
/// the poison byte, ASan-poisoned under sanitize, and checked for writes after every
/// threadgroup. `set_regions` overwrites gap bytes with poison, and every dispatch those outside
/// the protected pages.
///
/// A dropped buffer of 256 KiB to 32 MiB leaves its mapping for the next buffer of the same
/// page count (at most 16 mappings, 64 MiB, wait), which starts as a fresh one would.
pub struct DeviceBuffer {
    map: *mut u8,
    map_len: usize,
    /// The read-write pages: `[head][data][slack]`.
    rw: *mut u8,
    rw_len: usize,
    data: *mut u8,
    len: usize,
    align: usize,
    gaps: Vec<Range<usize>>,
    regions: Vec<Range<usize>>,
    armed: Option<Armed>,
    /// Dispatches that bind this buffer read-only right now (see `arm_shared`).
    shared: std::sync::Mutex<usize>,
}

struct Armed {
    protected: Vec<Range<usize>>, // page ranges (absolute addresses) made PROT_NONE
    guard_opened: bool,
    read_only: bool,
    asan: Vec<Range<usize>>, // absolute ranges ASan-poisoned
}

unsafe impl Send for DeviceBuffer {}
unsafe impl Sync for DeviceBuffer {}

fn default_align(len: usize) -> usize {
    if len == 0 { 16 } else { (1usize << len.trailing_zeros()).min(16) }
}

/// Reserve `before + rw + after` bytes of `PROT_NONE` address space and make the middle
/// `rw` bytes read-write; halve the guards until the address space has room. Reserved
/// `PROT_NONE` space costs no memory and is not charged against overcommit. `len` (the
/// buffer's) is for the error.
fn reserve(rw_len: usize, len: usize) -> Result<(*mut u8, usize, *mut u8), EmuError> {
    let page = page_size();
    let (mut before, mut after) = (GUARD_BEFORE, GUARD_AFTER);
    let fail = |e: std::io::Error| EmuError::Memory { what: format!("cannot map a {len}-byte buffer: {e}") };
    loop {
        let map_len = before.checked_add(rw_len).and_then(|n| n.checked_add(after)).ok_or_else(|| fail(std::io::ErrorKind::OutOfMemory.into()))?;
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_NONE,
                // not MAP_NORESERVE: only the read-write pages are charged (by mprotect),
                // so a buffer larger than memory fails here rather than at first touch
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map != libc::MAP_FAILED {
            let map = map as *mut u8;
            let rw = unsafe { map.add(before) };
            if rw_len > 0 && unsafe { libc::mprotect(rw as *mut libc::c_void, rw_len, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
                let e = std::io::Error::last_os_error();
                unsafe { libc::munmap(map as *mut libc::c_void, map_len) };
                return Err(fail(e));
            }
            return Ok((map, map_len, rw));
        }
        if before <= page && after <= page {
            return Err(fail(std::io::Error::last_os_error()));
        }
        before = (before / 2).max(page);
        after = (after / 2).max(page);
    }
}

/// A released buffer's address space, kept to serve the next buffer of the same size: its
/// pages are already faulted in (a fresh 19 MB expert slot costs 4,600 page faults at each
/// launch, serial work before any threadgroup runs) and its guards already reserved.
struct Mapping {
    map: *mut u8,
    map_len: usize,
    rw: *mut u8,
    rw_len: usize,
}

// SAFETY: a mapping is plain address space, owned by whoever holds the entry.
unsafe impl Send for Mapping {}

impl Mapping {
    fn unmap(self) {
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// Whether a mapping of `rw_len` read-write bytes is kept for reuse.
fn reused(rw_len: usize) -> bool {
    (REUSE_MIN_BYTES..=REUSE_MAX_BYTES).contains(&rw_len)
}

/// Buffers whose read-write part is this size or more are kept for reuse (smaller ones cost
/// few page faults)...
const REUSE_MIN_BYTES: usize = 256 << 10;
/// ...and at most this size (a head's 635 MB of weights are not held after its launch).
const REUSE_MAX_BYTES: usize = 32 << 20;
/// At most this much memory, and this many mappings, wait for reuse; the oldest go first.
const REUSE_IDLE_BYTES: usize = 64 << 20;
const REUSE_IDLE_COUNT: usize = 16;

static REUSABLE: std::sync::Mutex<Vec<Mapping>> = std::sync::Mutex::new(Vec::new());

fn reusable() -> std::sync::MutexGuard<'static, Vec<Mapping>> {
    REUSABLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The most recently released mapping of exactly `rw_len` read-write bytes, if one waits.
fn take_reusable(rw_len: usize) -> Option<Mapping> {
    if !reused(rw_len) {
        return None;
    }
    let mut idle = reusable();
    let i = idle.iter().rposition(|m| m.rw_len == rw_len)?;
    Some(idle.remove(i))
}

/// Keep `m` for reuse (its read-write part read-write, its guards `PROT_NONE`, as
/// [`reserve`] made it), or unmap it; the oldest idle mappings are unmapped to make room.
fn release(m: Mapping) {
    if !reused(m.rw_len) {
        return m.unmap();
    }
    let evicted: Vec<Mapping> = {
        let mut idle = reusable();
        idle.push(m);
        let mut n = 0;
        let mut bytes: usize = idle.iter().map(|m| m.rw_len).sum();
        while idle.len() - n > REUSE_IDLE_COUNT || bytes > REUSE_IDLE_BYTES {
            bytes -= idle[n].rw_len;
            n += 1;
        }
        idle.drain(..n).collect()
    };
    evicted.into_iter().for_each(Mapping::unmap);
}

/// The index of the first byte of `b` that is not [`POISON`] (whole 16-byte words first).
fn first_non_poison(b: &[u8]) -> Option<usize> {
    let word = u128::from_ne_bytes([POISON; 16]);
    let chunks = b.chunks_exact(16);
    let tail = chunks.remainder().len();
    let clean = chunks.fold(true, |ok, c| ok & (u128::from_ne_bytes(c.try_into().unwrap()) == word));
    if clean && b[b.len() - tail..].iter().all(|&c| c == POISON) {
        return None;
    }
    b.iter().position(|&c| c != POISON)
}

/// Below this many bytes a copy is one thread's (a thread's start costs more than it saves).
const PARALLEL_COPY_MIN: usize = 4 << 20;

/// `dst.copy_from_slice(src)` in up to `threads` parts, whole pages long, each on its own thread.
fn copy_on(dst: &mut [u8], src: &[u8], threads: usize) {
    if threads <= 1 || src.len() < PARALLEL_COPY_MIN {
        dst.copy_from_slice(src);
        return;
    }
    let part = src.len().div_ceil(threads).next_multiple_of(page_size());
    std::thread::scope(|scope| {
        let mut parts = dst.chunks_mut(part).zip(src.chunks(part));
        let mine = parts.next();
        for (d, s) in parts {
            scope.spawn(move || d.copy_from_slice(s));
        }
        if let Some((d, s)) = mine {
            d.copy_from_slice(s);
        }
    });
}

impl DeviceBuffer {
    /// `bytes` zero bytes, default alignment (see the type docs).
    ///
    /// # Panics
    /// When the buffer cannot be mapped ([`DeviceBuffer::try_zeroed_aligned`] returns the error).
    pub fn zeroed(bytes: usize) -> Self {
        Self::zeroed_aligned(bytes, default_align(bytes))
    }

    /// `bytes` zero bytes whose start is aligned to `align` (a power of two, at most a page;
    /// other values are rounded up to one).
    ///
    /// # Panics
    /// As [`DeviceBuffer::zeroed`].
    pub fn zeroed_aligned(bytes: usize, align: usize) -> Self {
        Self::try_zeroed_aligned(bytes, align).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`DeviceBuffer::zeroed_aligned`], or [`EmuError::Memory`] when the address space or
    /// the memory cannot hold it.
    pub fn try_zeroed_aligned(bytes: usize, align: usize) -> Result<Self, EmuError> {
        Self::with_data(bytes, align, Some(0), false)
    }

    /// `bytes` bytes of `byte` whose start is aligned to `align` (as for
    /// [`DeviceBuffer::zeroed_aligned`]): a launch's outputs, filled with poison; or
    /// [`EmuError::Memory`].
    pub fn try_filled_aligned(bytes: usize, align: usize, byte: u8) -> Result<Self, EmuError> {
        Self::try_filled_placed(bytes, align, byte, false)
    }

    /// [`DeviceBuffer::try_filled_aligned`] with the data flush with the guard before it
    /// (`at_start`) or after it.
    pub(crate) fn try_filled_placed(bytes: usize, align: usize, byte: u8, at_start: bool) -> Result<Self, EmuError> {
        Self::with_data(bytes, align, Some(byte), at_start)
    }

    /// A buffer whose data holds `fill`, or for `None` whatever a reused mapping held (the
    /// caller writes every byte); the head and slack hold poison. Its data is flush with the
    /// guard after it, or with the one before it (`at_start`).
    fn with_data(bytes: usize, align: usize, fill: Option<u8>, at_start: bool) -> Result<Self, EmuError> {
        let page = page_size();
        let align = align.max(1).next_power_of_two().min(page);
        let slack = (align - bytes % align) % align;
        let too_large = || EmuError::Memory { what: format!("cannot map a {bytes}-byte buffer: more bytes than an address space holds") };
        let span = bytes.checked_add(slack).ok_or_else(too_large)?;
        let rw_len = span.div_ceil(page).checked_mul(page).ok_or_else(too_large)?;
        let (map, map_len, rw, fresh) = match take_reusable(rw_len) {
            Some(m) => (m.map, m.map_len, m.rw, false),
            None => {
                let (map, map_len, rw) = reserve(rw_len, bytes)?;
                (map, map_len, rw, true)
            }
        };
        let data = unsafe { rw.add(if at_start { 0 } else { rw_len - span }) };
        unsafe {
            match fill {
                // fresh pages are zero already
                Some(0) if fresh => {}
                Some(b) => std::ptr::write_bytes(data, b, bytes),
                None => {}
            }
        }
        let d = DeviceBuffer {
            map,
            map_len,
            rw,
            rw_len,
            data,
            len: bytes,
            align,
            gaps: Vec::new(),
            regions: Vec::new(),
            armed: None,
            shared: std::sync::Mutex::new(0),
        };
        d.poison_head_and_slack();
        Ok(d)
    }

    fn poison_head_and_slack(&self) {
        for r in [self.head(), self.slack()] {
            unsafe { std::ptr::write_bytes(r.start as *mut u8, POISON, r.end - r.start) };
        }
    }

    /// Bytes before the data on its first page: none when the data is flush with the guard
    /// before it, or its pages are full.
    pub(crate) fn head_len(&self) -> usize {
        self.data as usize - self.rw as usize
    }

    /// A copy of the buffer (data, alignment, regions) whose data is flush with the guard
    /// before it, copied by up to `threads` threads.
    pub(crate) fn try_start_placed_copy(&self, threads: usize) -> Result<DeviceBuffer, EmuError> {
        let mut d = Self::try_from_bytes_placed(self.as_bytes(), self.align, threads, true)?;
        if !self.regions.is_empty() {
            d.set_regions(&self.regions.clone());
        }
        Ok(d)
    }

    /// Move the data (a memmove within its pages) flush with the guard before it
    /// (`at_start`) or after it; the head and slack hold poison again. Between dispatches.
    pub(crate) fn move_data(&mut self, at_start: bool) {
        debug_assert!(self.armed.is_none(), "moved while a dispatch holds it");
        let span = self.len + (self.align - self.len % self.align) % self.align;
        let to = unsafe { self.rw.add(if at_start { 0 } else { self.rw_len - span }) };
        if to != self.data {
            unsafe { std::ptr::copy(self.data, to, self.len) };
            self.data = to;
            self.poison_head_and_slack();
        }
    }

    /// A copy of `b`, default alignment.
    ///
    /// # Panics
    /// As [`DeviceBuffer::zeroed`].
    pub fn from_bytes(b: &[u8]) -> Self {
        Self::from_bytes_aligned(b, default_align(b.len()))
    }

    /// A copy of `b` whose start is aligned to `align`.
    ///
    /// # Panics
    /// As [`DeviceBuffer::zeroed`].
    pub fn from_bytes_aligned(b: &[u8], align: usize) -> Self {
        Self::try_from_bytes_on(b, align, 1).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A copy of `b` whose start is aligned to `align`, written by up to `threads` threads
    /// when it is large (a launch copies its inputs before any threadgroup runs, and the
    /// copy, the fresh pages' faults with it, would otherwise be serial work in every
    /// launch of a large input); or [`EmuError::Memory`].
    pub fn try_from_bytes_on(b: &[u8], align: usize, threads: usize) -> Result<Self, EmuError> {
        Self::try_from_bytes_placed(b, align, threads, false)
    }

    /// [`DeviceBuffer::try_from_bytes_on`] with the data flush with the guard before it
    /// (`at_start`) or after it.
    pub(crate) fn try_from_bytes_placed(b: &[u8], align: usize, threads: usize, at_start: bool) -> Result<Self, EmuError> {
        let mut d = Self::with_data(b.len(), align, None, at_start)?;
        copy_on(d.as_bytes_mut(), b, threads);
        Ok(d)
    }

    /// The buffer's bytes (the guard regions around them excluded).
    pub fn as_bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }

    /// The buffer's bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Alignment of the data's start.
    pub fn align(&self) -> usize {
        self.align
    }

    /// The declared regions (empty: the whole buffer is data).
    pub fn regions(&self) -> &[Range<usize>] {
        &self.regions
    }

    /// Mark declared regions; every byte outside them is a gap to poison (page-sized gaps
    /// PROT_NONE during dispatch, the rest filled with poison bytes, ASan-poisoned under
    /// sanitize). Ranges are clipped to the buffer; an empty list removes all gaps.
    pub fn set_regions(&mut self, regions: &[Range<usize>]) {
        let mut rs: Vec<Range<usize>> =
            regions.iter().map(|r| r.start.min(self.len)..r.end.min(self.len)).filter(|r| r.start < r.end).collect();
        rs.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::new();
        for r in rs {
            match merged.last_mut() {
                Some(l) if r.start <= l.end => l.end = l.end.max(r.end),
                _ => merged.push(r),
            }
        }
        let mut gaps = Vec::new();
        if !merged.is_empty() {
            let mut pos = 0;
            for r in &merged {
                if r.start > pos {
                    gaps.push(pos..r.start);
                }
                pos = r.end;
            }
            if pos < self.len {
                gaps.push(pos..self.len);
            }
        }
        self.regions = merged;
        self.gaps = gaps;
        self.fill_gaps();
    }

    fn fill_gaps(&mut self) {
        for g in self.gaps.clone() {
            self.as_bytes_mut()[g].fill(POISON);
        }
    }

    pub(crate) fn data_ptr(&self) -> *mut u8 {
        self.data
    }

    /// The poisoned bytes after the data, up to the trailing guard (absolute addresses).
    fn slack(&self) -> Range<usize> {
        (self.data as usize + self.len)..(self.rw as usize + self.rw_len)
    }

    /// The poisoned bytes before the data, from the start of its first page (absolute).
    fn head(&self) -> Range<usize> {
        self.rw as usize..self.data as usize
    }

    /// The first page of the trailing guard.
    fn guard_page(&self) -> usize {
        self.rw as usize + self.rw_len
    }

    /// Before a dispatch: protect the whole pages of gaps, poison the rest of them (and for
    /// ASan).
    pub(crate) fn arm(&mut self, sanitize: bool, guard_pages: bool) {
        self.disarm();
        let page = page_size();
        let mut armed = Armed { protected: Vec::new(), guard_opened: false, read_only: false, asan: Vec::new() };
        let base = self.data as usize;
        for g in &self.gaps {
            let (a, b) = (base + g.start, base + g.end);
            let pa = a.div_ceil(page) * page;
            let pb = b / page * page;
            // poison what the kernel can reach: a protected page's bytes are never read (an
            // expert slot's 6 MB gap, poisoned by `set_regions`, was filled again here)
            let fill = |r: Range<usize>| unsafe { std::ptr::write_bytes(r.start as *mut u8, POISON, r.end - r.start) };
            // mprotect fails (ENOMEM) when the process has too many mappings: the gap is
            // then poison throughout and checked after every threadgroup, as a small one is
            if guard_pages && pa < pb && unsafe { libc::mprotect(pa as *mut libc::c_void, pb - pa, libc::PROT_NONE) } == 0 {
                fill(a..pa);
                fill(pb..b);
                armed.protected.push(pa..pb);
            } else {
                fill(a..b);
            }
            if sanitize {
                armed.asan.push(a..b);
            }
        }
        if sanitize {
            for r in [self.head(), self.slack()] {
                if r.start < r.end {
                    armed.asan.push(r);
                }
            }
        }
        if !guard_pages {
            let guard = self.guard_page();
            unsafe { libc::mprotect(guard as *mut libc::c_void, page, libc::PROT_READ | libc::PROT_WRITE) };
            armed.guard_opened = true;
        }
        for r in &armed.asan {
            sanitize::asan_poison(r.start, r.end - r.start);
        }
        self.armed = Some(armed);
    }

    /// Before a dispatch that binds this buffer read-only (an input a launch must not
    /// change): its pages become read-only, so a write faults; the head and slack are
    /// ASan-poisoned under sanitize. Several dispatches may hold it at once (from shared
    /// references): the first arms, the last to call [`DeviceBuffer::disarm_shared`]
    /// disarms. Only for buffers without declared regions.
    pub(crate) fn arm_shared(&self, sanitize: bool) {
        debug_assert!(self.gaps.is_empty(), "a buffer with regions is armed with arm()");
        let mut n = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if *n == 0 {
            if self.rw_len > 0 {
                unsafe { libc::mprotect(self.rw as *mut libc::c_void, self.rw_len, libc::PROT_READ) };
            }
            if sanitize {
                for r in [self.head(), self.slack()] {
                    sanitize::asan_poison(r.start, r.end - r.start);
                }
            }
        }
        *n += 1;
    }

    /// After a dispatch that bound this buffer read-only: undo [`DeviceBuffer::arm_shared`].
    pub(crate) fn disarm_shared(&self, sanitize: bool) {
        let mut n = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        if *n == 0 {
            if self.rw_len > 0 {
                unsafe { libc::mprotect(self.rw as *mut libc::c_void, self.rw_len, libc::PROT_READ | libc::PROT_WRITE) };
            }
            if sanitize {
                for r in [self.head(), self.slack()] {
                    sanitize::asan_unpoison(r.start, r.end - r.start);
                }
            }
        }
    }

    /// Make an armed buffer's data read-only for the rest of the dispatch (its protected
    /// gap pages stay `PROT_NONE`); `disarm` makes it writable again.
    pub(crate) fn protect_read_only(&mut self) {
        let Some(a) = self.armed.as_mut() else { return };
        if self.rw_len == 0 {
            return;
        }
        unsafe { libc::mprotect(self.rw as *mut libc::c_void, self.rw_len, libc::PROT_READ) };
        for r in &a.protected {
            unsafe { libc::mprotect(r.start as *mut libc::c_void, r.end - r.start, libc::PROT_NONE) };
        }
        a.read_only = true;
    }

    /// After a dispatch (or on drop): undo `arm`.
    pub(crate) fn disarm(&mut self) {
        if let Some(a) = self.armed.take() {
            for r in &a.asan {
                sanitize::asan_unpoison(r.start, r.end - r.start);
            }
            if a.read_only {
                unsafe { libc::mprotect(self.rw as *mut libc::c_void, self.rw_len, libc::PROT_READ | libc::PROT_WRITE) };
            }
            for r in &a.protected {
                unsafe { libc::mprotect(r.start as *mut libc::c_void, r.end - r.start, libc::PROT_READ | libc::PROT_WRITE) };
            }
            if a.guard_opened {
                let page = page_size();
                let guard = self.guard_page();
                unsafe {
                    // give the page back (its contents are dropped) and close it again
                    libc::madvise(guard as *mut libc::c_void, page, libc::MADV_DONTNEED);
                    libc::mprotect(guard as *mut libc::c_void, page, libc::PROT_NONE);
                }
            }
        }
    }

    /// The first byte of a gap (outside protected pages), of the slack or of the head that no
    /// longer holds poison: `(offset from the data start, negative in the head, description)`.
    pub(crate) fn find_overwrite(&self) -> Option<(i64, String)> {
        let base = self.data as usize;
        let protected: &[Range<usize>] = self.armed.as_ref().map(|a| a.protected.as_slice()).unwrap_or(&[]);
        let asan: &[Range<usize>] = self.armed.as_ref().map(|a| a.asan.as_slice()).unwrap_or(&[]);
        let check = |a: usize, b: usize| -> Option<usize> {
            let mut p = a;
            while p < b {
                // skip protected pages
                if let Some(r) = protected.iter().find(|r| r.contains(&p)) {
                    p = r.end;
                    continue;
                }
                let end = protected.iter().filter(|r| r.start > p && r.start < b).map(|r| r.start).min().unwrap_or(b);
                for r in asan.iter().filter(|r| r.start < end && r.end > p) {
                    sanitize::asan_unpoison(r.start.max(p), r.end.min(end) - r.start.max(p));
                }
                let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, end - p) };
                let found = first_non_poison(bytes).map(|i| p + i);
                for r in asan.iter().filter(|r| r.start < end && r.end > p) {
                    sanitize::asan_poison(r.start.max(p), r.end.min(end) - r.start.max(p));
                }
                if found.is_some() {
                    return found;
                }
                p = end;
            }
            None
        };
        let rel = |p: usize| p as i64 - base as i64;
        let h = self.head();
        if let Some(p) = check(h.start, h.end) {
            return Some((rel(p), format!("the {} poisoned byte(s) before the start of the data", h.end - h.start)));
        }
        for g in &self.gaps {
            if let Some(p) = check(base + g.start, base + g.end) {
                return Some((rel(p), self.gap_description(g)));
            }
        }
        let s = self.slack();
        if let Some(p) = check(s.start, s.end) {
            return Some((rel(p), format!("the {} slack byte(s) after the end of the data", s.end - s.start)));
        }
        None
    }

    fn gap_description(&self, g: &Range<usize>) -> String {
        let before = self.regions.iter().rfind(|r| r.end <= g.start);
        let after = self.regions.iter().find(|r| r.start >= g.end);
        match (before, after) {
            (Some(b), Some(a)) => format!(
                "the poisoned gap {}..{} between declared regions {}..{} and {}..{}",
                g.start, g.end, b.start, b.end, a.start, a.end
            ),
            (None, Some(a)) => format!("the poisoned gap {}..{} before declared region {}..{}", g.start, g.end, a.start, a.end),
            (Some(b), None) => format!("the poisoned gap {}..{} after declared region {}..{}", g.start, g.end, b.start, b.end),
            (None, None) => format!("the poisoned gap {}..{}", g.start, g.end),
        }
    }

    /// Describe an address relative to this buffer, if it is in its mapping (its guards
    /// included).
    pub(crate) fn describe(&self, addr: usize) -> Option<String> {
        let map = self.map as usize;
        if addr < map || addr >= map + self.map_len {
            return None;
        }
        let data = self.data as usize;
        let end = data + self.len;
        if addr >= end {
            return Some(format!("offset {}, past the end of the {}-byte buffer", addr - data, self.len));
        }
        if addr < data {
            return Some(format!("offset -{}, before the start of the {}-byte buffer", data - addr, self.len));
        }
        let off = addr - data;
        if let Some(g) = self.gaps.iter().find(|g| g.contains(&off)) {
            return Some(format!("offset {off}, in {}", self.gap_description(g)));
        }
        Some(format!("offset {off} (length {} bytes)", self.len))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.disarm();
        let m = Mapping { map: self.map, map_len: self.map_len, rw: self.rw, rw_len: self.rw_len };
        // still bound read-only by a dispatch that never disarmed it (it panicked while arming):
        // its pages are read-only, which the next buffer must not inherit
        let shared = self.shared.get_mut().map_or(1, |n| *n);
        if shared == 0 {
            release(m);
        } else {
            m.unmap();
        }
    }
}

/// # Panics
/// As [`DeviceBuffer::zeroed`].
impl Clone for DeviceBuffer {
    fn clone(&self) -> Self {
        let mut d = DeviceBuffer::from_bytes_aligned(self.as_bytes(), self.align);
        if !self.regions.is_empty() {
            d.set_regions(&self.regions.clone());
        }
        d
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.len)
            .field("align", &self.align)
            .field("regions", &self.regions)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that release mappings run one at a time: a release may unmap the oldest
    /// mapping waiting, another test's.
    static POOL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn pool_alone() -> std::sync::MutexGuard<'static, ()> {
        POOL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer on a reused mapping starts as a fresh one does: its data as asked, its head
    /// and slack poisoned, no gaps, no protections left from the buffer before it.
    #[test]
    fn a_reused_mapping_starts_clean() {
        let _alone = pool_alone();
        // a size no other test uses, so the mapping released here is the one taken back
        let len = (1 << 20) + 12_345;
        let mut a = DeviceBuffer::from_bytes_aligned(&vec![0xAB; len], 16);
        a.set_regions(&[0..1000, 500_000..len]);
        a.arm(false, true);
        a.protect_read_only();
        let map = a.map;
        let waiting = || reusable().iter().any(|m| m.map == map);
        drop(a);
        assert!(waiting(), "the released mapping waits for reuse");
        let mut b = DeviceBuffer::zeroed_aligned(len, 16);
        assert!(b.map == map && !waiting(), "the released mapping is reused");
        assert!(b.as_bytes().iter().all(|&x| x == 0), "zeroed on reuse");
        assert!(b.regions().is_empty() && b.gaps.is_empty());
        let (h, sl) = (b.head(), b.slack());
        let poisoned = |r: Range<usize>| unsafe { std::slice::from_raw_parts(r.start as *const u8, r.end - r.start) }.iter().all(|&x| x == POISON);
        assert!(h.end > h.start && poisoned(h) && poisoned(sl));
        assert_eq!(b.find_overwrite(), None);
        b.as_bytes_mut().fill(7); // writable again: the protections were undone
        drop(b);
        // shorter data starts later: its head covers bytes that were b's data
        let mut c = DeviceBuffer::try_filled_aligned(1_060_896, 16, 0x5A).unwrap();
        assert_eq!(c.map, map);
        assert!(c.as_bytes().iter().all(|&x| x == 0x5A));
        assert_eq!(c.find_overwrite(), None, "the head holds poison for the new length");
        c.as_bytes_mut().fill(7);
        drop(c);
        // 15 bytes of slack over what was c's data
        let d = DeviceBuffer::try_filled_aligned(len - 8, 16, 0x5A).unwrap();
        assert_eq!((d.map, d.slack().len()), (map, 15));
        assert_eq!(d.find_overwrite(), None, "the slack holds poison for the new length");
    }

    /// Data moved flush with the leading guard and back keeps its bytes, its regions' gaps and
    /// its alignment; the bytes around it hold poison in either place.
    #[test]
    fn moved_data_keeps_its_bytes_and_its_poison() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let mut b = DeviceBuffer::from_bytes_aligned(&bytes, 8);
        b.set_regions(&[0..100, 200..1000]);
        let end_placed = b.data_ptr();
        assert!(b.head_len() > 0);
        for at_start in [true, false, true, false] {
            b.move_data(at_start);
            assert_eq!(b.head_len() == 0, at_start);
            assert_eq!(b.data_ptr() == end_placed, !at_start);
            assert_eq!(b.data_ptr() as usize % 8, 0);
            assert_eq!(&b.as_bytes()[..100], &bytes[..100]);
            assert_eq!(&b.as_bytes()[200..], &bytes[200..]);
            assert!(b.as_bytes()[100..200].iter().all(|&x| x == POISON), "the gap moved with the data");
            assert_eq!(b.find_overwrite(), None, "head and slack hold poison (at start: {at_start})");
        }
        let copy = b.try_start_placed_copy(1).unwrap();
        assert_eq!((copy.head_len(), copy.as_bytes(), copy.regions()), (0, b.as_bytes(), b.regions()));
        assert_eq!(copy.find_overwrite(), None);
    }

    /// Released mappings wait for reuse within a bound; a large one is unmapped at once.
    #[test]
    fn idle_mappings_stay_bounded() {
        let _alone = pool_alone();
        let bufs: Vec<DeviceBuffer> = (0..2 * REUSE_IDLE_COUNT).map(|i| DeviceBuffer::zeroed(REUSE_MIN_BYTES + i * 4096)).collect();
        drop(bufs);
        // a few of the largest kept: more bytes than may wait
        let large: Vec<DeviceBuffer> = (0..4).map(|i| DeviceBuffer::zeroed(REUSE_MAX_BYTES - i * 4096)).collect();
        drop(large);
        let big = DeviceBuffer::zeroed(REUSE_MAX_BYTES + 4096);
        drop(big);
        let idle = reusable();
        assert!(idle.len() <= REUSE_IDLE_COUNT, "{} idle mappings", idle.len());
        assert!(idle.iter().map(|m| m.rw_len).sum::<usize>() <= REUSE_IDLE_BYTES);
        assert!(idle.iter().all(|m| m.rw_len <= REUSE_MAX_BYTES));
    }
}
