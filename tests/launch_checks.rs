//! Every precondition of every generated launcher, violated once: each gives
//! a `LaunchError` naming the kernel and the argument, and launches nothing;
//! several violations of one launch are all reported. A recording backend
//! stands in for a real one, so arguments can be fabricated with any dtype,
//! shape, byte length, layout or address.

use kernelgen::backend::{Backend, Checked, launch_vec};
use kernelgen::contract::{BufferDef, KernelDef, Source};
use kernelgen::launch::{ArgInfo, ErrorKind, LaunchError, MAX_ELEMENTS};
use kernelgen::{Dtype, kernels};
use std::cell::Cell;

/// Arrays are their descriptions; `run` only counts launches.
#[derive(Default)]
struct Recorder {
    launches: Cell<usize>,
}

impl Backend for Recorder {
    type Array = ArgInfo;
    type Error = std::convert::Infallible;

    fn describe(&self, a: &ArgInfo) -> ArgInfo {
        a.clone()
    }

    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<ArgInfo>, Self::Error> {
        self.launches.set(self.launches.get() + 1);
        Ok(launch
            .plan()
            .outputs()
            .iter()
            .map(|o| ArgInfo { dtype: Ok(o.dtype), shape: o.shape.clone(), bytes: o.bytes, row_contiguous: true, address: None })
            .collect())
    }
}

/// A well-formed argument for `b` at `sizes`.
fn arg(b: &BufferDef, sizes: &[u64]) -> ArgInfo {
    let shape = b.shape_at(sizes).unwrap();
    let elements: u64 = shape.iter().product();
    ArgInfo { dtype: Ok(b.dtype), bytes: elements * b.dtype.size() as u64, shape, row_contiguous: true, address: Some(0x10000) }
}

/// Valid arrays and host integers for `def` with every run-time size set to
/// `n` (bounded values at their bound).
fn valid(def: &KernelDef, n: u64) -> (Vec<ArgInfo>, Vec<Vec<i32>>) {
    let sizes = vec![n; def.sizes.len()];
    let arrays = def.data_inputs().map(|b| arg(b, &sizes)).collect();
    let host = def
        .host_inputs()
        .map(|b| {
            let value = b.at_most.map_or(0, |i| sizes[i] as i32);
            vec![value; b.elements(&sizes).unwrap() as usize]
        })
        .collect();
    (arrays, host)
}

fn run(def: &KernelDef, arrays: &[ArgInfo], host: &[Vec<i32>]) -> (Result<Vec<ArgInfo>, LaunchError>, usize) {
    let backend = Recorder::default();
    let refs: Vec<&ArgInfo> = arrays.iter().collect();
    let host: Vec<&[i32]> = host.iter().map(Vec::as_slice).collect();
    let result = launch_vec(&backend, def, &refs, &host);
    (result, backend.launches.get())
}

/// Asserts a rejection with a violation of the given kind naming `argument`,
/// with nothing launched; returns the error.
fn rejected(def: &KernelDef, args: &(Vec<ArgInfo>, Vec<Vec<i32>>), kind: ErrorKind, argument: Option<&str>, what: &str) -> LaunchError {
    let (result, launches) = run(def, &args.0, &args.1);
    let e = result.err().unwrap_or_else(|| panic!("{}: {what} was accepted", def.name));
    assert_eq!(launches, 0, "{}: {what} launched", def.name);
    assert_eq!(e.kernel(), def.name, "{e}");
    assert!(
        e.violations().iter().any(|v| v.kind == kind && (argument.is_none() || v.argument.as_deref() == argument)),
        "{}: {what}: expected a {kind:?} violation of {argument:?}, got: {e}",
        def.name
    );
    let text = e.to_string();
    assert!(text.contains(def.name.as_ref()), "{text}");
    if let Some(a) = argument {
        assert!(text.contains(&format!("`{a}`")), "{text}");
    }
    e
}

fn other_dtype(d: Dtype) -> Dtype {
    if d == Dtype::F32 { Dtype::F16 } else { Dtype::F32 }
}

#[test]
fn the_catalog_is_not_empty() {
    assert!(kernels::CATALOG.len() >= 24);
}

#[test]
fn valid_arguments_launch_once_with_contract_outputs() {
    for def in kernels::CATALOG {
        for n in [1, 3] {
            let (arrays, host) = valid(def, n);
            let (result, launches) = run(def, &arrays, &host);
            let outputs = result.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(launches, 1);
            let sizes = vec![n; def.sizes.len()];
            for (o, b) in outputs.iter().zip(def.outputs.iter()) {
                assert_eq!(o.shape, b.shape_at(&sizes).unwrap(), "{}", def.name);
            }
        }
    }
}

#[test]
fn wrong_argument_count() {
    for def in kernels::CATALOG {
        let mut args = valid(def, 2);
        args.0.pop();
        rejected(def, &args, ErrorKind::ArgumentCount, None, "one array too few");
        let mut args = valid(def, 2);
        args.0.push(args.0[0].clone());
        rejected(def, &args, ErrorKind::ArgumentCount, None, "one array too many");
        let mut args = valid(def, 2);
        args.1.push(vec![1]);
        rejected(def, &args, ErrorKind::ArgumentCount, None, "one host argument too many");
    }
}

