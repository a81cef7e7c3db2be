//! Every precondition of every generated launcher, violated once: each gives
//! its `LaunchError` (naming the kernel and the argument) and launches
//! nothing. A recording backend stands in for a real one, so arguments can
//! be fabricated with any dtype, shape, byte length, layout or address.

use kernelgen::backend::{Backend, launch};
use kernelgen::contract::{BufferDef, KernelDef, Source};
use kernelgen::launch::{ArgInfo, ErrorKind, LaunchError, MAX_ELEMENTS, data_inputs};
use kernelgen::{Dtype, kernels};
use std::cell::Cell;

/// Arrays are their descriptions (plus integer contents for the arguments
/// whose values are bounded); `run_unchecked` only counts launches.
#[derive(Default)]
struct Recorder {
    launches: Cell<usize>,
}

#[derive(Clone, Debug)]
struct Arg {
    info: ArgInfo,
    ints: Option<Vec<i64>>,
}

impl std::ops::Deref for Arg {
    type Target = ArgInfo;
    fn deref(&self) -> &ArgInfo {
        &self.info
    }
}

impl std::ops::DerefMut for Arg {
    fn deref_mut(&mut self) -> &mut ArgInfo {
        &mut self.info
    }
}

impl Backend for Recorder {
    type Array = Arg;

    fn describe(&self, a: &Arg) -> ArgInfo {
        a.info.clone()
    }

    fn read_ints(&self, a: &Arg) -> Option<Vec<i64>> {
        a.ints.clone()
    }

    unsafe fn run_unchecked(
        &self,
        def: &'static KernelDef,
        _: &[&Arg],
        sizes: &[u64],
    ) -> Result<Vec<Arg>, LaunchError> {
        self.launches.set(self.launches.get() + 1);
        let sizes = sizes.to_vec();
        Ok(def.outputs.iter().map(|b| arg(b, &sizes)).collect())
    }
}

/// A well-formed argument for `b` at `sizes` (bounded values at their bound).
fn arg(b: &BufferDef, sizes: &[u64]) -> Arg {
    let shape = b.shape_at(sizes).unwrap();
    let elements: u64 = shape.iter().product();
    let info = ArgInfo {
        dtype: b.dtype,
        bytes: elements * b.dtype.size() as u64,
        shape,
        row_contiguous: true,
        address: Some(0x10000),
        unsupported_dtype: None,
    };
    Arg { info, ints: b.at_most.map(|i| vec![sizes[i] as i64; elements as usize]) }
}

/// Valid arguments for `def` with every run-time size set to `n`.
fn valid(def: &KernelDef, n: u64) -> Vec<Arg> {
    let sizes = vec![n; def.sizes.len()];
    data_inputs(def).map(|b| arg(b, &sizes)).collect()
}

fn run(def: &'static KernelDef, args: &[Arg]) -> (Result<Vec<Arg>, LaunchError>, usize) {
    let backend = Recorder::default();
    let refs: Vec<&Arg> = args.iter().collect();
    let result = launch(&backend, def, &refs);
    (result, backend.launches.get())
}

/// Asserts a rejection of the given kind naming `argument`, with nothing launched.
fn rejected(
    def: &'static KernelDef,
    args: &[Arg],
    kind: ErrorKind,
    argument: Option<&str>,
    what: &str,
) {
    let (result, launches) = run(def, args);
    let e = result
        .err()
        .unwrap_or_else(|| panic!("{}: {what} was accepted", def.name));
    assert_eq!(launches, 0, "{}: {what} launched", def.name);
    assert_eq!(e.kind, kind, "{}: {what}: {e}", def.name);
    assert_eq!(e.kernel, def.name);
    if let Some(a) = argument {
        assert_eq!(e.argument.as_deref(), Some(a), "{}: {what}: {e}", def.name);
        let text = e.to_string();
        assert!(
            text.contains(def.name) && text.contains(&format!("`{a}`")),
            "{text}"
        );
    }
}

fn other_dtype(d: Dtype) -> Dtype {
    if d == Dtype::F32 {
        Dtype::F16
    } else {
        Dtype::F32
    }
}

#[test]
fn the_catalog_is_not_empty() {
    assert!(kernels::CATALOG.len() >= 24);
}

#[test]
fn valid_arguments_launch_once_with_contract_outputs() {
    for def in kernels::CATALOG {
        for n in [1, 3] {
            let (result, launches) = run(def, &valid(def, n));
            let outputs = result.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(launches, 1);
            let sizes = vec![n; def.sizes.len()];
            for (o, b) in outputs.iter().zip(def.outputs) {
                assert_eq!(o.shape, b.shape_at(&sizes).unwrap(), "{}", def.name);
            }
        }
    }
}

#[test]
fn wrong_argument_count() {
    for def in kernels::CATALOG {
        let mut args = valid(def, 2);
        args.pop();
        rejected(
            def,
            &args,
            ErrorKind::ArgumentCount,
            None,
            "one argument too few",
        );
        let mut args = valid(def, 2);
        args.push(args[0].clone());
        rejected(
            def,
            &args,
            ErrorKind::ArgumentCount,
            None,
            "one argument too many",
        );
    }
}

fn each_input(mut f: impl FnMut(&'static KernelDef, usize, &'static BufferDef)) {
    for def in kernels::CATALOG {
        for (i, b) in data_inputs(def).enumerate() {
            f(def, i, b);
        }
    }
}

