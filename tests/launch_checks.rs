//! The launch checks themselves, on a recording backend whose arrays are their
//! descriptions, so arguments can be fabricated with any dtype, shape, byte length,
//! layout or address: the conformance suite (`tests/conformance/`), which every backend
//! runs, with the classes no real backend shows (byte lengths, strides, addresses)
//! included, then what only fabricated arguments reach (sizes past the 32-bit limit, a
//! product of dimensions past 2^64, dimensions a family may state but no bundled kernel
//! has).

#[macro_use]
mod conformance;

use conformance::{Harness, launch, rejected, valid};
use kernelgen::backend::{Backend, Checked};
use kernelgen::contract::Source;
use kernelgen::launch::{ArgInfo, BackendError, ErrorKind, MAX_ELEMENTS};
use kernelgen::{Dtype, kernels};
use std::error::Error;

/// Arrays are their descriptions; `run` returns outputs of the plan's dtypes and shapes,
/// which hold no values.
struct Recorder;

impl Backend for Recorder {
    type Array = ArgInfo;
    type Error = std::convert::Infallible;

    fn describe(&self, a: &ArgInfo) -> ArgInfo {
        a.clone()
    }

    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<ArgInfo>, Self::Error> {
        Ok(launch.plan().outputs().iter().map(|o| ArgInfo { dtype: Ok(o.dtype), shape: o.shape.clone(), bytes: o.bytes, row_contiguous: true, address: None }).collect())
    }
}

/// Why a recorded output cannot be read.
#[derive(Debug)]
struct NoValues;

impl std::fmt::Display for NoValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a recording backend runs no kernel")
    }
}

impl Error for NoValues {}

/// A dense, row-major argument at an aligned address.
fn arg(dtype: Result<Dtype, String>, shape: &[u64], bytes: u64) -> ArgInfo {
    ArgInfo { dtype, shape: shape.to_vec(), bytes, row_contiguous: true, address: Some(0x10000) }
}

fn dense(dtype: Dtype, shape: &[u64]) -> ArgInfo {
    arg(Ok(dtype), shape, shape.iter().product::<u64>() * dtype.size() as u64)
}

impl Harness for Recorder {
    type Backend = Recorder;

    fn backend(&self) -> &Recorder {
        self
    }

    fn array(&self, dtype: Dtype, shape: &[u64], bytes: &[u8]) -> ArgInfo {
        arg(Ok(dtype), shape, bytes.len() as u64)
    }

    fn zeros(&self, dtype: Dtype, shape: &[u64]) -> ArgInfo {
        dense(dtype, shape)
    }

    fn read(&self, _: &ArgInfo) -> Result<Vec<u8>, BackendError> {
        Err(Box::new(NoValues))
    }

    fn can_execute(&self) -> bool {
        false
    }

