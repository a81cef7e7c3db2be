//! The properties every kernel must have, checked in the emulator with no reference at all:
//! - no access outside a buffer (the guard regions fault, naming the buffer; the runs
//!   alternate the data's placement in its pages, [`Placement`], so one just before the start
//!   faults as surely as one just past the end);
//! - every output element written: the outputs are filled with poison bytes (0xFF, 0x00),
//!   and an element that keeps the poison of each run was never written;
//! - no read of uninitialized threadgroup memory, nor of an output before it is written: the
//!   poison bytes differ between the runs, so such a read changes the results;
//! - the same bits in every run order of threads and threadgroups (forward, reverse, and a
//!   seeded shuffle): a race or a missing barrier shows as a difference.
//!
//! - no data race on threadgroup memory and no access outside a threadgroup array: the first
//!   run is the emulator's threadgroup-memory check ([`MemoryCheck::Races`]), which sees every
//!   access of the threadgroups it runs (every one of a grid of at most 16, else the 8 at each
//!   end) and MSL's barrier semantics, so a race that every run order hides (SIMD-group
//!   collectives between the racing accesses) is found, named with its array, lines and threads;
//! - the threadgroup memory the contract declares is what the kernel's arrays take.
//!
//! A passing kernel costs five launches: the check's, forward with poison `0xFF`, forward
//! again with other poison bytes, reverse, and shuffled (three, the check's, forward and reverse, for a
//! large kernel and under the sanitizers: `run::run_case`); only when they disagree do more runs
//! find which property failed (a read of uninitialized threadgroup memory is then named by the
//! check: [`MemoryCheck::UninitializedReads`]). No poison can catch a read whose value never
//! matters to the outputs for any of the three poison bytes (`0xFF`, `0x00`, `0x5A`).

use crate::case::Case;
use crate::error::{Error, Finding};
use kernelgen::backend;
use kernelgen::contract::KernelDef;
use kernelgen::launch::LaunchError;
use kernelgen_emu::{DispatchStats, EmuBackend, EmuError, HostArray, Language, MemoryCheck, Placement, RunConfig, RunOrder};

/// One launch of `case` in the emulator with `config`.
pub fn launch(emu: &EmuBackend, def: &KernelDef, case: &Case, config: RunConfig) -> Result<Vec<HostArray>, Error> {
    launch_stats(emu, def, case, config).map(|(outputs, _)| outputs)
}

/// [`launch`], and the dispatch's counters.
fn launch_stats(emu: &EmuBackend, def: &KernelDef, case: &Case, config: RunConfig) -> Result<(Vec<HostArray>, DispatchStats), Error> {
    let bound = case.bind(def)?;
    let checked = backend::check(emu, def, &bound.arrays, &bound.host, &bound.sizes)?;
    emu.run_with_stats(&checked, config).map_err(|e| LaunchError::backend(def, e).into())
}

fn elements(a: &HostArray) -> Vec<&[u8]> {
    a.data.chunks(a.dtype.size().max(1)).collect()
}

fn first_difference(a: &HostArray, b: &HostArray) -> Option<usize> {
    elements(a).iter().zip(elements(b)).position(|(x, y)| *x != y)
}

/// The run orders of a full check: forward, reverse and shuffled by `shuffle_seed`.
pub fn every_order(shuffle_seed: u64) -> [RunOrder; 3] {
    [RunOrder::Forward, RunOrder::Reverse, RunOrder::Shuffle(shuffle_seed)]
}

/// Runs `case` in several configurations and checks every property; the outputs of the
/// forward run come back when all hold. `shuffle_seed` seeds the shuffled run order.
pub fn check_properties(emu: &EmuBackend, def: &KernelDef, case: &Case, shuffle_seed: u64) -> Result<Vec<HostArray>, Error> {
    check_properties_in(emu, def, case, &every_order(shuffle_seed))
}

