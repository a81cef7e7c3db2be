//! Quantization helpers for the formats kernelgen's kernels read, so callers
//! can feed their own weights.
//!
//! [`affine`]: MLX's affine format (what `mlx.core.quantize` produces), read
//! by the `affine` family: `bits`-bit values of groups of 64 weights, packed
//! least significant first into `uint32` words, with one scale and one bias
//! per group.

use half::{bf16, f16};

/// An element type weights, scales and biases come in: `f32`, `half::f16`,
/// `half::bf16`.
pub trait Element: Copy + Default + PartialEq + std::fmt::Debug {
    /// Round an f32 to this type, to nearest even.
    fn from_f32(x: f32) -> Self;
    /// Widen to f32 (exact).
    fn to_f32(self) -> f32;
    /// The largest finite value.
    const MAX: f32;
}

impl Element for f32 {
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
    const MAX: f32 = f32::MAX;
}

impl Element for f16 {
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    const MAX: f32 = 65504.0;
}

impl Element for bf16 {
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    const MAX: f32 = 3.3895314e38;
}

/// MLX's affine quantization.
pub mod affine {
    use super::Element;
    use std::fmt;

    /// Weights that share one scale and one bias.
    pub const GROUP_SIZE: usize = 64;

    /// A quantized `[rows, cols]` matrix in MLX's format.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Quantized<T> {
        /// Rows of the matrix (the affine kernel's `N`, its outputs).
        pub rows: usize,
        /// Columns of the matrix (the affine kernel's `K`, a multiple of 64).
        pub cols: usize,
        /// 3 or 4 (what the affine family reads); MLX also has 2, 5, 6 and 8.
        pub bits: u32,
        /// `[rows, cols * bits / 32]`: each row's values as one least
        /// significant first bit stream (a 3-bit value may straddle two words).
        pub w: Vec<u32>,
        /// `[rows, cols / 64]`.
        pub scales: Vec<T>,
        /// `[rows, cols / 64]`.
        pub biases: Vec<T>,
    }

    /// Why weights could not be quantized.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct QuantError(pub String);

    impl fmt::Display for QuantError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "cannot quantize: {}", self.0)
        }
    }

    impl std::error::Error for QuantError {}

    /// Packs values (each below `2^bits`) into one least significant first
    /// bit stream of `u32` words.
    pub fn pack_bits(values: &[u8], bits: u32) -> Result<Vec<u32>, QuantError> {
        let b = bits as usize;
        if !(1..=8).contains(&bits) || values.len().checked_mul(b).is_none_or(|n| n % 32 != 0) {
            return Err(QuantError(format!("{} values of {bits} bits are not a whole number of 32-bit words", values.len())));
        }
        let mut w = vec![0u32; values.len() * b / 32];
        for (i, &v) in values.iter().enumerate() {
            if u32::from(v) >> bits != 0 {
                return Err(QuantError(format!("value {v} at index {i} does not fit {bits} bits")));
            }
            for j in 0..b {
                let bit = i * b + j;
                w[bit / 32] |= u32::from((v >> j) & 1) << (bit % 32);
            }
        }
        Ok(w)
    }

    /// The first `count` values of a least significant first bit stream of `bits`-bit values
    /// (1 to 8): an error when `w` holds fewer.
    pub fn unpack_bits(w: &[u32], count: usize, bits: u32) -> Result<Vec<u8>, QuantError> {
        if !(1..=8).contains(&bits) {
            return Err(QuantError(format!("{bits}-bit values: 1 to 8 bits unpack to bytes")));
        }
        let b = bits as usize;
        if count.checked_mul(b).is_none_or(|n| n > w.len().saturating_mul(32)) {
            return Err(QuantError(format!("{} words hold {} values of {bits} bits, not {count}", w.len(), w.len().saturating_mul(32) / b)));
        }
        let mask = (1u64 << b) - 1;
        Ok((0..count)
            .map(|i| {
                let bit = i * b;
                let lo = u64::from(w[bit / 32]);
                let hi = w.get(bit / 32 + 1).map_or(0, |&x| u64::from(x));
                (((lo | (hi << 32)) >> (bit % 32)) & mask) as u8
            })
            .collect())
    }

    /// MLX's affine quantizer for `w: [rows, cols]` (row-major, `cols` a
    /// multiple of 64), in f32 as MLX computes it. Per group of 64 values:
    /// `scale = max((max(w, 0) - min(w, T::MAX)) / (2^bits - 1), 1e-7)`; the
    /// edge is the extreme of larger magnitude (the scale negated when that
    /// is the maximum); `q0 = round(edge / scale)`, and unless `q0` is 0 the
    /// scale becomes `edge / q0` and the bias `edge` (so 0 is exactly
    /// representable), else the bias is 0; each value is
    /// `clamp(round((w - bias) / scale), 0, 2^bits - 1)`; the scale and bias
    /// are stored rounded to `T`.
    pub fn quantize<T: Element>(w: &[T], rows: usize, cols: usize, bits: u32) -> Result<Quantized<T>, QuantError> {
        if !matches!(bits, 2 | 3 | 4 | 5 | 6 | 8) {
            return Err(QuantError(format!("{bits} bits: MLX's affine format has 2, 3, 4, 5, 6 or 8")));
        }
        if rows.checked_mul(cols) != Some(w.len()) {
            return Err(QuantError(format!("{} weights are not [{rows}, {cols}]", w.len())));
        }
        // (`cols * bits` is checked: with no rows, any `cols` passed the count above)
        if cols == 0 || cols % GROUP_SIZE != 0 || cols.checked_mul(bits as usize).is_none_or(|n| n % 32 != 0) {
            return Err(QuantError(format!("cols = {cols} is not a positive multiple of the group size {GROUP_SIZE} whose {bits}-bit values fit in memory")));
        }
        if let Some((i, v)) = w.iter().enumerate().find(|(_, v)| !v.to_f32().is_finite()) {
            return Err(QuantError(format!("weight {v:?} at index {i} is not finite")));
        }
        let n_bins = ((1u32 << bits) - 1) as f32;
        let eps = 1e-7f32;
        let mut q = Vec::with_capacity(w.len());
        let mut scales = Vec::with_capacity(w.len() / GROUP_SIZE);
        let mut biases = Vec::with_capacity(w.len() / GROUP_SIZE);
        for (g, group) in w.chunks_exact(GROUP_SIZE).enumerate() {
            let mut w_min = T::MAX;
            let mut w_max = 0.0f32;
            for &v in group {
                w_min = w_min.min(v.to_f32());
                w_max = w_max.max(v.to_f32());
            }
            let mut scale = ((w_max - w_min) / n_bins).max(eps);
            let side = w_min.abs() > w_max.abs();
            if !side {
                scale = -scale;
            }
            let edge = if side { w_min } else { w_max };
            let q0 = (edge / scale).round();
            let at_zero = q0 == 0.0;
            if !at_zero {
                scale = edge / q0;
            }
            let bias = if at_zero { 0.0 } else { edge };
            let (stored_scale, stored_bias) = (T::from_f32(scale), T::from_f32(bias));
            // finite weights whose range is wider than T holds: the kernel would read inf
            if !(stored_scale.to_f32().is_finite() && stored_bias.to_f32().is_finite()) {
                let (row, col) = (g * GROUP_SIZE / cols, g * GROUP_SIZE % cols);
                return Err(QuantError(format!(
                    "the group of row {row}, columns {col}..{}, spans {w_min} to {w_max}: its scale {scale} or bias {bias} is not finite as {}",
                    col + GROUP_SIZE,
                    std::any::type_name::<T>().rsplit("::").next().unwrap_or("the element type")
                )));
            }
            scales.push(stored_scale);
            biases.push(stored_bias);
            for &v in group {
                q.push(((v.to_f32() - bias) / scale).round().clamp(0.0, n_bins) as u8);
            }
        }
        let mut packed = Vec::with_capacity(w.len() / 32 * bits as usize);
        for row in q.chunks_exact(cols) {
            packed.extend(pack_bits(row, bits)?);
        }
        Ok(Quantized { rows, cols, bits, w: packed, scales, biases })
    }

    impl<T: Element> Quantized<T> {
        /// `scale * q + bias` of every weight, `[rows, cols]`, in f32 (the
        /// stored `T` scale and bias); an error when the fields do not describe one
        /// `[rows, cols]` matrix of `bits`-bit values (they are public).
        pub fn dequantize(&self) -> Result<Vec<f32>, QuantError> {
            let (rows, cols, bits) = (self.rows, self.cols, self.bits);
            let bad = || QuantError(format!("{rows} x {cols} values of {bits} bits are not a quantized matrix (cols a multiple of {GROUP_SIZE}, 1 to 8 bits, fitting in memory)"));
            let row_bits = cols.checked_mul(bits as usize).ok_or_else(bad)?;
            if !(1..=8).contains(&bits) || cols % GROUP_SIZE != 0 || row_bits % 32 != 0 {
                return Err(bad());
            }
            let words = row_bits / 32;
            let groups = cols / GROUP_SIZE;
            let lengths = [("w", self.w.len(), rows.checked_mul(words)), ("scales", self.scales.len(), rows.checked_mul(groups)), ("biases", self.biases.len(), rows.checked_mul(groups))];
            for (name, len, want) in lengths {
                if Some(len) != want {
                    return Err(QuantError(format!("`{name}` has {len} elements; a {rows} x {cols} matrix of {bits} bits has {}", want.map_or("too many".to_string(), |n| n.to_string()))));
                }
            }
            let mut out = Vec::with_capacity(rows.checked_mul(cols).ok_or_else(bad)?);
            for r in 0..rows {
                let q = unpack_bits(&self.w[r * words..(r + 1) * words], cols, bits)?;
                for (c, v) in q.into_iter().enumerate() {
                    let g = r * groups + c / GROUP_SIZE;
                    out.push(self.scales[g].to_f32() * f32::from(v) + self.biases[g].to_f32());
                }
            }
            Ok(out)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn bits_round_trip_and_straddle_words() {
            let values: Vec<u8> = (0..64).map(|i| (i * 5 % 8) as u8).collect();
            let w = pack_bits(&values, 3).unwrap();
            assert_eq!(w.len(), 6);
            assert_eq!(unpack_bits(&w, 64, 3).unwrap(), values);
            // more values than the words hold, or values wider than a byte: errors
            assert!(unpack_bits(&w, 65, 3).is_err() && unpack_bits(&[1, 2], 2, 64).is_err() && unpack_bits(&[u32::MAX], 2, 12).is_err());
            // Value 10 sits at bits 30..33: two in word 0, one in word 1.
            assert_eq!((w[0] >> 30) as u8 | (((w[1] & 1) as u8) << 2), values[10]);
            assert!(pack_bits(&[8], 3).is_err());
        }

        #[test]
        fn quantization_error_is_at_most_half_a_step_and_zero_is_exact() {
            let w: Vec<f32> = (0..2 * 128).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
            for bits in [3, 4] {
                let q = quantize(&w, 2, 128, bits).unwrap();
                let d = q.dequantize().unwrap();
                let levels: Vec<u8> = q.w.chunks(128 * bits as usize / 32).flat_map(|row| unpack_bits(row, 128, bits).unwrap()).collect();
                for (i, (a, b)) in w.iter().zip(&d).enumerate() {
                    // The top level clamps (MLX's step can shrink below the range's).
                    if u32::from(levels[i]) == (1 << bits) - 1 {
                        continue;
                    }
                    let step = q.scales[i / GROUP_SIZE].abs();
                    assert!((a - b).abs() <= step * 0.5 + 1e-6, "bits {bits}, {i}: {a} vs {b}");
                }
            }
            let zeros = quantize(&[0.0f32; 64], 1, 64, 4).unwrap();
            assert!(zeros.dequantize().unwrap().iter().all(|&v| v == 0.0));
            assert!(quantize(&[1.0f32; 63], 1, 63, 4).is_err());
            assert!(quantize(&[f32::NAN; 64], 1, 64, 4).is_err());
            // no columns: an error, not a panic on a chunk size of 0
            assert!(quantize::<f32>(&[], 0, 0, 4).is_err() && quantize::<f32>(&[], 5, 0, 4).is_err());
        }

        /// Finite weights whose range no scale of the element type spans: an error naming the
        /// group (the scale was stored as inf, and every weight dequantized to NaN).
        #[test]
        fn a_range_the_scale_cannot_hold_is_an_error() {
            let mut w = [0.0f32; 128];
            (w[64], w[65]) = (2e38, -2e38);
            let e = quantize(&w, 1, 128, 4).unwrap_err().to_string();
            assert!(e.contains("row 0, columns 64..128") && e.contains("not finite as f32"), "{e}");
            let w: Vec<half::bf16> = (0..64).map(|i| if i % 2 == 0 { half::bf16::MAX } else { -half::bf16::MAX }).collect();
            assert!(quantize(&w, 1, 64, 4).unwrap_err().to_string().contains("not finite as bf16"));
        }

        /// Sizes whose products overflow `usize` are errors, not a panic (debug) or a wrapped
        /// product that passed the checks (release).
        #[test]
        fn sizes_that_overflow_are_errors() {
            let huge = usize::MAX / GROUP_SIZE * GROUP_SIZE;
            assert!(quantize::<f32>(&[], 0, huge, 4).unwrap_err().to_string().contains("cols"));
            let q = Quantized::<f32> { rows: 0, cols: huge, bits: 4, w: Vec::new(), scales: Vec::new(), biases: Vec::new() };
            assert!(q.dequantize().is_err());
            let q = Quantized::<f32> { rows: 2, cols: huge, bits: 8, w: vec![0; 2], scales: Vec::new(), biases: Vec::new() };
            assert!(q.dequantize().is_err());
            assert!(unpack_bits(&[0; 2], usize::MAX, 3).is_err());
        }

        #[test]
        fn dequantize_checks_the_public_fields() {
            let mut q = quantize(&[0.5f32; 128], 2, 64, 4).unwrap();
            q.w.truncate(8);
            assert!(q.dequantize().unwrap_err().to_string().contains("`w` has 8 elements; a 2 x 64 matrix of 4 bits has 16"));
        }
    }
}
