//! The affine family's CUDA body with `cuda_fma_decode`: each product q * x as
//! fma(2^23 + q, x, -2^23 * x), which overflows where 2^23 * 256 * x does, so a block takes that
//! form only where every value of x is finite and below 2^96 in magnitude. Run in the emulator
//! (CUDA mode) on x with a value past that (2^110), an infinity and a NaN, each in a chunk
//! another warp stages than most rows' warps, and on plain x: every output bit for bit the
//! replay model (MLX's affine_qmv_fast). The same body with its guard taken out fails the wide
//! case, so the case is one the guard decides.

use kernelgen::contract::KernelDef;
use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{Config, Input};
use kernelgen_emu::{EmuBackend, HostArray};
use kernelgen_reference::affine::{affine_row_replay_view, Bits, QuantizedView};
use kernelgen_reference::SplitMix64;
use kernelgen_verify::run::run_case;
use kernelgen_verify::{Case, Language};

const K: usize = 1024;
const N: usize = 64;

/// The spec's f32 kernel of `bits`, in CUDA blocks of 2 warps (8 rows), with the FMA form.
fn kernel(bits: u32) -> KernelDef {
    let text = format!(
        "family = \"affine\"\n[axes]\nbits = [{bits}]\ndtype = [\"f32\"]\n[geometry.fma]\nK = {K}\nN = {N}\ncuda_warps = 2\ncuda_fma_decode = true\n"
    );
    let spec = SpecSource { display: "fma.toml".into(), origin: "specs/fma.toml".into(), stem: "fma".into(), text };
    let generated = Config::new().generate(Input::bundled(vec![spec])).unwrap_or_else(|e| panic!("{e}"));
    let name = format!("fma_affine_q{bits}_f32");
    generated.kernels.into_iter().find(|r| r.kernel.name == name).unwrap_or_else(|| panic!("no kernel {name}")).def
}

fn f32s(a: &HostArray) -> Vec<f32> {
    a.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Whether the kernel's y is the replay's, bit for bit (a NaN matches a NaN), on this x; the
/// first difference otherwise.
fn agrees(cuda: &EmuBackend, def: &KernelDef, bits: u32, x: &[f32]) -> Result<(), String> {
    let b = if bits == 3 { Bits::Three } else { Bits::Four };
    let mut rng = SplitMix64::new(7);
    let w: Vec<u32> = (0..N * b.words_per_row(K)).map(|_| rng.next_u64() as u32).collect();
    let scales: Vec<f32> = (0..N * K / 64).map(|_| (rng.unit() * 0.5 + 0.1) as f32).collect();
    let biases: Vec<f32> = (0..N * K / 64).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
    let words = |v: &[u32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    let case = Case::new()
        .array("x", HostArray::from_f32(vec![1, K as u64], x))
        .array("w", HostArray::new(kernelgen::Dtype::U32, vec![N as u64, b.words_per_row(K) as u64], words(&w)))
        .array("scales", HostArray::from_f32(vec![N as u64, (K / 64) as u64], &scales))
        .array("biases", HostArray::from_f32(vec![N as u64, (K / 64) as u64], &biases));
    let outputs = run_case(cuda, def, &case, 1).map_err(|e| e.to_string())?;
    let got = f32s(&outputs[0]);
    let want = affine_row_replay_view(x, &QuantizedView { n: N, k: K, bits: b, w: &w, scales: &scales, biases: &biases });
    for (i, (g, e)) in got.iter().zip(&want).enumerate() {
        if g.to_bits() != e.to_bits() && !(g.is_nan() && e.is_nan()) {
            return Err(format!("y[{i}]: got {g:e}, the replay {e:e}"));
        }
    }
    Ok(())
}

#[test]
fn the_fma_form_is_taken_only_where_x_allows_it() {
    let cuda = EmuBackend::with_defaults().expect("emulator").with_language(Language::Cuda);
    let mut rng = SplitMix64::new(3);
    let plain: Vec<f32> = (0..K).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect();
    // chunk 50 of 64 is staged by warp 1 (lane 18): the block's warp 0 learns of it by the vote.
    // Value 8 of a chunk is one x_thread keeps undivided at either width.
    let at = 50 * 16 + 8;
    let with = |v: f32| {
        let mut x = plain.clone();
        x[at] = v;
        x
    };
    let wide = with(2f32.powi(110));
    for bits in [3, 4] {
        let def = kernel(bits);
        for (what, x) in [("plain", plain.clone()), ("2^110", wide.clone()), ("inf", with(f32::INFINITY)), ("NaN", with(f32::NAN)), ("2^95", with(2f32.powi(95)))] {
            agrees(&cuda, &def, bits, &x).unwrap_or_else(|e| panic!("q{bits}, x with {what}: {e}"));
        }
        // without the guard, the FMA form runs on the wide x: 2^23 * 2^110 is past f32's range
        let mut unguarded = def.clone();
        let cu = unguarded.cuda.as_mut().unwrap();
        assert!(cu.source.contains("  if (narrow) {"), "the body branches on the guard");
        cu.source = cu.source.replacen("  if (narrow) {", "  if (true) {", 1).into();
        agrees(&cuda, &unguarded, bits, &plain).unwrap_or_else(|e| panic!("q{bits} unguarded, plain x: {e}"));
        let e = agrees(&cuda, &unguarded, bits, &wide).expect_err("the FMA form on x with 2^110 differs from the replay");
        assert!(e.starts_with("y["), "{e}");
    }
}