    fn is_unavailable(&self, error: &(dyn Error + 'static)) -> bool {
        error.is::<NoValues>()
    }

    fn whole_catalog(&self) -> bool {
        true
    }

    fn input_budget(&self) -> u64 {
        u64::MAX
    }

    fn with_bytes(&self, dtype: Dtype, shape: &[u64], bytes: usize) -> Option<ArgInfo> {
        Some(arg(Ok(dtype), shape, bytes as u64))
    }

    fn strided(&self, dtype: Dtype, shape: &[u64], _: &[u8]) -> Option<ArgInfo> {
        Some(ArgInfo { row_contiguous: false, ..dense(dtype, shape) })
    }

    fn misaligned(&self, dtype: Dtype, shape: &[u64], offset: usize) -> Option<ArgInfo> {
        Some(ArgInfo { address: Some(0x10000 + offset), ..dense(dtype, shape) })
    }

    fn foreign(&self, shape: &[u64]) -> Option<(ArgInfo, &'static str)> {
        Some((arg(Err("float64".into()), shape, shape.iter().product::<u64>() * 8), "float64"))
    }
}

conformance_tests!(Recorder);

#[test]
fn the_catalog_is_not_empty() {
    assert!(kernels::CATALOG.len() >= 24);
}

/// Sizes whose buffers would pass the 32-bit indexing limit (no backend allocates such
/// arrays to show it).
#[test]
fn oversized_run_time_sizes() {
    for def in kernels::CATALOG.iter().filter(|d| !d.sizes.is_empty()) {
        let mut args = valid(&Recorder, def, 2);
        for (a, b) in args.0.iter_mut().zip(def.data_inputs()) {
            for (axis, d) in b.shape.iter().enumerate() {
                if let Some((_, c)) = d.linear_in_one_size() {
                    a.shape[axis] = c * (MAX_ELEMENTS / c.max(1) + 1);
                }
            }
            a.bytes = a.shape.iter().map(|&x| x as u128).product::<u128>().min(u64::MAX as u128) as u64;
        }
        let (result, launches) = launch(&Recorder, def, &args.0, &args.1);
        let e = result.expect_err("an oversized launch was accepted");
        assert_eq!(launches, 0);
        assert!(e.has(ErrorKind::Size), "{}: {e}", def.name);
    }
}

#[test]
fn every_input_is_passed_filled_or_hosted() {
    for def in kernels::CATALOG {
        let filled = def.inputs.iter().filter(|b| matches!(b.source, Source::SizeValue(_))).count();
        assert_eq!(def.data_inputs().count() + def.host_inputs().count() + filled, def.inputs.len());
    }
}

/// Dimensions each within bounds whose product passes 2^64 (B = 2^26 and T = 2^27 with
/// 16 x 128 per step): a size violation, not an overflow panic inside the check.
#[test]
fn an_element_count_past_2_64_is_a_size_error() {
    let def = &kernels::delta::QWEN35_DELTA_BF16_F32;
    let mut args = valid(&Recorder, def, 2);
    let q = def.data_inputs().position(|b| b.name == "q").unwrap();
    args.0[q].shape = vec![1 << 26, 1 << 27, 16, 128];
    let e = rejected(&Recorder, def, &args, ErrorKind::Size, Some("q"), "2^64 elements");
    assert!(e.to_string().contains(&(1u128 << 64).to_string()), "{e}");
}

/// A dimension `2 * M` (a family file may state one) of odd length: a violation of that
/// argument's dimension, and no second one claiming `M` was given by no argument; a rank
/// error likewise is not followed by one about the sizes its argument would have given.
#[test]
fn a_size_no_argument_gives_is_blamed_on_the_argument() {
    use kernelgen::contract::Dim;
    let mut def = kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP.clone();
    let mut inputs = def.inputs.to_vec();
    let m = def.sizes.iter().position(|s| s == "M").unwrap();
    let mut shape = inputs[0].shape.to_vec();
    shape[0] = Dim::product(2, &[m]);
    inputs[0].shape = shape.into();
    def.inputs = inputs.into();
    let x = def.inputs[0].name.to_string();
    let mut args = valid(&Recorder, &def, 2);
    args.0[0].shape[0] = 3;
    let e = rejected(&Recorder, &def, &args, ErrorKind::Dim, Some(&x), "an odd 2*M");
    assert!(e.to_string().contains("dimension 0 a multiple of 2 (2*M)"), "{e}");
    assert!(!e.violations().iter().any(|v| v.argument.as_deref() == Some("M")), "{e}");
    let mut args = valid(&Recorder, &def, 2);
    args.0[0].shape.push(1);
    let e = rejected(&Recorder, &def, &args, ErrorKind::Rank, Some(&x), "an extra dimension");
    assert!(!e.violations().iter().any(|v| v.argument.as_deref() == Some("M")), "{e}");
}

/// An array of packed buffers (the grouped experts' `slots`, `u8 [S, slot_bytes]`): S is read
/// off its first dimension, the second must be one slot's bytes, and the whole may pass 2^31
/// bytes (256 GLM-5.2 slots are 4.8 GB: the kernels find a slot with 64-bit arithmetic), where
/// any other argument may not.
#[test]
fn an_array_of_slots_gives_s_and_may_pass_2_31_bytes() {
    let def = &kernels::experts::GLM52_EXPERT_Q4_BF16_R4_GATE_UP_GROUPED;
    let slots = def.inputs.iter().find(|b| b.name == "slots").unwrap();
    let slot = slots.packed_bytes().expect("a packed array");
    assert_eq!(slots.region_ranges(2 * slot).len(), 2 * slots.regions.len());
    let args = |s: u64, bytes: u64| (vec![dense(Dtype::Bf16, &[1, 6144]), dense(Dtype::U8, &[s, bytes]), dense(Dtype::U32, &[1, 8])], Vec::new());
    let a = args(256, slot);
    assert!(256 * slot > MAX_ELEMENTS);
    let plan = kernelgen::launch::check(def, &a.0, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.sizes(), [1, 8, 256]); // M, K, S
    let (result, launches) = launch(&Recorder, def, &a.0, &a.1);
    assert!(result.is_ok() && launches == 1);
    rejected(&Recorder, def, &args(256, slot - 4), ErrorKind::Dim, Some("slots"), "slots of the wrong size");
    rejected(&Recorder, def, &args(MAX_ELEMENTS + 1, slot), ErrorKind::Size, None, "more slots than a dimension holds");
}
