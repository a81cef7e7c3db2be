//! The threadgroup-memory check, in the spirit of compute-sanitizer's racecheck: an object built
//! with `-fsanitize=thread`'s instrumentation calls the shim's hooks before every load and store
//! through a pointer, and the hooks send each access to threadgroup memory here
//! ([`rt_tg_access`]), with the instruction for its `.metal` line. Per byte of every threadgroup
//! array, a shadow cell holds the last write and up to two reads since, each with its thread,
//! its barrier interval and its instruction. Two accesses of one byte by different threads, at
//! least one a write, race unless a barrier that orders threadgroup memory lies between them, as
//! MSL's memory model says: a `threadgroup_barrier` with `mem_flags::mem_threadgroup` for any two
//! threads, a `simdgroup_barrier` with it for two of one SIMD-group. SIMD-group collectives order
//! nothing (the emulator's run orders hide a race across one; this check does not), atomic
//! operations do not race (the hooks do not record them). A race stops the threadgroup, reported
//! with the array, the element, both threads and both lines. An access outside the threadgroup's
//! arrays (past an array's end, before its start, between them) is reported as the fault it would
//! be, with its line, before it happens. On request it also reports a read of a byte no thread of
//! the threadgroup has written ([`MemoryCheck::UninitializedReads`]).
//!
//! Not seen: an explicit `memcpy` (Metal has none; copies of aggregates are instrumented as
//! ranges), and accesses in the runtime's own code (the collectives' lane values are on the
//! fibers' stacks, not in threadgroup memory).

use crate::MemoryCheck;

use super::sched::{SIMD, Sched, abandon_fiber, cur_sched};
use super::signals::RawFault;
use super::tg_memory::locate;

/// One access of a byte: the thread (its index in the threadgroup), the threadgroup's barrier
/// interval and its SIMD-group's at the time, and the instruction (an offset into the object's
/// code). `epoch` 0: none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Access {
    epoch: u32,
    sg_epoch: u32,
    pub(super) thread: u16,
    pub(super) write: bool,
    pub(super) pc: u32,
}

#[derive(Clone, Copy, Default)]
struct Cell {
    write: Access,
    reads: [Access; 2],
}

/// A worker's shadow of its threadgroup arrays, kept between threadgroups (stale cells are those
/// of an earlier interval, so nothing is cleared between threadgroups).
#[derive(Default)]
pub(super) struct Shadow {
    /// Per array of the running threadgroup (by allocation order), a cell per byte.
    cells: Vec<Vec<Cell>>,
    /// The threadgroup's barrier interval: one more at each threadgroup barrier that orders
    /// threadgroup memory, and at each threadgroup's start.
    epoch: u32,
    /// The interval the running threadgroup started in.
    start: u32,
    /// Per SIMD-group: one more at each of its simdgroup barriers that orders threadgroup memory.
    sg_epochs: Vec<u32>,
}

/// What the check found, for the scheduler to report.
#[derive(Clone, Copy, Debug)]
pub(super) enum Found {
    /// Two unordered accesses of one byte of array `array`, at least one a write.
    Race { array: usize, byte: usize, first: Access, second: Access },
    /// A read of a byte no thread of the threadgroup has written.
    Uninitialized { array: usize, byte: usize, read: Access },
}

/// The threadgroups at each end of the grid (in linear order) a dispatch with the check runs: a
/// grid of at most twice as many runs whole. The check's cost is per memory access (the
/// instrumented object calls a hook for each, and each access of threadgroup memory costs tens
/// of nanoseconds more: a shadow cell per byte), so a grid of thousands of threadgroups is
/// sampled where its threadgroups differ most: the first ones and the last (partial
/// threadgroups, bounds); the other outputs keep their initial bytes. Plain runs see every
/// threadgroup (guards, canaries, run orders).
pub(crate) const CHECKED_AT_EACH_END: u64 = 8;

/// Whether a dispatch with the check runs the threadgroup of linear index `lin` in a grid of
/// `tgs` threadgroups.
pub(super) fn checks(lin: u64, tgs: [u32; 3]) -> bool {
    let n: u64 = tgs.iter().map(|&t| t as u64).product();
    lin < CHECKED_AT_EACH_END || lin >= n.saturating_sub(CHECKED_AT_EACH_END)
}

/// `mem_flags::mem_threadgroup`.
pub(super) const MEM_THREADGROUP: u32 = 2;

/// A new threadgroup of `simdgroups` SIMD-groups starts: every cell is stale.
pub(super) unsafe fn threadgroup_started(s: *mut Sched, simdgroups: usize) {
    unsafe {
        let sh = &mut (*s).shadow;
        if sh.epoch > u32::MAX - (1 << 24) {
            // far from wrapping around: start over
            sh.cells.iter_mut().for_each(|c| c.fill(Cell::default()));
            sh.epoch = 0;
        }
        sh.epoch += 1;
        sh.start = sh.epoch;
        sh.sg_epochs.clear();
        sh.sg_epochs.resize(simdgroups, 1);
    }
}

