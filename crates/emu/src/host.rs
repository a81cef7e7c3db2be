//! Row-contiguous arrays in host memory: the emulator backend's array type,
//! and what `kernelgen run` reads from and writes to .npy files.

use kernelgen::contract::Dtype;
use half::{bf16, f16};

/// A dense, row-major array: dtype, shape and little-endian bytes. The
/// launch checks, not the constructor, decide whether it fits a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

impl HostArray {
    pub fn new(dtype: Dtype, shape: Vec<u64>, data: Vec<u8>) -> Self {
        HostArray { dtype, shape, data }
    }

    pub fn zeros(dtype: Dtype, shape: Vec<u64>) -> Self {
        let n: u64 = shape.iter().product();
        HostArray {
            dtype,
            shape,
            data: vec![0; n as usize * dtype.size()],
        }
    }

    pub fn elements(&self) -> usize {
        self.shape.iter().product::<u64>() as usize
    }

    pub fn from_f32(shape: Vec<u64>, values: &[f32]) -> Self {
        HostArray {
            dtype: Dtype::F32,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn from_bf16(shape: Vec<u64>, values: &[bf16]) -> Self {
        HostArray {
            dtype: Dtype::Bf16,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn from_f16(shape: Vec<u64>, values: &[f16]) -> Self {
        HostArray {
            dtype: Dtype::F16,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn from_i32(shape: Vec<u64>, values: &[i32]) -> Self {
        HostArray {
            dtype: Dtype::I32,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    pub fn from_u8(shape: Vec<u64>, values: Vec<u8>) -> Self {
        HostArray {
            dtype: Dtype::U8,
            shape,
            data: values,
        }
    }

    /// Every element widened to f32 (integers and bools by value); `None`
    /// for a dtype this version does not know.
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        let d = &self.data;
        Some(match self.dtype {
            Dtype::F32 => d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::Bf16 => d
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Dtype::F16 => d
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Dtype::U16 => d
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as f32)
                .collect(),
            Dtype::I32 => d
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            Dtype::U32 => d
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            Dtype::I8 => d.iter().map(|&b| b as i8 as f32).collect(),
            Dtype::U8 | Dtype::Bool => d.iter().map(|&b| b as f32).collect(),
            _ => return None,
        })
    }
}