#[test]
fn wrong_dtype() {
    each_input(|def, i, b| {
        let mut args = valid(def, 2);
        args[i].dtype = other_dtype(b.dtype);
        rejected(def, &args, ErrorKind::Dtype, Some(b.name), "a wrong dtype");
    });
}

#[test]
fn wrong_rank() {
    each_input(|def, i, b| {
        let mut args = valid(def, 2);
        args[i].shape.push(1);
        rejected(
            def,
            &args,
            ErrorKind::Rank,
            Some(b.name),
            "an extra dimension",
        );
        let mut args = valid(def, 2);
        args[i].shape.remove(0);
        rejected(
            def,
            &args,
            ErrorKind::Rank,
            Some(b.name),
            "a missing dimension",
        );
    });
}

#[test]
fn wrong_fixed_dimension() {
    each_input(|def, i, b| {
        for (axis, d) in b.shape.iter().enumerate() {
            if !d.sizes.is_empty() {
                continue;
            }
            let mut args = valid(def, 2);
            args[i].shape[axis] += 1;
            args[i].bytes = args[i].shape.iter().product::<u64>() * b.dtype.size() as u64;
            rejected(
                def,
                &args,
                ErrorKind::Dim,
                Some(b.name),
                &format!("dimension {axis} of `{}` one too large", b.name),
            );
        }
    });
}

#[test]
fn run_time_sizes_that_disagree_between_arguments() {
    // A size carried by two arguments must be the same in both.
    for def in kernels::CATALOG {
        for size in 0..def.sizes.len() {
            let carriers: Vec<(usize, usize)> = data_inputs(def)
                .enumerate()
                .flat_map(|(i, b)| {
                    b.shape
                        .iter()
                        .enumerate()
                        .filter(move |(_, d)| d.sizes.contains(&size))
                        .map(move |(axis, _)| (i, axis))
                })
                .collect();
            if let [_, .., (i, axis)] = carriers[..] {
                let mut args = valid(def, 2);
                args[i].shape[axis] *= 2;
                args[i].bytes *= 2;
                let name = data_inputs(def).nth(i).unwrap().name;
                rejected(
                    def,
                    &args,
                    ErrorKind::Dim,
                    Some(name),
                    "a run-time size that disagrees",
                );
            }
        }
    }
}

#[test]
fn zero_and_oversized_run_time_sizes() {
    for def in kernels::CATALOG {
        if def.sizes.is_empty() {
            continue;
        }
        let args = valid(def, 0);
        let (result, launches) = run(def, &args);
        let e = result.expect_err("a zero size was accepted");
        assert_eq!((e.kind, launches), (ErrorKind::Size, 0), "{e}");
        // Sizes whose buffers would exceed the 32-bit indexing limit.
        let mut args = valid(def, 2);
        for (a, b) in args.iter_mut().zip(data_inputs(def)) {
            for (axis, d) in b.shape.iter().enumerate() {
                if !d.sizes.is_empty() {
                    a.shape[axis] = d.coeff * (MAX_ELEMENTS / d.coeff.max(1) + 1);
                }
            }
            a.bytes = a
                .shape
                .iter()
                .map(|&x| x as u128)
                .product::<u128>()
                .min(u64::MAX as u128) as u64;
        }
        let (result, launches) = run(def, &args);
        let e = result.expect_err("an oversized launch was accepted");
        assert_eq!(launches, 0);
        assert_eq!(e.kind, ErrorKind::Size, "{}: {e}", def.name);
    }
}

#[test]
fn wrong_byte_length() {
    each_input(|def, i, b| {
        for delta in [-1i64, 1] {
            let mut args = valid(def, 2);
            args[i].bytes = (args[i].bytes as i64 + delta) as u64;
            rejected(
                def,
                &args,
                ErrorKind::ByteLength,
                Some(b.name),
                "a byte length that disagrees with the shape",
            );
        }
    });
}

#[test]
fn strided_argument() {
    each_input(|def, i, b| {
        let mut args = valid(def, 2);
        args[i].row_contiguous = false;
        rejected(
            def,
            &args,
            ErrorKind::Layout,
            Some(b.name),
            "a strided view",
        );
    });
}

#[test]
fn misaligned_argument() {
    each_input(|def, i, b| {
        if b.align <= 1 {
            return;
        }
        let mut args = valid(def, 2);
        args[i].address = Some(0x10000 + b.align as usize / 2);
        rejected(
            def,
            &args,
            ErrorKind::Alignment,
            Some(b.name),
            "a misaligned address",
        );
    });
}

#[test]
fn bounded_values_above_their_size() {
    let mut covered = 0;
    each_input(|def, i, b| {
        let Some(size) = b.at_most else { return };
        covered += 1;
        let mut args = valid(def, 3);
        if let Some(v) = args[i].ints.as_mut() {
            v[0] = 4;
        }
        rejected(def, &args, ErrorKind::Value, Some(b.name), &format!("a value above {}", def.sizes[size]));
        // A backend that cannot read the values cannot vouch for them.
        let mut args = valid(def, 3);
        args[i].ints = None;
        rejected(def, &args, ErrorKind::Value, Some(b.name), "unreadable bounded values");
    });
    assert!(covered > 0, "no bundled kernel bounds a value (DeltaNet's prefix state should)");
}

#[test]
fn size_values_are_filled_by_the_launcher_not_passed() {
    for def in kernels::CATALOG {
        let filled = def
            .inputs
            .iter()
            .filter(|b| matches!(b.source, Source::SizeValue(_)))
            .count();
        assert_eq!(data_inputs(def).count() + filled, def.inputs.len());
    }
}
