//! The affine family's 4-bit CUDA body with `cuda_fma_decode`: each product q * x as
//! fma(2^23 + q, x, -2^23 * x), which overflows where 2^23 * x_thread does, so a block
//! takes that form only where every x_thread is finite and below 2^96 in magnitude. Run in the
//! emulator (CUDA mode) on plain x and on x holding 2^95, 2^110, an infinity and a NaN, each in
//! a chunk another warp stages than most rows' warps: every output bit for bit the replay model
//! (MLX's affine_qmv_fast). Two altered bodies show which form ran: with the plain products
//! replaced by garbage, plain x and 2^95 still agree (the FMA form ran) and 2^110 does not; with
//! the guard taken out, 2^110 differs (the FMA form overflows there).

use kernelgen::contract::KernelDef;
use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{Config, Input};
use kernelgen_emu::{EmuBackend, HostArray};
use kernelgen_reference::affine::{affine_row_replay_view, Bits, QuantizedView};
use kernelgen_reference::{Element, SplitMix64};
use kernelgen_verify::run::run_case;
use kernelgen_verify::{Case, Language};

const K: usize = 1024;
const N: usize = 64;

/// The kernel of `bits` in dtype `T`, in CUDA blocks of 2 warps (8 rows), loading `ahead` steps
/// of K ahead, with the spec's `cuda_fma_decode` (which only 4-bit kernels take).
fn kernel<T: Element>(bits: u32, ahead: u32) -> KernelDef {
    let dtype = T::DTYPE.short_name();
    let text = format!(
        "family = \"affine\"\n[axes]\nbits = [{bits}]\ndtype = [\"{dtype}\"]\n[geometry.fma]\nK = {K}\nN = {N}\ncuda_warps = 2\ncuda_steps_ahead = {ahead}\ncuda_fma_decode = true\n"
    );
    let spec = SpecSource { display: "fma.toml".into(), origin: "specs/fma.toml".into(), stem: "fma".into(), text };
    let generated = Config::new().generate(Input::bundled(vec![spec])).unwrap_or_else(|e| panic!("{e}"));
    let name = format!("fma_affine_q{bits}_{dtype}");
    generated.kernels.into_iter().find(|r| r.kernel.name == name).unwrap_or_else(|| panic!("no kernel {name}")).def
}

/// `def` with its CUDA body's `from` replaced by `to` (once, and it must be there).
fn altered(def: &KernelDef, from: &str, to: &str) -> KernelDef {
    let mut def = def.clone();
    let cu = def.cuda.as_mut().unwrap();
    assert!(cu.source.contains(from), "the body holds {from:?}");
    cu.source = cu.source.replacen(from, to, 1).into();
    def
}

fn array<T: Element>(shape: &[usize], values: &[T]) -> HostArray {
    let bytes = values.iter().flat_map(|v| v.to_bits().to_le_bytes()[..T::DTYPE.size()].to_vec()).collect();
    HostArray::new(T::DTYPE, shape.iter().map(|&d| d as u64).collect(), bytes)
}

