//! Stands in for the fiber runtime (`runtime/`) on targets it has not been ported
//! to: its context switch and fault handling are x86-64 Linux code. Everything else of
//! the emulator builds, so tools that embed it (the `kernelgen` CLI) build everywhere
//! and say in one line what the emulator needs.

use std::path::Path;

use super::{DispatchStats, EmuError};

/// The one-line answer on this target.
pub(crate) fn unsupported() -> EmuError {
    EmuError::Unsupported {
        target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
    }
}

pub(crate) struct Object;

impl Object {
    pub fn load(_path: &Path, _symbols: &[String], _file_name: &str) -> Result<Object, EmuError> {
        Err(unsupported())
    }
}

// The same arguments as the runtime's.
#[path = "runtime/args.rs"]
mod args;
pub(crate) use args::{Buf, DispatchArgs};

pub(crate) fn default_workers() -> usize {
    1
}

pub(crate) fn set_default_workers(_n: usize) {}

pub(crate) fn dispatch(_a: DispatchArgs<'_, '_>) -> Result<DispatchStats, EmuError> {
    Err(unsupported())
}
