//! MLX's affine quantization format, read on real MLX (the CPU build on
//! Linux): `mlx_rs::ops::quantize` of a random f32 [N, K] matrix at 3 and 4
//! bits, group 64, gives packed u32 weights [N, K * bits / 32] and f32 scales
//! and biases [N, K / 64]; unpacking the weights ourselves and computing
//! `scale * q + bias` agrees with MLX's own `dequantize`. This is the format
//! the affine kernels read. Run by `make test-mlx`; nothing is saved.
#![cfg(feature = "mlx")]

use mlx_rs::{Array, Dtype};

const N: usize = 24;
const K: usize = 512;
const GROUP: usize = 64;

/// A deterministic matrix with a wide spread of values (mlx_rs::random, keyed).
fn weights(seed: u64) -> Array {
    let key = mlx_rs::random::key(seed).unwrap();
    let w = mlx_rs::random::normal::<f32>(&[N as i32, K as i32], 0.0, 0.5, &key).unwrap();
    w.eval().unwrap();
    w
}

/// Element `j` of a row of packed words: bits [j*bits, (j+1)*bits) of the
/// row's little-endian, LSB-first bit stream. For 4 bits that is nibble `j % 8`
/// of word `j / 8`, lowest nibble first; for 3 bits, eight values per three
/// bytes, so values straddle word boundaries (j = 10 spans words 0 and 1).
fn unpack(row: &[u32], bits: usize, j: usize) -> u32 {
    let bit = j * bits;
    let (word, shift) = (bit / 32, bit % 32);
    let mut v = u64::from(row[word]) >> shift;
    if shift + bits > 32 {
        v |= u64::from(row[word + 1]) << (32 - shift);
    }
    (v & ((1 << bits) - 1)) as u32
}

fn check(bits: usize, seed: u64) {
    let w = weights(seed);
    let (wq, scales, biases) = mlx_rs::ops::quantize(&w, GROUP as i32, bits as i32).unwrap();
    mlx_rs::transforms::eval([&wq, &scales, &biases]).unwrap();

    assert_eq!(wq.dtype(), Dtype::Uint32);
    assert_eq!(wq.shape(), &[N as i32, (K * bits / 32) as i32]);
    for a in [&scales, &biases] {
        assert_eq!(a.dtype(), Dtype::Float32);
        assert_eq!(a.shape(), &[N as i32, (K / GROUP) as i32]);
    }

    let deq = mlx_rs::ops::dequantize(&wq, &scales, &biases, GROUP as i32, bits as i32).unwrap();
    deq.eval().unwrap();
    assert_eq!(deq.shape(), &[N as i32, K as i32]);

    let (wq, scales, biases) = (
        wq.as_slice::<u32>(),
        scales.as_slice::<f32>(),
        biases.as_slice::<f32>(),
    );
    let (w, deq) = (w.as_slice::<f32>(), deq.as_slice::<f32>());
    let words = K * bits / 32;
    let mut levels = vec![0usize; 1 << bits];
    let mut worst = 0f32;
    for n in 0..N {
        let row = &wq[n * words..(n + 1) * words];
        for k in 0..K {
            let q = unpack(row, bits, k);
            levels[q as usize] += 1;
            let g = n * (K / GROUP) + k / GROUP;
            let (s, b) = (scales[g], biases[g]);
            let ours = s * q as f32 + b;
            let theirs = deq[n * K + k];
            // MLX may fuse the multiply-add: allow one rounding of the result.
            let tol = f32::EPSILON * (s.abs() * q as f32 + b.abs());
            assert!(
                (ours - theirs).abs() <= tol,
                "bits {bits}, [{n}, {k}]: q {q}, ours {ours}, MLX {theirs}"
            );
            // A sanity check of the whole reading: the weight comes back
            // within about a step (MLX snaps one end of each group's range to
            // an exact code, which can clip the other end a little).
            let err = (w[n * K + k] - theirs).abs();
            assert!(
                err <= s.abs() * 2.0,
                "bits {bits}, [{n}, {k}]: {} -> {theirs}",
                w[n * K + k]
            );
            worst = worst.max(err / s.abs());
        }
    }
    // Every code is used, so a misread bit position could not hide.
    assert!(
        levels.iter().all(|&c| c > 0),
        "bits {bits}: codes used {levels:?}"
    );
    eprintln!("bits {bits}: worst |w - dequantize| = {worst:.3} steps; code counts {levels:?}");
}

#[test]
fn four_bit_nibbles_lsb_first() {
    check(4, 4);
}

#[test]
fn three_bit_stream_straddles_words() {
    check(3, 3);
}

#[test]
fn unpack_reads_a_known_stream() {
    // Values 0..=7 at 3 bits fill bits 0..24 (0xFAC688), then 7 and 5 in bits
    // 24..30, then 6 = 0b110 straddles: its low bits 0b10 are bits 30..32 of
    // word 0 and its high bit is bit 0 of word 1.
    let row = [0xFAC688 | (7 << 24) | (5 << 27) | (0b10 << 30), 0b1];
    assert_eq!(row[0], 0xAFFA_C688);
    let want = [0, 1, 2, 3, 4, 5, 6, 7, 7, 5, 6];
    for (j, &v) in want.iter().enumerate() {
        assert_eq!(unpack(&row, 3, j), v, "j {j}");
    }
    assert_eq!(unpack(&[0x7654_3210], 4, 3), 3);
}

#[test]
fn random_state_links_on_linux() {
    // mlx_rs's default random state seeds from mach_approximate_time, which the
    // patched mlx-sys defines on Linux.
    let a = mlx_rs::random::uniform::<_, f32>(0.0, 1.0, &[4], None).unwrap();
    a.eval().unwrap();
    assert!(a.as_slice::<f32>().iter().all(|v| (0.0..1.0).contains(v)));
}

/// kernelgen's own quantizer (`kernelgen::quant::affine`, for callers who
/// bring their weights) gives what MLX's `quantize` gives: the same packed
/// words, scales and biases, on several random matrices, at 3 and 4 bits.
#[test]
fn kernelgen_quantize_is_mlx_quantize() {
    for bits in [3u32, 4] {
        for seed in [1u64, 2, 3] {
            let w = weights(seed + 100 * u64::from(bits));
            let (wq, scales, biases) = mlx_rs::ops::quantize(&w, GROUP as i32, bits as i32).unwrap();
            mlx_rs::transforms::eval([&wq, &scales, &biases]).unwrap();
            let ours = kernelgen::quant::affine::quantize(w.as_slice::<f32>(), N, K, bits).unwrap();
            let differ = |a: &[f32], b: &[f32]| a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            assert_eq!(differ(&ours.scales, scales.as_slice::<f32>()), 0, "bits {bits}, seed {seed}: scales");
            assert_eq!(differ(&ours.biases, biases.as_slice::<f32>()), 0, "bits {bits}, seed {seed}: biases");
            let words = wq.as_slice::<u32>();
            let bad = ours.w.iter().zip(words).filter(|(a, b)| a != b).count();
            assert_eq!(bad, 0, "bits {bits}, seed {seed}: {bad} of {} packed words differ", words.len());
        }
    }
}
