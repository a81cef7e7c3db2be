//! CUDA's warp-synchronous operations (`__shfl*_sync`, `__ballot_sync`, `__any_sync`,
//! `__all_sync`, `__syncwarp`) and what else a CUDA kernel asks the runtime: its thread's ids,
//! the live lanes of its warp, the launch's dynamic shared memory, and undefined behaviour the
//! shim found at a line. Warps are the SIMD-groups of the fiber scheduler (`sched`).
//!
//! A masked operation follows CUDA's rule (Programming Guide, "Warp Shuffle Functions" and
//! "Warp Vote Functions"; PTX `shfl.sync`): the calling lane must be in its mask, and it waits
//! until every non-exited lane named in the mask has reached the same operation with the same
//! mask (at any line). Those lanes then run it together (the *group*), and go on; lanes outside
//! the mask may be anywhere. A mask naming a lane that never comes (it waits elsewhere while
//! every live lane of the warp waits) is undefined behaviour in CUDA and an
//! [`EmuError::Divergence`](crate::EmuError) here, naming both lanes and their lines.
//!
//! The lane record every masked operation hands the runtime starts with its mask (`u32`); the
//! rest is the shim's (`kgemu_cuda.h`, `kgemu::cu::WarpLane`).

use std::ffi::{c_char, c_void};
use std::ptr::null_mut;

use super::faults::SanReport;
use super::object::{CollFn, ThreadInfo};
use super::racecheck;
use super::sched::{Pending, SIMD, Sched, State, abandon_fiber, cur_sched, fiber, park, sg_settled, yield_fiber};
use super::tg_memory::rt_tg_alloc;

/// Operation ids of the masked operations (`kgemu::cu::Op` in the shim), above Metal's.
pub(super) const FIRST_OP: u32 = 64;
/// `__syncwarp`'s id.
const SYNCWARP: u32 = FIRST_OP + 7;
const NAMES: [&str; 8] = ["__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp"];

/// The shared memory a CUDA block may have, and whose limit that is: 48 KiB of static and
/// dynamic memory together; as much as an H200 (sm_90) gives one block, 227 KiB, when the
/// dynamic part is more than 48000 bytes (MLX 0.32's `cuda_kernel` raises the kernel's limit
/// then).
pub(super) fn shared_limit(dynamic: u32) -> (usize, &'static str) {
    if dynamic > 48_000 { (MAX_SHARED, "an H200's 227 KiB a block") } else { (48 * 1024, "CUDA's 48 KiB a block") }
}

/// The most shared memory a CUDA block may have (an H200's, with the larger dynamic part).
pub(super) const MAX_SHARED: usize = 227 * 1024;

/// The name of a masked operation's id.
pub(super) fn op_name(op: u32) -> &'static str {
    op.checked_sub(FIRST_OP).and_then(|i| NAMES.get(i as usize)).copied().unwrap_or("a warp operation")
}

/// The mask a waiting lane's record starts with.
unsafe fn mask_of(lane: *mut c_void) -> u32 {
    unsafe { *(lane as *const u32) }
}

/// What a lane of a masked operation waits at, in words (`__shfl_xor_sync(mask 0x0000ffff)`).
pub(super) unsafe fn describe(s: *mut Sched, i: usize) -> String {
    unsafe {
        let f = &*fiber(s, i);
        format!("{}(mask {:#010x})", op_name(f.op), mask_of(f.lane))
    }
}

/// The lanes (bits, lane = index in the warp) of warp `sg` that have not returned; a lane past
/// the end of a partial warp does not exist and counts as returned.
unsafe fn live_lanes(s: *mut Sched, sg: usize) -> u32 {
    unsafe {
        let lo = sg * SIMD;
        let hi = (lo + SIMD).min((*s).fibers.len());
        (lo..hi).filter(|&i| (*fiber(s, i)).state != State::Exited).fold(0, |m, i| m | 1 << (i - lo))
    }
}

/// Whether lane `j` (fiber index) waits at the same masked operation as fiber `i`: the same
/// operation on the same type (one function) with the same mask.
unsafe fn same_call(s: *mut Sched, i: usize, j: usize) -> bool {
    unsafe {
        let (a, b) = (&*fiber(s, i), &*fiber(s, j));
        b.state == State::Warp && a.op == b.op && a.coll.map(|f| f as usize) == b.coll.map(|f| f as usize) && mask_of(a.lane) == mask_of(b.lane)
    }
}