/// [`check_properties`] with the first run (forward, poison 0xFF) compared with runs in
/// `orders` (at least one), their poison bytes alternating: fewer launches for a kernel too
/// large to run often. A forward run with other poison catches most reads of uninitialized
/// memory (in forward order a thread reads before later threads write), the other orders races.
pub fn check_properties_in(emu: &EmuBackend, def: &KernelDef, case: &Case, orders: &[RunOrder]) -> Result<Vec<HostArray>, Error> {
    let config = |order, output_poison, threadgroup_poison, placement| RunConfig { order, output_poison, threadgroup_poison, placement, memory_check: None };
    let run = |order, output_poison, threadgroup_poison, placement| launch(emu, def, case, config(order, output_poison, threadgroup_poison, placement));
    // Every later run differs from the first in its order and its poison bytes: outputs
    // start as 0xFF (NaN, -1) or 0x00, threadgroup memory as 0xFF, 0x00 or 0x5A (a large
    // positive number in every float and integer type: a kernel that drops NaNs, like an
    // argmax, still sees it). A kernel that gives the same bits in all has every property.
    // Their placements alternate too (the first end-placed, the next start-placed, ...):
    // every access just before a buffer or just past it faults in one of them, for the time
    // of one run each (in sanitize mode ASan sees both sides in every run).
    const THREADGROUP_POISONS: [u8; 2] = [0x00, 0x5A];
    // The first run is the threadgroup-memory check's (of the threadgroups it runs): races,
    // threadgroup bounds, and the threadgroup memory the kernel allocates.
    let first_config = config(RunOrder::Forward, 0xFF, 0xFF, Placement::End);
    let (_, stats) = launch_stats(emu, def, case, RunConfig { memory_check: Some(MemoryCheck::Races), ..first_config })?;
    let allocated = stats.threadgroup_memory();
    // a CUDA body declares its own static shared memory (it may stage what the Metal body reads)
    let (body, declared, path) = match (emu.language(), &def.cuda) {
        (Language::Cuda, Some(cuda)) => (Language::Cuda, cuda.static_shared_memory_bytes, &cuda.path),
        _ => (Language::Metal, def.threadgroup_memory_bytes, &def.metal_path),
    };
    if allocated != declared as usize {
        let arrays = stats.threadgroup_arrays.iter().map(|a| format!("`{}`, {} bytes, declared at {}:{}", a.name, a.bytes, path, a.line)).collect();
        return Err(Finding::ThreadgroupMemory { at: None, body, declared, allocated, arrays }.into());
    }
    let forward = launch(emu, def, case, first_config)?;
    let mut others = Vec::new();
    for (k, &order) in orders.iter().enumerate() {
        let (output, threadgroup, placement) = if k % 2 == 0 { (0x00, 0x5A, Placement::Start) } else { (0xFF, 0x00, Placement::End) };
        others.push((order, run(order, output, threadgroup, placement)?));
    }
    if others.iter().all(|(_, o)| *o == forward) {
        return Ok(forward);
    }
    let first = &others[0].1;
    let names: Vec<String> = def.outputs.iter().map(|b| b.name.to_string()).collect();
    // Which property failed: unwritten elements keep each run's poison.
    for (i, name) in names.iter().enumerate() {
        let (a, b) = (elements(&forward[i]), elements(&first[i]));
        let unwritten: Vec<usize> = (0..a.len()).filter(|&k| a[k].iter().all(|&x| x == 0xFF) && b[k].iter().all(|&x| x == 0x00)).collect();
        if let Some(&first) = unwritten.first() {
            return Err(Finding::Unwritten { output: name.clone(), count: unwritten.len(), first }.into());
        }
    }
    // Forward again with one poison changed at a time.
    for poison in THREADGROUP_POISONS {
        let changed = run(RunOrder::Forward, 0xFF, poison, Placement::End)?;
        for (i, name) in names.iter().enumerate() {
            if let Some(first) = first_difference(&forward[i], &changed[i]) {
                // the check names the first read of what no thread wrote (it may be another
                // than the one this element depends on, and none if the memory was written by
                // a copy the check does not see)
                let read = match launch(emu, def, case, RunConfig { memory_check: Some(MemoryCheck::UninitializedReads), ..first_config }) {
                    Err(Error::Launch(LaunchError::Backend { source, .. })) => match source.downcast_ref::<EmuError>() {
                        Some(e @ EmuError::UninitializedRead { .. }) => Some(e.to_string()),
                        _ => None,
                    },
                    _ => None,
                };
                return Err(Finding::UninitializedThreadgroup { output: name.clone(), first, read }.into());
            }
        }
    }
    let output_zero = run(RunOrder::Forward, 0x00, 0xFF, Placement::End)?;
    for (i, name) in names.iter().enumerate() {
        if let Some(first) = first_difference(&forward[i], &output_zero[i]) {
            return Err(Finding::ReadsOutput { output: name.clone(), first }.into());
        }
    }
    // What is left is the order.
    for (order, other) in &others {
        for (i, name) in names.iter().enumerate() {
            if let Some(first) = first_difference(&forward[i], &other[i]) {
                let order = match order {
                    RunOrder::Forward => "forward".to_string(),
                    RunOrder::Reverse => "reverse".to_string(),
                    RunOrder::Shuffle(seed) => format!("shuffled (seed {seed})"),
                    other => format!("{other:?}"),
                };
                return Err(Finding::OrderDependent { output: name.clone(), first, order }.into());
            }
        }
    }
    Ok(forward)
}