/// Whether the kernel's y is the replay's, bit for bit (a NaN matches a NaN), on this x; the
/// first difference otherwise.
fn agrees<T: Element>(cuda: &EmuBackend, def: &KernelDef, bits: u32, x: &[T]) -> Result<(), String> {
    let b = if bits == 3 { Bits::Three } else { Bits::Four };
    let mut rng = SplitMix64::new(7);
    let w: Vec<u32> = (0..N * b.words_per_row(K)).map(|_| rng.next_u64() as u32).collect();
    let scales: Vec<T> = (0..N * K / 64).map(|_| T::from_f32((rng.unit() * 0.5 + 0.1) as f32)).collect();
    let biases: Vec<T> = (0..N * K / 64).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
    let words: Vec<u8> = w.iter().flat_map(|w| w.to_le_bytes()).collect();
    let case = Case::new()
        .array("x", array(&[1, K], x))
        .array("w", HostArray::new(kernelgen::Dtype::U32, vec![N as u64, b.words_per_row(K) as u64], words))
        .array("scales", array(&[N, K / 64], &scales))
        .array("biases", array(&[N, K / 64], &biases));
    let outputs = run_case(cuda, def, &case, 1).map_err(|e| e.to_string())?;
    let want = affine_row_replay_view(x, &QuantizedView { n: N, k: K, bits: b, w: &w, scales: &scales, biases: &biases });
    let size = T::DTYPE.size();
    for (i, (g, e)) in outputs[0].data.chunks_exact(size).zip(&want).enumerate() {
        let mut bytes = [0u8; 4];
        bytes[..size].copy_from_slice(g);
        let g = T::from_bits(u32::from_le_bytes(bytes));
        let (gf, ef) = (g.to_f32(), e.to_f32());
        if g.to_bits() != e.to_bits() && !(gf.is_nan() && ef.is_nan()) {
            return Err(format!("y[{i}]: got {gf:e}, the replay {ef:e}"));
        }
    }
    Ok(())
}

fn check<T: Element>(cuda: &EmuBackend, aheads: &[u32]) {
    let mut rng = SplitMix64::new(3);
    let plain: Vec<T> = (0..K).map(|_| T::from_f32((rng.unit() * 2.0 - 1.0) as f32)).collect();
    // chunk 50 of 64 is staged by warp 1 (lane 18): the block's warp 0 learns of it by the vote.
    // Value 8 of a chunk is one x_thread keeps undivided at either width.
    let with = |v: f32| {
        let mut x = plain.clone();
        x[50 * 16 + 8] = T::from_f32(v);
        x
    };
    let (narrow, wide) = (with(2f32.powi(95)), with(2f32.powi(110)));
    // the FMA form is the 4-bit body's only: a 3-bit kernel of the same geometry has none
    for &ahead in aheads {
        let q3 = kernel::<T>(3, ahead);
        assert!(!q3.cuda.as_ref().unwrap().source.contains("__fmaf_rn"), "a 3-bit body with the FMA form");
        assert!(kernel::<T>(4, ahead).cuda.as_ref().unwrap().source.contains("__fmaf_rn"), "a 4-bit body without the FMA form");
    }
    {
        let bits = 4;
        for &ahead in aheads {
            let def = kernel::<T>(bits, ahead);
            let what = format!("{} q{bits}, {ahead} steps ahead", T::DTYPE.short_name());
            for (x, with) in [(&plain, "plain x"), (&narrow, "2^95"), (&wide, "2^110"), (&with(f32::INFINITY), "inf"), (&with(f32::NAN), "NaN")] {
                agrees(cuda, &def, bits, x).unwrap_or_else(|e| panic!("{what}, {with}: {e}"));
            }
            // the plain products made garbage: the blocks that agree took the FMA form
            let garbage = altered(&def, "    steps(false);", "    for (int r = 0; r < 4; r++) result[r] = 1.0e30f;");
            for (x, with) in [(&plain, "plain x"), (&narrow, "2^95")] {
                agrees(cuda, &garbage, bits, x).unwrap_or_else(|e| panic!("{what}, {with}: the FMA form did not run: {e}"));
            }
            agrees(cuda, &garbage, bits, &wide).expect_err("2^110 takes the plain products");
            // without the guard, the FMA form runs on 2^110, where 2^23 * 2^110 is past f32's range
            let unguarded = altered(&def, "  if (narrow) {", "  if (true) {");
            let e = agrees(cuda, &unguarded, bits, &wide).expect_err("the FMA form on x with 2^110 differs from the replay");
            assert!(e.starts_with("y["), "{what}: {e}");
        }
    }
}

#[test]
fn the_fma_form_is_taken_only_where_x_allows_it() {
    let cuda = EmuBackend::with_defaults().expect("emulator").with_language(Language::Cuda);
    check::<f32>(&cuda, &[0, 1, 2]);
    // bf16 x: its subnormals' x_thread too
    check::<half::bf16>(&cuda, &[0]);
}