/// A threadgroup barrier released its threads; `flags` are its memory flags.
pub(super) unsafe fn threadgroup_barrier(s: *mut Sched, flags: u32) {
    unsafe {
        if flags & MEM_THREADGROUP != 0 {
            (*s).shadow.epoch += 1;
        }
    }
}

/// A simdgroup barrier released SIMD-group `sg`.
pub(super) unsafe fn simdgroup_barrier(s: *mut Sched, sg: usize, flags: u32) {
    unsafe {
        if flags & MEM_THREADGROUP != 0 {
            if let Some(e) = (*s).shadow.sg_epochs.get_mut(sg) {
                *e += 1;
            }
        }
    }
}

/// Array `k` of the running threadgroup was allocated: its cells (stale ones reused).
pub(super) unsafe fn array_allocated(s: *mut Sched, k: usize) {
    unsafe {
        let size = (*s).site_list[k].size;
        let cells = &mut (*s).shadow.cells;
        if cells.len() <= k {
            cells.resize_with(k + 1, Vec::new);
        }
        if cells[k].len() < size {
            cells[k].resize(size, Cell::default());
        }
    }
}

impl Shadow {
    /// Whether `a` is ordered before an access by `thread` now: the same thread, an earlier
    /// interval of the threadgroup, or of `thread`'s SIMD-group when it is `a`'s too.
    fn ordered(&self, a: &Access, thread: usize) -> bool {
        let sg = thread / SIMD;
        a.epoch != self.epoch || a.thread as usize == thread || (a.thread as usize / SIMD == sg && a.sg_epoch != self.sg_epochs[sg])
    }
}

/// The hook of every access to threadgroup memory (`Rt::tg_access`), from the instruction before
/// `pc`.
pub(super) unsafe extern "C" fn rt_tg_access(addr: usize, size: u64, is_write: u32, pc: usize) {
    unsafe {
        let s = cur_sched();
        if s.is_null() || !(*s).in_fiber {
            return;
        }
        let Some(mode) = (*s).check else { return };
        let (write, size) = (is_write != 0, size as usize);
        let pc = pc.saturating_sub(1);
        let thread = (*s).cur;
        let inside = locate(&(*s).site_list, (*s).arena, addr).filter(|&(k, off)| off >= 0 && off as usize + size <= (*s).site_list[k].size);
        let Some((k, off)) = inside else {
            // the fault it would be, before it happens: the first byte outside the array
            let bad = match locate(&(*s).site_list, (*s).arena, addr) {
                Some((k, off)) if off >= 0 => (*s).site_list[k].start + (*s).site_list[k].size,
                _ => addr,
            };
            (*s).fault = Some(RawFault { sig: libc::SIGSEGV, addr: Some(bad), pc, write: Some(write), refused: false, fiber: thread });
            (*s).stop = true;
            abandon_fiber(s);
        };
        let sh = &mut (*s).shadow;
        let sg = thread / SIMD;
        let me = Access { epoch: sh.epoch, sg_epoch: sh.sg_epochs[sg], thread: thread as u16, write, pc: pc.wrapping_sub((*s).code.start) as u32 };
        let off = off as usize;
        for byte in off..off + size {
            let cell = sh.cells[k][byte];
            // the same thread read it already in this interval: what that read found holds
            // (a write would have cleared the reads), and nothing changes (the hot path of a
            // thread re-reading staged values)
            let last = cell.reads[0];
            if !write && last.epoch == me.epoch && last.thread == me.thread && last.sg_epoch == me.sg_epoch {
                continue;
            }
            let found = if write {
                let mut earlier = std::iter::once(cell.write).chain(cell.reads).filter(|a| a.epoch != 0);
                earlier.find(|a| !sh.ordered(a, thread)).map(|first| Found::Race { array: k, byte, first, second: me })
            } else if cell.write.epoch != 0 && !sh.ordered(&cell.write, thread) {
                Some(Found::Race { array: k, byte, first: cell.write, second: me })
            } else if mode == MemoryCheck::UninitializedReads && cell.write.epoch < sh.start {
                Some(Found::Uninitialized { array: k, byte, read: me })
            } else {
                None
            };
            if let Some(f) = found {
                (*s).found = Some(f);
                (*s).stop = true;
                abandon_fiber(s);
            }
            let c = &mut sh.cells[k][byte];
            if write {
                *c = Cell { write: me, reads: [Access::default(); 2] };
            } else {
                // keep two readers: this one, and one other of this interval if there is one
                let other = c.reads.into_iter().find(|a| a.epoch == sh.epoch && a.thread != me.thread);
                c.reads = [me, other.unwrap_or_default()];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_grid_is_checked_whole_a_large_one_at_both_ends() {
        assert!((0..2 * CHECKED_AT_EACH_END).all(|lin| checks(lin, [4, 2, 2])));
        let (first, last) = (CHECKED_AT_EACH_END, 1000 - CHECKED_AT_EACH_END);
        assert!(checks(0, [1000, 1, 1]) && checks(first - 1, [1000, 1, 1]) && checks(last, [1000, 1, 1]) && checks(999, [1000, 1, 1]));
        assert!(!checks(first, [1000, 1, 1]) && !checks(500, [10, 100, 1]) && !checks(last - 1, [1000, 1, 1]));
    }
}
