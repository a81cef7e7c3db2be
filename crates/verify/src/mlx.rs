//! MLX as a verify backend (feature `mlx`): a case's arrays become MLX arrays, the kernel runs
//! through the typed launch path on the GPU MLX has ([`kernelgen::backend::mlx::gpu`]), and
//! the outputs are read back by evaluating them. No property checks (they are the
//! emulator's); the values are held to the f64 models' bounds.

use crate::run::VerifyBackend;
use kernelgen::backend::mlx::mlx_rs::{self, Array};
use kernelgen::backend::mlx::{Gpu, MlxBackend, MlxError, from_mlx_dtype, gpu, to_mlx_dtype};
use kernelgen_emu::{HostArray, Language};

fn dims(shape: &[u64]) -> Result<Vec<i32>, MlxError> {
    shape.iter().map(|&d| i32::try_from(d).map_err(|_| MlxError::TooLarge(d as usize))).collect()
}

impl VerifyBackend for MlxBackend {
    /// The bytes as a `uint8` array, viewed as the array's dtype and shape (MLX copies them).
    fn upload(&self, array: &HostArray) -> Result<Array, MlxError> {
        let dtype = to_mlx_dtype(array.dtype).ok_or(MlxError::Unsupported(array.dtype))?;
        let len = i32::try_from(array.data.len()).map_err(|_| MlxError::TooLarge(array.data.len()))?;
        let shape = dims(&array.shape)?;
        let bytes = Array::from_slice(&array.data[..], &[len]);
        bytes.view_dtype(dtype).and_then(|a| a.reshape(&shape)).map_err(MlxError::Host)
    }

    /// Evaluates the array (running the launches it depends on) and reads its bytes.
    fn download(&self, array: &Array) -> Result<HostArray, MlxError> {
        let dtype = from_mlx_dtype(array.dtype()).ok_or_else(|| MlxError::Host(mlx_rs::error::Exception::custom(format!("no kernelgen dtype for {:?}", array.dtype()))))?;
        let shape = array.shape().iter().map(|&d| d as u64).collect();
        let bytes = array.view_dtype(mlx_rs::Dtype::Uint8).and_then(|a| a.reshape(&[-1])).map_err(MlxError::Host)?;
        bytes.eval().map_err(MlxError::Eval)?;
        let data = bytes.try_as_slice::<u8>().map_err(|e| MlxError::Host(mlx_rs::error::Exception::custom(e.to_string())))?.to_vec();
        Ok(HostArray::new(dtype, shape, data))
    }

    /// The CUDA body where MLX runs CUDA, else the Metal body.
    fn body(&self) -> Language {
        if gpu() == Gpu::Cuda { Language::Cuda } else { Language::Metal }
    }

    /// One kernel at a time: the GPU is one device, and MLX's graph is built per thread.
    fn jobs(&self) -> usize {
        1
    }
}
