//! The emulator's harness: host arrays, eager launches, the emulator's arithmetic (the
//! replay models' bits).

use crate::conformance::{Array, Harness};
use kernelgen::launch::BackendError;
use kernelgen::Dtype;
use kernelgen_emu::{EmuBackend, HostArray};
use std::error::Error;
use std::sync::OnceLock;

/// One emulator for the binary's tests (each kernel compiled once).
pub struct Emu(&'static EmuBackend);

impl Emu {
    pub fn new() -> Self {
        static BACKEND: OnceLock<EmuBackend> = OnceLock::new();
        Emu(BACKEND.get_or_init(|| EmuBackend::with_defaults().unwrap_or_else(|e| panic!("{e}"))))
    }
}

impl Harness for Emu {
    type Backend = EmuBackend;

    fn backend(&self) -> &EmuBackend {
        self.0
    }

    fn array(&self, dtype: Dtype, shape: &[u64], bytes: &[u8]) -> HostArray {
        HostArray::new(dtype, shape.to_vec(), bytes.to_vec())
    }

    fn zeros(&self, dtype: Dtype, shape: &[u64]) -> HostArray {
        HostArray::zeros(dtype, shape.to_vec())
    }

    fn read(&self, array: &HostArray) -> Result<Vec<u8>, BackendError> {
        Ok(array.data.to_vec())
    }

    fn can_execute(&self) -> bool {
        true
    }

    fn is_unavailable(&self, _: &(dyn Error + 'static)) -> bool {
        false
    }

    fn bit_exact(&self) -> bool {
        true
    }

    /// A host array's bytes need not agree with its shape.
    fn with_bytes(&self, dtype: Dtype, shape: &[u64], bytes: usize) -> Option<Array<Self>> {
        Some(HostArray::new(dtype, shape.to_vec(), vec![0; bytes]))
    }
}
