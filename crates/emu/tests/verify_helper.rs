//! `kernelgen_emu::verify::check`, the helper for a test of one's own kernel
//! with a Rust reference: a correct reference passes every property and the
//! comparison; a wrong one fails, naming the element.

use kernelgen::contract::Tolerance;
use kernelgen::kernels::gated_rms_norm_dtypes::HEAD128X_GATED_RMS_NORM_F32 as KERNEL;
use kernelgen_emu::{EmuBackend, verify};

const D: usize = 128;
const EPS: f64 = 1e-6;

/// The gated RMS norm in f64, from its definition (out = silu(gate) * weight * x / rms(x)).
fn reference(case: &verify::Case) -> Vec<Vec<f64>> {
    let x = verify::values(&case.arrays[0]).unwrap();
    let gate = verify::values(&case.arrays[1]).unwrap();
    let weight = verify::values(&case.arrays[2]).unwrap();
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
    let agreement = verify::check(&emu, &KERNEL, &[3], 7, tolerance, reference).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(agreement.len(), 1);
    assert_eq!(agreement[0].elements, 3 * D);

    let wrong = |case: &verify::Case| {
        let mut out = reference(case);
        out[0][200] += 0.5;
        out
    };
    let e = verify::check(&emu, &KERNEL, &[3], 7, tolerance, wrong).unwrap_err();
    assert!(e.contains("output `out` element 200") && e.contains("1 of 384 elements are outside it"), "{e}");
}

/// Sizes whose inputs no machine holds (a family file's `verify.sizes`, a caller's) are an
/// error naming the input and the sizes: they were a multiplication overflow (a panic) or an
/// allocation abort.
#[test]
fn inputs_too_large_for_memory_are_an_error() {
    for r in [1u64 << 40, 1 << 62] {
        let err = verify::random_case(&KERNEL, &[r], &[], 1).err().expect("refused");
        assert!(err.contains(&format!("at sizes R={r}")) && err.contains("more than this machine's memory holds"), "{err}");
    }
    assert!(verify::random_case(&KERNEL, &[3], &[], 1).is_ok());
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
    let case = verify::random_case(&def, &[3], &[], 7).unwrap();
    let e = verify::check_properties(&emu, &def, &case, 7).unwrap_err().to_string();
    assert!(e.contains("invalid read") && e.contains("buffer(2) `weight` at offset -4, before the start of the 512-byte buffer"), "{e}");
}
