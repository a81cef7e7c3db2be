//! What a dispatch is given: the arguments every target's runtime takes (this file is the
//! stand-in's too, `runtime_unsupported.rs`), so that the emulator's API builds everywhere.

use super::Object;
use crate::{DeviceBuffer, KernelSignature, Language, Placement, RunOrder};

pub(crate) struct DispatchArgs<'a, 'b> {
    pub object: &'a Object,
    pub entry: usize,
    pub kernel: &'a KernelSignature,
    pub file_name: &'a str,
    pub buffers: &'a mut [Buf<'b>],
    pub grid: [u32; 3],
    pub threadgroup: [u32; 3],
    pub order: RunOrder,
    /// The byte threadgroup memory is filled with before each threadgroup runs.
    pub threadgroup_poison: u8,
    pub sanitize: bool,
    pub guard_pages: bool,
    /// Worker threads to run threadgroups on (at least 1; the calling thread is one).
    pub workers: usize,
    pub placement: Placement,
    /// How long the dispatch may run.
    pub time_limit: std::time::Duration,
    /// The threadgroup-memory check (`object` is built for it).
    pub memory_check: Option<crate::MemoryCheck>,
    /// Whose launch model: threadgroups clamped to the grid, partial at its edge (Metal) or
    /// whole (CUDA's blocks).
    pub language: Language,
    /// A CUDA launch's dynamic shared memory (`extern __shared__`), in bytes.
    pub shared_memory: u32,
    /// The bytes of each `[[threadgroup(i)]]` parameter, by index `i`.
    pub threadgroup_memory: Vec<usize>,
}

/// A buffer bound to a dispatch: one the kernel may write, one it may only read (its pages
/// read-only while the dispatch runs, so a write faults) that the dispatch owns for its
/// duration, or one it only reads and shares with other users (an input borrowed in place).
pub(crate) enum Buf<'b> {
    Mut(&'b mut DeviceBuffer),
    ReadOnly(&'b mut DeviceBuffer),
    Shared(&'b DeviceBuffer),
}

impl Buf<'_> {
    pub(super) fn get(&self) -> &DeviceBuffer {
        match self {
            Buf::Mut(b) | Buf::ReadOnly(b) => b,
            Buf::Shared(b) => b,
        }
    }
}
