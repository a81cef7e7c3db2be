//! `kernelgen_verify::check`, the helper for a test of one's own kernel with a Rust reference:
//! a correct reference passes every property and the comparison; a wrong one fails, naming the
//! element; a kernel reading outside a buffer fails the properties.

use kernelgen::contract::Tolerance;
use kernelgen::kernels::gated_rms_norm_dtypes::HEAD128X_GATED_RMS_NORM_F32 as KERNEL;
use kernelgen_emu::EmuBackend;
use kernelgen_verify::properties::check_properties;
use kernelgen_verify::{Case, check, random_case, values};

const D: usize = 128;
const EPS: f64 = 1e-6;

/// The gated RMS norm in f64, from its definition (out = silu(gate) * weight * x / rms(x)).
fn reference(case: &Case) -> Vec<Vec<f64>> {
    let x = values(&case.arrays["x"]);
    let gate = values(&case.arrays["gate"]);
    let weight = values(&case.arrays["weight"]);
    let mut out = Vec::with_capacity(x.len());
    for (row, g) in x.chunks(D).zip(gate.chunks(D)) {
        let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / D as f64 + f64::from(EPS as f32)).sqrt();
        for i in 0..D {
            out.push(g[i] / (1.0 + (-g[i]).exp()) * weight[i] * row[i] * inv);
        }
    }
    vec![out]
}

#[test]
fn a_correct_reference_passes_and_a_wrong_one_fails() {
    let emu = EmuBackend::with_defaults().expect("emulator");
    let tolerance = Tolerance::AbsRel { abs: 1e-6, rel: 1e-5 };
    let agreement = check(&emu, &KERNEL, &[("R", 3)], 7, tolerance, reference).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(agreement.len(), 1);
    assert_eq!(agreement[0].elements, 3 * D);
    assert!(agreement[0].max_bound_use <= 1.0, "{agreement:?}");

    let wrong = |case: &Case| {
        let mut out = reference(case);
        out[0][200] += 0.5;
        out
    };
    let e = check(&emu, &KERNEL, &[("R", 3)], 7, tolerance, wrong).unwrap_err().to_string();
    assert!(e.contains("output `out` element 200") && e.contains("1 of 384 elements are outside it"), "{e}");
    // one output too many: said, not zipped away
    let e = check(&emu, &KERNEL, &[("R", 3)], 7, tolerance, |case| [reference(case), reference(case)].concat()).unwrap_err().to_string();
    assert_eq!(e, "the reference gave 2 outputs for the kernel's 1");
}

/// Sizes whose inputs no machine holds (a family file's `verify.sizes`, a caller's) are an
/// error naming the input and the sizes: they were a multiplication overflow (a panic) or an
/// allocation abort.
#[test]
fn inputs_too_large_for_memory_are_an_error() {
    for r in [1u64 << 40, 1 << 62] {
        let err = random_case(&KERNEL, &[("R", r)], &[], 1).err().expect("refused").to_string();
        assert!(err.contains(&format!("at sizes R={r}")) && err.contains("more than this machine's memory holds"), "{err}");
    }
    assert!(random_case(&KERNEL, &[("R", 3)], &[], 1).is_ok());
}

/// A size the kernel does not have, or one it needs and is not given, is named.
#[test]
fn sizes_are_given_by_name() {
    let err = random_case(&KERNEL, &[], &[], 1).err().expect("refused").to_string();
    assert_eq!(err, "the case gives no run-time size `R`");
    let err = random_case(&KERNEL, &[("R", 3), ("M", 2)], &[], 1).err().expect("refused").to_string();
    assert_eq!(err, "the case gives a run-time size `M`, which the kernel does not have");
}

/// A read one element before a buffer (inside the page its data starts on) fails the
/// properties, naming the buffer and the offset: the runs alternate the data's placement
/// in its pages, so one of them faults there.
#[test]
fn a_read_just_before_a_buffer_fails_the_properties() {
    let emu = EmuBackend::with_defaults().expect("emulator");
    let mut def = KERNEL.clone();
    let read = "const float normalized = weight[col]";
    assert!(def.metal.contains(read));
    def.metal = std::borrow::Cow::Owned(def.metal.replacen(read, "const float normalized = weight[int(col) - 1]", 1));
    def.name = std::borrow::Cow::Borrowed("gated_rms_norm_reads_before_weight");
    let case = random_case(&def, &[("R", 3)], &[], 7).unwrap();
    let e = check_properties(&emu, &def, &case, 7).unwrap_err().to_string();
    assert!(e.contains("invalid read") && e.contains("buffer(2) `weight` at offset -4, before the start of the 512-byte buffer"), "{e}");
}
