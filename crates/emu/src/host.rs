//! Row-contiguous arrays in host memory: the emulator backend's array type,
//! and what `kernelgen run` reads from and writes to .npy files.

use crate::DeviceBuffer;
use half::{bf16, f16};
use kernelgen::contract::Dtype;
use std::ops::{Deref, DerefMut};

/// Arrays of at least this many bytes made by [`HostArray::zeros`] live in guarded device
/// memory ([`HostData::is_guarded`]), so the emulator backend launches on them in place.
pub const GUARDED_MIN_BYTES: usize = 16 << 20;

/// Inputs of more than this many bytes make a kernel *large* (a vocabulary head's 635 MB of
/// weights): `kernelgen verify` runs it alone (two at once would double the peak memory) and
/// in fewer run orders, as the test of every worker count and order does.
pub const LARGE_INPUT_BYTES: u64 = 128 << 20;

/// The bytes of a [`HostArray`]: an ordinary vector, or a [`DeviceBuffer`] (guard regions
/// around it, data start aligned to 16 bytes), which the emulator backend binds to a kernel
/// without copying. Either way it derefs to the bytes; equality is by bytes.
pub struct HostData(Repr);

enum Repr {
    Heap(Vec<u8>),
    Guarded(DeviceBuffer),
}

impl HostData {
    /// `len` zero bytes in guarded memory whose start is aligned to 16 bytes.
    pub fn guarded(len: usize) -> Self {
        HostData(Repr::Guarded(DeviceBuffer::zeroed_aligned(len, 16)))
    }

    /// Whether the bytes live in guarded memory (and a launch binds them in place).
    pub fn is_guarded(&self) -> bool {
        matches!(self.0, Repr::Guarded(_))
    }

    /// The device buffer holding the bytes, when they are guarded.
    pub(crate) fn device(&self) -> Option<&DeviceBuffer> {
        match &self.0 {
            Repr::Guarded(b) => Some(b),
            Repr::Heap(_) => None,
        }
    }

    pub(crate) fn from_device(b: DeviceBuffer) -> Self {
        HostData(Repr::Guarded(b))
    }

    /// The bytes as a vector (a copy when they are guarded).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Heap(v) => v,
            Repr::Guarded(b) => b.as_bytes().to_vec(),
        }
    }
}

impl From<Vec<u8>> for HostData {
    fn from(v: Vec<u8>) -> Self {
        HostData(Repr::Heap(v))
    }
}

impl Deref for HostData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Heap(v) => v,
            Repr::Guarded(b) => b.as_bytes(),
        }
    }
}

impl DerefMut for HostData {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Repr::Heap(v) => v,
            Repr::Guarded(b) => b.as_bytes_mut(),
        }
    }
}

impl AsRef<[u8]> for HostData {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Clone for HostData {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Heap(v) => HostData(Repr::Heap(v.clone())),
            Repr::Guarded(b) => {
                let mut c = HostData::guarded(b.len());
                c.copy_from_slice(b.as_bytes());
                c
            }
        }
    }
}

impl PartialEq for HostData {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<[u8]> for HostData {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<Vec<u8>> for HostData {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for HostData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_guarded() { "guarded" } else { "heap" };
        let shown = &self[..self.len().min(32)];
        write!(f, "HostData({kind}, {} bytes, {:02x?}{})", self.len(), shown, if self.len() > 32 { " .." } else { "" })
    }
}

/// A dense, row-major array: dtype, shape and little-endian bytes. The
/// launch checks, not the constructor, decide whether it fits a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    /// The element type.
    pub dtype: Dtype,
    /// The shape, outermost dimension first.
    pub shape: Vec<u64>,
    /// The elements, row-major, little-endian.
    pub data: HostData,
}

impl HostArray {
    /// An array over `data` (row-major, little-endian bytes of `dtype`), on the heap.
    pub fn new(dtype: Dtype, shape: Vec<u64>, data: Vec<u8>) -> Self {
        HostArray { dtype, shape, data: data.into() }
    }

