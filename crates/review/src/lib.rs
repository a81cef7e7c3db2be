//! What a change of specs or templates did to every kernel, for a reviewer
//! (`kernelgen diff`), and the cost of a launch on named Apple GPUs
//! (`kernelgen list`).
//!
//! A review compares two generated trees (relative path -> text): the one
//! the specs generate now and a committed revision or another folder. Both
//! are read through their `manifest.json` and `.metal` files ([`view`]), so
//! an old revision is read exactly like the new tree. [`compare::review`]
//! finds the kernels added, removed and renamed (the same code, comments and
//! whitespace aside, under another name), tells for each changed kernel
//! whether only comments or whitespace changed (the tokens of
//! [`kernelgen_msl::lex`] are the same) or the code did,
//! lists contract and resource changes (threads, threadgroup memory and its
//! headroom, grid, buffers, bytes and flops per launch, roofline time on a
//! [`gpu`]), raises the warnings below, and groups the MSL diffs ([`udiff`])
//! of the kernels whose code changed: kernels whose diffs make the same edit
//! share one section. [`render`] prints it as text or as Markdown for a pull
//! request.
//!
//! [`ListCosts`] are `kernelgen list`'s cost columns, read from one tree's
//! manifest the same way. Costs are evaluated with every run-time size at 1
//! unless given ([`view::Sizes`]).
//!
//! It reads generated trees as text and never calls the generator, which
//! does not depend on it (nor, then, does a user of the proc-macros).

#![warn(missing_docs)]

pub mod compare;
#[cfg(test)]
mod fixtures;
pub mod gpu;
pub mod list;
pub mod render;
pub mod udiff;
pub mod view;

pub use compare::{review, Options, Review, Tree};
pub use list::ListCosts;
use kernelgen_contract::limits::{MAX_THREADGROUP_MEMORY_BYTES, PORTABLE_THREADS_PER_THREADGROUP};
use view::{KernelView, Sizes};

/// Headroom under [`MAX_THREADGROUP_MEMORY_BYTES`] below which a kernel is
/// flagged: one more small array in a template edit and it no longer builds.
pub const THREADGROUP_MEMORY_MARGIN: u64 = 1024;

/// Elements past which 32-bit signed index arithmetic (`int`, MLX's
/// `int` offsets) overflows.
pub const MAX_PORTABLE_ELEMENTS: u64 = 1 << 31;

/// What a warning is about, to tell whether the old side had it too.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WarningKind {
    /// Threadgroup memory within [`THREADGROUP_MEMORY_MARGIN`] of the limit.
    ThreadgroupMemory,
    /// More threads per threadgroup than [`PORTABLE_THREADS_PER_THREADGROUP`].
    Threads,
    /// The named buffer has over [`MAX_PORTABLE_ELEMENTS`] elements.
    BigBuffer(String),
    /// The named run-time size became compile-time (specialized).
    Specialized(String),
    /// The named size became a run-time size.
    Unspecialized(String),
}

/// A kernel's own warnings (not the ones that compare two sides).
pub fn warnings(k: &KernelView, sizes: &Sizes) -> Vec<(WarningKind, String)> {
    let mut out = Vec::new();
    let mem = k.threadgroup_memory;
    if mem + THREADGROUP_MEMORY_MARGIN > MAX_THREADGROUP_MEMORY_BYTES {
        out.push((
            WarningKind::ThreadgroupMemory,
            format!(
                "threadgroup memory {} B is within {} B of the {} B limit ({} B headroom)",
                group(mem),
                group(THREADGROUP_MEMORY_MARGIN),
                group(MAX_THREADGROUP_MEMORY_BYTES),
                group(MAX_THREADGROUP_MEMORY_BYTES.saturating_sub(mem))
            ),
        ));
    }
    let threads = k.threads();
    if threads > PORTABLE_THREADS_PER_THREADGROUP {
        out.push((
            WarningKind::Threads,
            format!(
                "{threads} threads per threadgroup, above the portable limit of {PORTABLE_THREADS_PER_THREADGROUP}: a pipeline's maximum can be below 1024 (896 on an M2 Ultra, mlx-vlm#1799), and the launch then fails"
            ),
        ));
    }
    let values = sizes.values(&k.sizes);
    for b in k.buffers() {
        if let Some(n) = b.elements(&values).filter(|n| *n > MAX_PORTABLE_ELEMENTS) {
            let at = if k.sizes.is_empty() { String::new() } else { format!(" at {}", sizes.describe(&k.sizes)) };
            out.push((
                WarningKind::BigBuffer(b.name.clone()),
                format!("buffer `{}` has {} elements{at}, over 2^31: 32-bit signed index arithmetic overflows", b.name, group(n)),
            ));
        }
    }
    out
}

/// `12,599,296`
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `12.6 MB`, `980 B`: decimal units, three significant digits.
pub fn human_bytes(n: u64) -> String {
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in ["kB", "MB", "GB", "TB"] {
        if v < 1000.0 {
            break;
        }
        v /= 1000.0;
        unit = u;
    }
    let digits = if v >= 100.0 { 0 } else if v >= 10.0 { 1 } else { 2 };
    format!("{v:.digits$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(12599296), "12,599,296");
        assert_eq!(human_bytes(980), "980 B");
        assert_eq!(human_bytes(12_611_584), "12.6 MB");
        assert_eq!(human_bytes(1_000), "1.00 kB");
        assert_eq!(human_bytes(715_171_840), "715 MB");
    }
}