fn each_input(mut f: impl FnMut(&'static KernelDef, usize, &'static BufferDef)) {
    for def in kernels::CATALOG {
        for (i, b) in def.data_inputs().enumerate() {
            f(def, i, b);
        }
    }
}

#[test]
fn wrong_dtype() {
    each_input(|def, i, b| {
        let mut args = valid(def, 2);
        args.0[i].dtype = Ok(other_dtype(b.dtype));
        rejected(def, &args, ErrorKind::Dtype, Some(&b.name), "a wrong dtype");
        let mut args = valid(def, 2);
        args.0[i].dtype = Err("float64".into());
        let e = rejected(def, &args, ErrorKind::Dtype, Some(&b.name), "a dtype no contract has");
        assert!(e.to_string().contains("float64"), "{e}");
    });
}

#[test]
fn wrong_rank() {
    each_input(|def, i, b| {
        let mut args = valid(def, 2);
        args.0[i].shape.push(1);
        rejected(def, &args, ErrorKind::Rank, Some(&b.name), "an extra dimension");
        let mut args = valid(def, 2);
        args.0[i].shape.remove(0);
        rejected(def, &args, ErrorKind::Rank, Some(&b.name), "a missing dimension");
    });
}

#[test]
fn wrong_fixed_dimension() {
    each_input(|def, i, b| {
        for (axis, d) in b.shape.iter().enumerate() {
            if d.as_fixed().is_none() {
                continue;
            }
            let mut args = valid(def, 2);
            args.0[i].shape[axis] += 1;
            args.0[i].bytes = args.0[i].shape.iter().product::<u64>() * b.dtype.size() as u64;
            let e = rejected(def, &args, ErrorKind::Dim, Some(&b.name), &format!("dimension {axis} of `{}` one too large", b.name));
            // A fixed shape is shown once, not as an expression equal to itself.
            if b.shape.iter().all(|d| d.as_fixed().is_some()) {
                let v = e.violations().iter().find(|v| v.kind == ErrorKind::Dim).unwrap();
                assert!(!v.expected.contains(" = "), "{v}");
            }
        }
    });
}

#[test]
fn run_time_sizes_that_disagree_between_arguments() {
    // A size carried by two arguments must be the same in both.
    let mut covered = 0;
    for def in kernels::CATALOG {
        for size in 0..def.sizes.len() {
            let carriers: Vec<(usize, usize)> = def
                .data_inputs()
                .enumerate()
                .flat_map(|(i, b)| {
                    b.shape.iter().enumerate().filter(move |(_, d)| d.linear_in_one_size().is_some_and(|(s, _)| s == size)).map(move |(axis, _)| (i, axis))
                })
                .collect();
            if let [_, .., (i, axis)] = carriers[..] {
                covered += 1;
                let mut args = valid(def, 2);
                args.0[i].shape[axis] *= 2;
                args.0[i].bytes *= 2;
                let name = def.data_inputs().nth(i).unwrap().name.to_string();
                let e = rejected(def, &args, ErrorKind::Dim, Some(&name), "a run-time size that disagrees");
                // The message says where the size was read.
                assert!(e.to_string().contains("from `"), "{e}");
            }
        }
    }
    assert!(covered > 0);
}

#[test]
fn zero_and_oversized_run_time_sizes() {
    for def in kernels::CATALOG {
        if def.sizes.is_empty() {
            continue;
        }
        let args = valid(def, 0);
        rejected(def, &args, ErrorKind::Size, None, "a zero size");
        // Sizes whose buffers would exceed the 32-bit indexing limit.
        let mut args = valid(def, 2);
        for (a, b) in args.0.iter_mut().zip(def.data_inputs()) {
            for (axis, d) in b.shape.iter().enumerate() {
                if let Some((_, c)) = d.linear_in_one_size() {
                    a.shape[axis] = c * (MAX_ELEMENTS / c.max(1) + 1);
                }
            }
            a.bytes = a.shape.iter().map(|&x| x as u128).product::<u128>().min(u64::MAX as u128) as u64;
        }
        let (result, launches) = run(def, &args.0, &args.1);
        let e = result.expect_err("an oversized launch was accepted");
        assert_eq!(launches, 0);
        assert!(e.has(ErrorKind::Size), "{}: {e}", def.name);
    }
}

#[test]
fn wrong_byte_length() {
    each_input(|def, i, b| {
        for delta in [-1i64, 1] {
            let mut args = valid(def, 2);
            args.0[i].bytes = (args.0[i].bytes as i64 + delta) as u64;
            rejected(def, &args, ErrorKind::ByteLength, Some(&b.name), "a byte length that disagrees with the shape");
        }
    });
}

#[test]
fn strided_argument() {
    each_input(|def, i, b| {
        let mut args = valid(def, 2);
        args.0[i].row_contiguous = false;
        rejected(def, &args, ErrorKind::Layout, Some(&b.name), "a strided view");
    });
}

