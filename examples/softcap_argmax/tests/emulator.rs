//! The crate's own kernel through the emulator backend, launched by both sets
//! of launchers (the build script's and include_specs!'s), against an
//! independent Rust model of `mx.argmax(mx.tanh(x / cap) * cap, -1)` in T.

use kernelgen::Dtype;
use kernelgen::half::{bf16, f16};
use kernelgen_emu::{EmuBackend, HostArray};
use softcap_argmax_example::{built, softcap_argmax};

/// The dtype T of a kernel, and its rounding of an f32.
#[derive(Clone, Copy, Debug)]
enum T {
    Bf16,
    F16,
    F32,
}

impl T {
    fn round(self, x: f32) -> f32 {
        match self {
            T::Bf16 => bf16::from_f32(x).to_f32(),
            T::F16 => f16::from_f32(x).to_f32(),
            T::F32 => x,
        }
    }

    fn array(self, shape: Vec<u64>, values: &[f32]) -> HostArray {
        match self {
            T::Bf16 => HostArray::from_bf16(shape, &values.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>()),
            T::F16 => HostArray::from_f16(shape, &values.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>()),
            T::F32 => HostArray::from_f32(shape, values),
        }
    }
}

/// Per row: the first index of the largest `T(T(tanh(T(x / capT))) * capT)`
/// and that value, with every step rounded to T (f32's `tanh` is the C
/// library's tanhf, as in the emulator). A NaN never wins.
fn model(t: T, x: &[f32], v: usize, cap: f64) -> (Vec<u32>, Vec<f32>) {
    let cap_t = t.round(cap as f32);
    let mut tokens = Vec::new();
    let mut values = Vec::new();
    for row in x.chunks(v) {
        let (mut token, mut value) = (0u32, f32::NEG_INFINITY);
        for (i, &xi) in row.iter().enumerate() {
            let s = t.round(t.round(t.round(xi / cap_t).tanh()) * cap_t);
            if s > value {
                (token, value) = (i as u32, s);
            }
        }
        tokens.push(token);
        values.push(value);
    }
    (tokens, values)
}

/// Deterministic values in `[-40, 40)`, already in T.
fn logits(t: T, n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            // SplitMix64.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let unit = ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64;
            t.round((unit * 80.0 - 40.0) as f32)
        })
        .collect()
}

fn tokens_of(a: &HostArray) -> Vec<u32> {
    assert_eq!(a.dtype, Dtype::U32);
    a.data.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Launches the kernel and compares both outputs with the model, bit for bit.
fn check(t: T, x: &[f32], v: usize, cap: f64, launch: impl Fn(&HostArray) -> (HostArray, HostArray)) {
    let r = x.len() / v;
    let (token, value) = launch(&t.array(vec![r as u64, v as u64], x));
    let (want_tokens, want_values) = model(t, x, v, cap);
    assert_eq!(tokens_of(&token), want_tokens, "{t:?} V={v}: tokens");
    assert_eq!(value, t.array(vec![r as u64], &want_values), "{t:?} V={v}: values {:?}, want {want_values:?}", value.to_f32());
}

#[test]
fn the_vocab152k_kernels_match_the_model() {
    let emu = EmuBackend::with_defaults().unwrap();
    let v = 151_936;
    let t = T::Bf16;
    let x = logits(t, 2 * v, 1);
    // The crate's own function (build-script launchers), then the include_specs! ones.
    check(t, &x, v, 30.0, |x| softcap_argmax_example::next_tokens(&emu, x).unwrap());
    check(t, &x, v, 30.0, |x| {
        let o = softcap_argmax::Vocab152kSoftcapArgmaxBf16::launch(&emu, x).unwrap();
        (o.token, o.value)
    });
    let t = T::F16;
    let x = logits(t, 2 * v, 9);
    check(t, &x, v, 30.0, |x| {
        let o = softcap_argmax::Vocab152kSoftcapArgmaxF16::launch(&emu, x).unwrap();
        (o.token, o.value)
    });
    let t = T::F32;
    let x = logits(t, 2 * v, 2);
    check(t, &x, v, 30.0, |x| {
        let o = built::softcap_argmax::Vocab152kSoftcapArgmaxF32::launch(&emu, x).unwrap();
        (o.token, o.value)
    });
}

#[test]
fn every_dtype_of_the_small_geometries_matches_the_model() {
    let emu = EmuBackend::with_defaults().unwrap();
    macro_rules! both {
        ($t:expr, $v:expr, $cap:expr, $kernel:ident, $seed:expr) => {{
            let x = logits($t, 3 * $v, $seed);
            check($t, &x, $v, $cap, |x| {
                let o = built::softcap_argmax::$kernel::launch(&emu, x).unwrap();
                (o.token, o.value)
            });
            check($t, &x, $v, $cap, |x| {
                let o = softcap_argmax::$kernel::launch(&emu, x).unwrap();
                (o.token, o.value)
            });
        }};
    }
    both!(T::Bf16, 1000, 5.0, SmallSoftcapArgmaxBf16, 3);
    both!(T::F16, 1000, 5.0, SmallSoftcapArgmaxF16, 4);
    both!(T::F32, 1000, 5.0, SmallSoftcapArgmaxF32, 5);
    both!(T::Bf16, 20, 2.5, TinySoftcapArgmaxBf16, 6);
    both!(T::F16, 20, 2.5, TinySoftcapArgmaxF16, 7);
    both!(T::F32, 20, 2.5, TinySoftcapArgmaxF32, 8);
}

#[test]
fn ties_go_to_the_lowest_index_and_nan_never_wins() {
    let emu = EmuBackend::with_defaults().unwrap();
    let v = 1000;
    let launch = |x: &HostArray| {
        let o = built::softcap_argmax::SmallSoftcapArgmaxF32::launch(&emu, x).unwrap();
        (tokens_of(&o.token), o.value.to_f32().unwrap())
    };
    let mut x = vec![0.0f32; 4 * v];
    // Row 0: every logit equal; row 1: the maximum at 700 and at 300 (another
    // thread, another SIMD-group); row 2: a NaN above a real maximum; row 3: only NaNs.
    x[v + 700] = 3.0;
    x[v + 300] = 3.0;
    x[2 * v + 5] = f32::NAN;
    x[2 * v + 999] = 1.0;
    x[3 * v..].fill(f32::NAN);
    let (tokens, values) = launch(&T::F32.array(vec![4, v as u64], &x));
    assert_eq!(tokens, [0, 300, 999, 0]);
    let capped = |x: f32| (x / 5.0).tanh() * 5.0;
    assert_eq!(values, [0.0, capped(3.0), capped(1.0), f32::NEG_INFINITY]);
    // Saturated logits: tanh rounds to 1 in bf16, so many logits tie at cap.
    let mut x = vec![-1.0f32; v];
    for i in [17, 400, 401, 999] {
        x[i] = 30.0 + i as f32;
    }
    let o = built::softcap_argmax::SmallSoftcapArgmaxBf16::launch(&emu, &T::Bf16.array(vec![1, v as u64], &x)).unwrap();
    assert_eq!((tokens_of(&o.token), o.value.to_f32().unwrap()), (vec![17], vec![5.0]));
}

#[test]
fn a_wrong_shape_is_refused_before_anything_runs() {
    let emu = EmuBackend::with_defaults().unwrap();
    let x = T::Bf16.array(vec![2, 1001], &vec![0.0; 2002]);
    let e = built::softcap_argmax::SmallSoftcapArgmaxBf16::launch(&emu, &x).err().expect("V = 1001 is not the kernel's 1000");
    let message = e.to_string();
    assert!(message.contains("logits"), "{message}");
}
