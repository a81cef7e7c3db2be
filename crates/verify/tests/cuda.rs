//! A kernel's CUDA body through the library: `check` given the emulator in CUDA mode
//! (`EmuBackend::with_language`) runs `def.cuda` on the same case, with every property and the
//! same reference as the Metal body (the generator's fixture family `rowscale`, which has both);
//! a planted bug in the CUDA body fails it, and a Metal-only kernel is refused in CUDA mode.

use kernelgen::contract::{KernelDef, Tolerance};
use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{Config, Input, read_families};
use kernelgen_emu::EmuBackend;
use kernelgen_verify::{Case, Language, check, values};
use std::path::PathBuf;

/// The rowscale fixture's kernel of `dtype`, with both bodies.
fn rowscale(dtype: &str) -> KernelDef {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../codegen/tests/fixtures");
    let spec = fixtures.join("rowscale.toml");
    let input = Input {
        specs: vec![SpecSource { display: "rowscale.toml".into(), origin: "specs/rowscale.toml".into(), stem: "rowscale".into(), text: std::fs::read_to_string(&spec).unwrap() }],
        families: read_families(&[fixtures.join("families")]).unwrap_or_else(|e| panic!("{e}")),
    };
    let generated = Config::new().generate(input).unwrap_or_else(|e| panic!("{e}"));
    let name = format!("fixture_rowscale_{dtype}");
    generated.kernels.into_iter().find(|r| r.kernel.name == name).unwrap_or_else(|| panic!("no kernel {name}")).def
}

/// y = x * s[0] in the output's dtype, and each row's sum of it (in f64: both bodies sum in f32).
fn reference(case: &Case) -> Vec<Vec<f64>> {
    let (x, s) = (values(&case.arrays["x"]), values(&case.arrays["s"])[0]);
    let y: Vec<f64> = x.iter().map(|v| v * s).collect();
    let sums = y.chunks(64).map(|row| row.iter().sum()).collect();
    vec![y, sums]
}

#[test]
fn a_cuda_body_is_checked_like_the_metal_one() {
    let emu = EmuBackend::with_defaults().expect("emulator");
    let cuda = emu.with_language(Language::Cuda);
    let tolerance = Tolerance::AbsRel { abs: 1e-5, rel: 1e-2 };
    for dtype in ["f32", "bf16"] {
        let def = rowscale(dtype);
        assert!(def.cuda.is_some(), "the fixture has a CUDA body");
        for backend in [&emu, &cuda] {
            let agreement = check(backend, &def, &[("R", 5)], 11, tolerance, reference).unwrap_or_else(|e| panic!("{dtype} {:?}: {e}", backend.language()));
            assert_eq!((agreement[0].elements, agreement[1].elements), (5 * 64, 5));
        }
    }

    // a mask leaving out half the calling lanes: the CUDA body fails at its line, the Metal one is untouched
    let mut def = rowscale("f32");
    let path = def.cuda.as_ref().unwrap().path.to_string();
    let cu = def.cuda.as_mut().unwrap();
    cu.source = cu.source.replacen("__shfl_xor_sync(0xffffffffu", "__shfl_xor_sync(0xffffu", 1).into();
    let line = cu.source.lines().position(|l| l.contains("0xffffu")).unwrap() + 1;
    let e = check(&cuda, &def, &[("R", 5)], 11, tolerance, reference).unwrap_err().to_string();
    assert!(e.contains(&format!("{path}:{line}:")) && e.contains("mask 0x0000ffff"), "{e}");
    check(&emu, &def, &[("R", 5)], 11, tolerance, reference).unwrap_or_else(|e| panic!("{e}"));

    // a Metal-only kernel (the fixture without its CUDA body) has no CUDA body to run
    let metal_only = KernelDef { cuda: None, ..rowscale("f32") };
    let e = check(&cuda, &metal_only, &[("R", 1)], 1, tolerance, |_| vec![]).unwrap_err().to_string();
    assert!(e.contains(&format!("`{}`", metal_only.name)) && e.contains("no CUDA body"), "{e}");
}

/// Each body is held to its own shared memory: the CUDA body's `static_shared_memory_bytes`
/// (the family's `cuda_shared_memory`), the Metal body's `threadgroup_memory_bytes`. A wrong
/// figure for one fails that body's check, naming which memory, and leaves the other's alone.
#[test]
fn each_body_is_held_to_its_own_shared_memory() {
    let emu = EmuBackend::with_defaults().expect("emulator");
    let cuda = emu.with_language(Language::Cuda);
    let tolerance = Tolerance::AbsRel { abs: 1e-5, rel: 1e-2 };

    let mut def = rowscale("f32");
    def.cuda.as_mut().unwrap().static_shared_memory_bytes = 64;
    let e = check(&cuda, &def, &[("R", 2)], 3, tolerance, reference).unwrap_err().to_string();
    assert!(e.contains("declares 64 bytes of shared memory for the CUDA body") && e.contains("take 0 bytes"), "{e}");
    check(&emu, &def, &[("R", 2)], 3, tolerance, reference).unwrap_or_else(|e| panic!("{e}"));

    let mut def = rowscale("f32");
    def.threadgroup_memory_bytes = 64;
    let e = check(&emu, &def, &[("R", 2)], 3, tolerance, reference).unwrap_err().to_string();
    assert!(e.contains("declares 64 bytes of threadgroup memory") && e.contains("threadgroup arrays take 0 bytes"), "{e}");
    check(&cuda, &def, &[("R", 2)], 3, tolerance, reference).unwrap_or_else(|e| panic!("{e}"));
}

/// A CUDA body runs in blocks of its own shape (`cuda_threadgroup`), not the Metal threadgroup:
/// the fixture's body assumes a block of one warp (its row is `blockIdx.x`), so blocks of two
/// warps leave half the rows unwritten, which `check` finds; the Metal body is unaffected.
#[test]
fn a_cuda_body_runs_in_its_own_blocks() {
    let emu = EmuBackend::with_defaults().expect("emulator");
    let cuda = emu.with_language(Language::Cuda);
    let tolerance = Tolerance::AbsRel { abs: 1e-5, rel: 1e-2 };

    let mut def = rowscale("f32");
    assert_eq!(def.cuda.as_ref().unwrap().threadgroup, def.threadgroup, "by default the Metal threadgroup");
    def.cuda.as_mut().unwrap().threadgroup = [64, 1, 1];
    let e = check(&cuda, &def, &[("R", 4)], 3, tolerance, reference).unwrap_err().to_string();
    assert!(e.contains("128 elements of output `y` are never written"), "{e}");
    check(&emu, &def, &[("R", 4)], 3, tolerance, reference).unwrap_or_else(|e| panic!("{e}"));
}