#[test]
fn misaligned_argument() {
    each_input(|def, i, b| {
        if b.align <= 1 {
            return;
        }
        let mut args = valid(def, 2);
        args.0[i].address = Some(0x10000 + b.align as usize / 2);
        rejected(def, &args, ErrorKind::Alignment, Some(&b.name), "a misaligned address");
    });
}

#[test]
fn bounded_host_values_outside_their_range() {
    let mut covered = 0;
    for def in kernels::CATALOG {
        for (i, b) in def.host_inputs().enumerate() {
            let Some(size) = b.at_most else { continue };
            covered += 1;
            for bad in [4, -1] {
                let mut args = valid(def, 3);
                args.1[i][0] = bad;
                rejected(def, &args, ErrorKind::Value, Some(&b.name), &format!("{bad}, outside 0..={}", def.sizes[size]));
            }
            let mut args = valid(def, 3);
            args.1[i].push(1);
            rejected(def, &args, ErrorKind::Dim, Some(&b.name), "one host value too many");
        }
    }
    assert!(covered > 0, "no bundled kernel bounds a value (DeltaNet's prefix state should)");
}

#[test]
fn every_input_is_passed_filled_or_hosted() {
    for def in kernels::CATALOG {
        let filled = def.inputs.iter().filter(|b| matches!(b.source, Source::SizeValue(_))).count();
        assert_eq!(def.data_inputs().count() + def.host_inputs().count() + filled, def.inputs.len());
    }
}

/// Three wrong arguments of one launch are three violations in one error.
#[test]
fn every_violation_of_a_launch_is_reported() {
    use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;
    let (mut arrays, host) = valid(&DEF, 2);
    arrays[0].dtype = Ok(Dtype::F32); // x: a wrong dtype
    arrays[1].shape = vec![100]; // slot: a wrong size
    arrays[1].bytes = 100;
    arrays[0].row_contiguous = false; // x: strided too
    let (result, launches) = run(&DEF, &arrays, &host);
    let e = result.expect_err("accepted");
    assert_eq!(launches, 0);
    let kinds: Vec<(ErrorKind, Option<&str>)> = e.violations().iter().map(|v| (v.kind, v.argument.as_deref())).collect();
    assert_eq!(
        kinds,
        [(ErrorKind::Dtype, Some("x")), (ErrorKind::Layout, Some("x")), (ErrorKind::Dim, Some("slot"))],
        "{e}"
    );
    let text = e.to_string();
    assert!(text.contains("3 problems, nothing was launched"), "{text}");
    // A fixed size is printed once.
    assert!(text.contains("expected shape [73728], given shape [100]"), "{text}");
}

/// A packed slot of another geometry of the same spec is named in the error.
#[test]
fn a_slot_of_another_geometry_is_named() {
    use kernelgen::kernels::experts::{self, QWEN3MOE_EXPERT_Q4_BF16_R4_GATE_UP as OTHER, TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF};
    let (mut arrays, host) = valid(&DEF, 2);
    let slot = OTHER.inputs[1].shape[0].as_fixed().unwrap();
    arrays[1].shape = vec![slot];
    arrays[1].bytes = slot;
    let (result, _) = run(&DEF, &arrays, &host);
    let e = result.expect_err("accepted").with_hints_from(experts::KERNELS);
    let v = &e.violations()[0];
    assert_eq!(v.argument.as_deref(), Some("slot"));
    let hint = v.hint.as_deref().unwrap_or_else(|| panic!("no hint: {e}"));
    assert!(hint.contains(OTHER.name.as_ref()), "{hint}");
    assert!(!hint.contains(DEF.name.as_ref()), "{hint}");
}

/// Dimensions each within bounds whose product passes 2^64 (B = 2^26 and T = 2^27 with
/// 16 x 128 per step): a size violation, not an overflow panic inside the check.
#[test]
fn an_element_count_past_2_64_is_a_size_error() {
    let def = &kernels::delta::QWEN35_DELTA_BF16_F32;
    let mut args = valid(def, 2);
    let q = def.data_inputs().position(|b| b.name == "q").unwrap();
    args.0[q].shape = vec![1 << 26, 1 << 27, 16, 128];
    let e = rejected(def, &args, ErrorKind::Size, Some("q"), "2^64 elements");
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
    let mut args = valid(&def, 2);
    args.0[0].shape[0] = 3;
    let e = rejected(&def, &args, ErrorKind::Dim, Some(&x), "an odd 2*M");
    assert!(e.to_string().contains("dimension 0 a multiple of 2 (2*M)"), "{e}");
    assert!(!e.violations().iter().any(|v| v.argument.as_deref() == Some("M")), "{e}");
    let mut args = valid(&def, 2);
    args.0[0].shape.push(1);
    let e = rejected(&def, &args, ErrorKind::Rank, Some(&x), "an extra dimension");
    assert!(!e.violations().iter().any(|v| v.argument.as_deref() == Some("M")), "{e}");
}