/// If every non-exited lane named in the mask of waiting fiber `i` waits at the same call,
/// run the operation over them and make them ready; whether it did.
unsafe fn try_release(s: *mut Sched, i: usize) -> bool {
    unsafe {
        let sg = i / SIMD;
        let lo = sg * SIMD;
        let group = mask_of((*fiber(s, i)).lane) & live_lanes(s, sg);
        let members = (0..SIMD as u32).filter(|b| group >> b & 1 == 1).map(|b| lo + b as usize);
        if !members.clone().all(|j| same_call(s, i, j)) {
            return false;
        }
        let mut lanes = [null_mut::<c_void>(); SIMD];
        for j in members.clone() {
            lanes[j - lo] = (*fiber(s, j)).lane;
        }
        let op: CollFn = (*fiber(s, i)).coll.expect("a warp operation's function");
        op(lanes.as_ptr(), group);
        if (*fiber(s, i)).op == SYNCWARP {
            // CUDA: __syncwarp orders memory among its lanes (the check orders the whole warp's,
            // so a race between a lane of a partial mask and one outside it goes unseen);
            // shuffles and votes order nothing
            racecheck::simdgroup_barrier(s, sg, racecheck::MEM_THREADGROUP);
        }
        let n = members.clone().count();
        (*s).warp_waits -= n;
        for j in members {
            (*fiber(s, j)).state = State::Ready;
        }
        (*s).ready += n;
        (*(*s).sgs.as_mut_ptr().add(sg)).blocked -= n as u32;
        true
    }
}

/// Release every group of warp `sg` that is complete (after a lane returned: a mask may name
/// it).
pub(super) unsafe fn release_complete(s: *mut Sched, sg: usize) {
    unsafe {
        if (*s).warp_waits == 0 {
            return;
        }
        let lo = sg * SIMD;
        let hi = (lo + SIMD).min((*s).fibers.len());
        for i in lo..hi {
            if (*fiber(s, i)).state == State::Warp {
                try_release(s, i);
            }
        }
    }
}

/// Every live lane of warp `sg` waits: a lane still at a masked operation waits for a lane of
/// its mask that waits elsewhere (or at the same operation with another mask), which never
/// comes. The pair, if there is one.
pub(super) unsafe fn stuck(s: *mut Sched, sg: usize) -> Option<(usize, usize)> {
    unsafe {
        if (*s).warp_waits == 0 {
            return None;
        }
        let lo = sg * SIMD;
        let hi = (lo + SIMD).min((*s).fibers.len());
        let i = (lo..hi).find(|&i| (*fiber(s, i)).state == State::Warp)?;
        let group = mask_of((*fiber(s, i)).lane) & live_lanes(s, sg);
        let other = (0..SIMD).filter(|b| group >> b & 1 == 1).map(|b| lo + b).find(|&j| !same_call(s, i, j));
        Some((i, other.unwrap_or(i)))
    }
}

pub(super) unsafe extern "C" fn rt_warp(lane: *mut c_void, f: CollFn, op: u32, line: u32) {
    unsafe {
        let s = cur_sched();
        let (i, sg) = park(s, State::Warp, lane, f, op, line);
        (*s).warp_waits += 1;
        if !try_release(s, i) {
            sg_settled(s, sg);
        }
        yield_fiber(s);
    }
}

pub(super) unsafe extern "C" fn rt_thread_info() -> *const ThreadInfo {
    unsafe {
        let s = cur_sched();
        (*s).infos.as_ptr().add((*s).cur)
    }
}

pub(super) unsafe extern "C" fn rt_live_lanes() -> u32 {
    unsafe {
        let s = cur_sched();
        live_lanes(s, (*s).cur / SIMD)
    }
}

/// `extern __shared__`: every declaration is the launch's one block of dynamic shared memory
/// (site `site`), through the threadgroup allocation every `__shared__` array takes.
pub(super) unsafe extern "C" fn rt_tg_dynamic(site: u32, align: u64, element: u64, line: u32, name: *const c_char) -> *mut c_void {
    unsafe {
        let s = cur_sched();
        rt_tg_alloc(site, (*s).dynamic_shared as u64, align, element, line, name)
    }
}

/// Undefined behaviour the shim found in the calling GPU thread (kind: what, with its values):
/// reported as a fault at `line`, and the thread stops.
pub(super) unsafe extern "C" fn rt_cuda_ub(kind: u32, op: u32, a: u32, b: u32, line: u32) {
    unsafe {
        let s = cur_sched();
        let name = op_name(op);
        let what = match kind {
            1 => format!(
                "{name} with mask {a:#010x}, which leaves out the calling lane {b}: undefined behaviour in CUDA (each calling lane must be in its mask)"
            ),
            2 => format!("{name} with width {} : undefined behaviour in CUDA (width must be a power of two from 1 to 32)", a as i32),
            _ => format!("{name}: undefined behaviour"),
        };
        let what = what.replace(" :", ":");
        (*s).report = Some(SanReport::at_line(what, line, (*s).cur));
        (*s).stop = true;
        abandon_fiber(s);
    }
}

/// `Pending::Divergence` for a stuck warp, for the scheduler.
pub(super) fn divergence(sg: usize, pair: (usize, usize)) -> Pending {
    Pending::Divergence { sg: sg as u32, first: pair.0, second: pair.1 }
}
