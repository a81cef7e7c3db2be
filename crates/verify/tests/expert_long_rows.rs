//! The expert family's CUDA bodies on rows longer than the catalog's tests exercise.
//!
//! `down_grouped` on rows whose last segment is partial:
//! each warp keeps its route's row of mid as 16 f32 a lane at a time, so at I = 2304 a lane's 9
//! Q4 words (18 Q8 words) are taken in segments of 2 (4), the last one partial, each row's
//! lane sum carried across them. No catalog geometry has such rows (glm52's I = 2048 is 4 whole
//! segments), so this runs one in the emulator's CUDA mode: bit for bit the replay model (the
//! order one warp a row sums in), within the f64 model's bound, at K = 5 routes of blocks of 4
//! rows (a second, partial group of routes).
//!
//! `gate_up`, `gate_up_grouped` and `down` with 2, 3 and 4 batches of words in flight
//! (`cuda_batches_ahead`; the catalog keeps 1): their loop takes the batches in groups of the
//! ring's slots, so the last group is partial and some batches load nothing; rows of 3080 values
//! (385 Q4 words, 770 Q8: gate_up's at 2 ahead, down's at 3) end part-way through a step, and
//! rows of 8456 (both parts' at 4 ahead) are too long to stage (read from device memory). Bit for
//! bit the replay model.

use kernelgen_codegen::spec::SpecSource;
use kernelgen_codegen::{Config, Input};
use kernelgen_emu::EmuBackend;
use kernelgen_verify::{Language, Options, Replay, Values, verify_kernel};

#[test]
fn down_grouped_takes_a_long_row_in_segments() {
    let text = "family = \"expert\"\n[axes]\nquant = [\"q4\", \"q8\"]\ndtype = [\"bf16\", \"f32\"]\nrows_per_threadgroup = [4]\n[geometry.long]\nhidden = 64\nintermediate = 2304\n";
    let spec = SpecSource { display: "long.toml".into(), origin: "specs/long.toml".into(), stem: "long".into(), text: text.into() };
    let generated = Config::new().generate(Input::bundled(vec![spec])).unwrap_or_else(|e| panic!("{e}"));
    let cuda = EmuBackend::with_defaults().expect("emulator").with_language(Language::Cuda);
    let mut ran = 0;
    for r in generated.kernels.iter().filter(|r| r.kernel.name.ends_with("_down_grouped")) {
        let name = &r.kernel.name;
        assert_eq!(r.kernel.plan.params.get("DOWN_SEGS").and_then(|v| v.as_u64()), Some(5), "{name}: five segments a row, the last partial");
        let outcome = verify_kernel(&cuda, r, &Options { seed: 5, ..Options::default() });
        assert_eq!((outcome.body, outcome.sizes.as_str()), (Language::Cuda, "M=2,K=5,S=3"), "{name}");
        match outcome.result {
            Ok(Values::Model { replay: Replay::BitForBit, max_ulp, bound }) => assert!(max_ulp <= bound, "{name}: {max_ulp} > {bound}"),
            other => panic!("{name}: {other:?}"),
        }
        ran += 1;
    }
    assert_eq!(ran, 4, "q4 and q8, bf16 and f32");
}

#[test]
fn batches_ahead_keep_the_order_of_the_sums() {
    let text = "family = \"expert\"\n[axes]\nquant = [\"q4\", \"q8\"]\ndtype = [\"bf16\"]\nrows_per_threadgroup = [4]\n\
                [geometry.ahead2]\nhidden = 3080\nintermediate = 40\ncuda_batches_ahead = 2\n\
                [geometry.ahead3]\nhidden = 40\nintermediate = 3080\ncuda_batches_ahead = 3\n\
                [geometry.ahead4h]\nhidden = 8456\nintermediate = 40\ncuda_batches_ahead = 4\n\
                [geometry.ahead4i]\nhidden = 40\nintermediate = 8456\ncuda_batches_ahead = 4\n";
    let spec = SpecSource { display: "ahead.toml".into(), origin: "specs/ahead.toml".into(), stem: "ahead".into(), text: text.into() };
    let generated = Config::new().generate(Input::bundled(vec![spec])).unwrap_or_else(|e| panic!("{e}"));
    let cuda = EmuBackend::with_defaults().expect("emulator").with_language(Language::Cuda);
    let mut ran = 0;
    for r in generated.kernels.iter().filter(|r| !r.kernel.name.ends_with("_down_grouped")) {
        let name = &r.kernel.name;
        // the digit after "ahead" in the geometry's name
        let ahead = name.strip_prefix("ahead").and_then(|rest| rest.chars().next()).and_then(|c| c.to_digit(10)).map(u64::from);
        assert_eq!(r.kernel.plan.params.get("BATCHES_AHEAD").and_then(|v| v.as_u64()), ahead, "{name}");
        let outcome = verify_kernel(&cuda, r, &Options { seed: 7, ..Options::default() });
        assert_eq!(outcome.body, Language::Cuda, "{name}");
        match outcome.result {
            Ok(Values::Model { replay: Replay::BitForBit, max_ulp, bound }) => assert!(max_ulp <= bound, "{name}: {max_ulp} > {bound}"),
            other => panic!("{name}: {other:?}"),
        }
        ran += 1;
    }
    assert_eq!(ran, 24, "gate_up, gate_up_grouped and down, q4 and q8, at four geometries");
}
