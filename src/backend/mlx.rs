//! The MLX backend (feature `mlx`): generated kernels through
//! `mlx_rs::fast::MetalKernel`, each built once and cached
//! (`crate::mlx_backend::apply`). On Apple silicon they run on the GPU; in
//! an MLX build without Metal (Linux), MLX answers "No Metal back-end",
//! which comes back as a `LaunchError`.
//!
//! Arguments are checked exactly as for every backend (`super::check`).
//! Strided arrays are accepted: the kernels are built with
//! `ensure_row_contiguous`, so MLX copies them to row-major first.

use super::Backend;
use crate::contract::{Dtype, KernelDef};
use crate::launch::{ArgInfo, LaunchError};
use crate::mlx_backend::{apply, from_mlx_dtype};
use mlx_rs::Array;

/// Launches generated kernels through MLX.
#[derive(Clone, Copy, Debug, Default)]
pub struct MlxBackend;

impl MlxBackend {
    pub fn new() -> Self {
        MlxBackend
    }
}

impl Backend for MlxBackend {
    type Array = Array;

    fn describe(&self, a: &Array) -> ArgInfo {
        let dtype = from_mlx_dtype(a.dtype());
        ArgInfo {
            dtype: dtype.unwrap_or(Dtype::U8),
            shape: a.shape().iter().map(|&d| d.max(0) as u64).collect(),
            bytes: a.nbytes() as u64,
            // ensure_row_contiguous: MLX copies strided inputs before the kernel.
            row_contiguous: true,
            // MLX allocates its buffers page-aligned; views are copied (above).
            address: None,
            unsupported_dtype: dtype.is_none().then(|| format!("{:?}", a.dtype())),
        }
    }

    fn read_ints(&self, a: &Array) -> Option<Vec<i64>> {
        // Only the small count arrays a contract bounds get here; reading
        // them evaluates the array.
        match from_mlx_dtype(a.dtype())? {
            Dtype::I32 => a.try_as_slice::<i32>().ok().map(|s| s.iter().map(|&v| i64::from(v)).collect()),
            Dtype::U32 => a.try_as_slice::<u32>().ok().map(|s| s.iter().map(|&v| i64::from(v)).collect()),
            _ => None,
        }
    }

    unsafe fn run_unchecked(&self, def: &'static KernelDef, inputs: &[&Array], sizes: &[u64]) -> Result<Vec<Array>, LaunchError> {
        apply(def, inputs, sizes).map_err(|e| LaunchError::backend(def, e.to_string()))
    }
}
