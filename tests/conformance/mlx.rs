//! MLX's harness: lazy MLX arrays, read back by evaluating them. Kernels run where MLX has
//! Metal; MLX's CPU build (Linux) refuses them with "No Metal back-end", which every valid
//! launch of the suite must then come back with. `KERNELGEN_MLX_EXECUTES=1` (or `0`)
//! overrides what MLX reports, for a GPU backend MLX has and this check does not know yet.

use crate::conformance::{chain_says, Harness};
use kernelgen::backend::mlx::{to_mlx_dtype, MlxBackend};
use kernelgen::launch::BackendError;
use kernelgen::Dtype;
use mlx_rs::Array;
use std::error::Error;

/// The text of MLX's error where it has no GPU backend for custom kernels.
pub const NO_METAL: &str = "No Metal back-end";

pub struct Mlx(pub MlxBackend);

impl Mlx {
    pub fn new() -> Self {
        Mlx(MlxBackend::new())
    }
}

fn mlx_dtype(d: Dtype) -> mlx_rs::Dtype {
    to_mlx_dtype(d).unwrap_or_else(|| panic!("no MLX dtype for {d}"))
}

fn mlx_shape(shape: &[u64]) -> Vec<i32> {
    shape.iter().map(|&d| i32::try_from(d).expect("an MLX dimension")).collect()
}

/// Whether MLX has computed `a`, asked without evaluating it (false for a lazy expression
/// nobody evaluated).
pub fn evaluated(a: &Array) -> bool {
    let mut res = false;
    // SAFETY: `a` is a live array; mlx-c only reads its status.
    let status = unsafe { mlx_sys::_mlx_array_is_available(&mut res, a.as_ptr()) };
    assert_eq!(status, 0, "mlx-c failed to report availability");
    res
}

/// Whether MLX runs Metal kernels here.
fn has_metal() -> bool {
    let mut res = false;
    // SAFETY: mlx-c writes one bool.
    let status = unsafe { mlx_sys::mlx_metal_is_available(&mut res) };
    status == 0 && res
}

impl Harness for Mlx {
    type Backend = MlxBackend;

    fn backend(&self) -> &MlxBackend {
        &self.0
    }

    /// The bytes as a `uint8` array, viewed as `dtype` in `shape`: lazy views of it, of
    /// which the first changes the shape, so the array returned is never evaluated.
    fn array(&self, dtype: Dtype, shape: &[u64], bytes: &[u8]) -> Array {
        let len = i32::try_from(bytes.len()).expect("an MLX dimension");
        let raw = Array::from_slice(bytes, &[1, len]);
        raw.reshape(&[len]).and_then(|a| a.view_dtype(mlx_dtype(dtype))).and_then(|a| a.reshape(&mlx_shape(shape))).unwrap_or_else(|e| panic!("{e}"))
    }

    fn zeros(&self, dtype: Dtype, shape: &[u64]) -> Array {
        mlx_rs::ops::zeros_dtype(&mlx_shape(shape), mlx_dtype(dtype)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn read(&self, array: &Array) -> Result<Vec<u8>, BackendError> {
        array.eval()?;
        let bytes = array.view_dtype(mlx_rs::Dtype::Uint8)?.reshape(&[-1])?;
        bytes.eval()?;
        Ok(bytes.try_as_slice::<u8>()?.to_vec())
    }

    fn can_execute(&self) -> bool {
        match std::env::var("KERNELGEN_MLX_EXECUTES").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => has_metal(),
        }
    }

    fn is_unavailable(&self, error: &(dyn Error + 'static)) -> bool {
        chain_says(error, NO_METAL)
    }

    /// Launches are lazy and these tests evaluate none: the catalog costs little.
    fn whole_catalog(&self) -> bool {
        true
    }

    /// A transposed view of the elements (the last two axes swapped), which MLX copies to
    /// row-major itself before the kernel (`ensure_row_contiguous`).
    fn strided(&self, dtype: Dtype, shape: &[u64], bytes: &[u8]) -> Option<Array> {
        let [.., rows, cols] = *shape else { return None };
        let size = dtype.size();
        let mut swapped = shape.to_vec();
        swapped.swap(shape.len() - 1, shape.len() - 2);
        // The bytes of the transpose of every trailing matrix, row-major.
        let matrix = (rows * cols) as usize * size;
        let mut t = vec![0u8; bytes.len()];
        for (src, dst) in bytes.chunks(matrix).zip(t.chunks_mut(matrix)) {
            for r in 0..rows as usize {
                for c in 0..cols as usize {
                    let from = (r * cols as usize + c) * size;
                    let to = (c * rows as usize + r) * size;
                    dst[to..to + size].copy_from_slice(&src[from..from + size]);
                }
            }
        }
        let view = self.array(dtype, &swapped, &t).swap_axes(-1, -2).unwrap_or_else(|e| panic!("{e}"));
        Some(view)
    }

    fn foreign(&self, shape: &[u64]) -> Option<(Array, &'static str)> {
        Some((mlx_rs::ops::zeros_dtype(&mlx_shape(shape), mlx_rs::Dtype::Int64).unwrap_or_else(|e| panic!("{e}")), "Int64"))
    }

    fn evaluated(&self, array: &Array) -> Option<bool> {
        Some(evaluated(array))
    }
}