    /// An array over bytes that may be guarded (see [`HostData`]).
    pub fn with_data(dtype: Dtype, shape: Vec<u64>, data: HostData) -> Self {
        HostArray { dtype, shape, data }
    }

    /// Zeros; in guarded memory when at least [`GUARDED_MIN_BYTES`] (fill it through
    /// `data`, then a launch through the emulator backend copies nothing).
    ///
    /// # Panics
    /// When the shape's bytes do not fit in memory's address space (as `vec!` does).
    pub fn zeros(dtype: Dtype, shape: Vec<u64>) -> Self {
        let bytes = Self::bytes_of(dtype, &shape);
        let data = if bytes >= GUARDED_MIN_BYTES { HostData::guarded(bytes) } else { vec![0; bytes].into() };
        HostArray { dtype, shape, data }
    }

    /// Zeros in guarded memory, whatever the size.
    ///
    /// # Panics
    /// As [`HostArray::zeros`].
    pub fn guarded(dtype: Dtype, shape: Vec<u64>) -> Self {
        let bytes = Self::bytes_of(dtype, &shape);
        HostArray { dtype, shape, data: HostData::guarded(bytes) }
    }

    /// The bytes of `shape` elements of `dtype`, where they fit in a `usize`.
    fn bytes_of(dtype: Dtype, shape: &[u64]) -> usize {
        shape
            .iter()
            .try_fold(dtype.size() as u64, |n, &d| n.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or_else(|| panic!("an array of shape {shape:?} of {dtype} is more bytes than an address space holds"))
    }

    /// Elements in the array (the product of the shape; `usize::MAX` when it does not fit).
    pub fn elements(&self) -> usize {
        self.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).and_then(|n| usize::try_from(n).ok()).unwrap_or(usize::MAX)
    }

    /// An `f32` array of `values`, row-major.
    pub fn from_f32(shape: Vec<u64>, values: &[f32]) -> Self {
        HostArray::new(Dtype::F32, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// A `bf16` array of `values`, row-major.
    pub fn from_bf16(shape: Vec<u64>, values: &[bf16]) -> Self {
        HostArray::new(Dtype::Bf16, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// An `f16` array of `values`, row-major.
    pub fn from_f16(shape: Vec<u64>, values: &[f16]) -> Self {
        HostArray::new(Dtype::F16, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// A `u32` array of `values`, row-major (affine weights: [`kernelgen::quant::affine::Quantized`]'s
    /// `w`, `[rows, cols * bits / 32]`).
    pub fn from_u32(shape: Vec<u64>, values: &[u32]) -> Self {
        HostArray::new(Dtype::U32, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// An `i32` array of `values`, row-major.
    pub fn from_i32(shape: Vec<u64>, values: &[i32]) -> Self {
        HostArray::new(Dtype::I32, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// A `u8` array over `values` (a packed buffer's bytes, say).
    pub fn from_u8(shape: Vec<u64>, values: Vec<u8>) -> Self {
        HostArray::new(Dtype::U8, shape, values)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "an array of shape [18446744073709551615, 2] of f32 is more bytes than an address space holds")]
    fn zeros_of_a_shape_past_the_address_space_says_so() {
        // (an overflow panic, or in release a wrapped, small buffer under a huge shape)
        HostArray::zeros(Dtype::F32, vec![u64::MAX, 2]);
    }

    #[test]
    fn elements_and_u32_arrays() {
        let a = HostArray::from_u32(vec![1, 2], &[1, 0xdead_beef]);
        assert_eq!((a.dtype, a.elements()), (Dtype::U32, 2));
        assert_eq!(&a.data[4..], &0xdead_beefu32.to_le_bytes());
        let huge = HostArray::new(Dtype::U8, vec![1 << 40, 1 << 40], Vec::new());
        assert_eq!(huge.elements(), usize::MAX);
    }
}
