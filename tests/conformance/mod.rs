//! One conformance suite for every backend (the model is cubecl's `testgen_all!`): each
//! class of launch error, named and launching nothing; output shapes and dtypes; a kernel
//! of every bundled family against its reference; a chain of launches, lazy where the
//! backend can show it. A backend's test file implements [`Harness`] (making arrays,
//! reading them back, what the backend can show) and expands `conformance_tests!` with it:
//!
//! - `tests/conformance_emu.rs`: the emulator (`make test`);
//! - `tests/mlx_conformance.rs`: MLX (`make test-mlx`). Where MLX cannot run the kernels
//!   (its CPU build on Linux: [`Harness::can_execute`] is false) every valid launch must
//!   fail with MLX's "No Metal back-end" error, at the launch or at evaluation, and only the
//!   checks and the laziness are tested; where it can (a GPU) the same tests compare values;
//! - `tests/launch_checks.rs`: a recording backend whose arrays are their descriptions,
//!   so the classes no real backend shows (byte lengths, strides, addresses) run too.

#![allow(dead_code)]

pub mod cases;

use cases::{Case, Expected};
use half::{bf16, f16};
use kernelgen::backend::{self, Backend, Checked};
use kernelgen::contract::KernelDef;
use kernelgen::kernels::{self, experts::TinyExpertQ4Bf16R4};
use kernelgen::launch::{ArgInfo, BackendError, ErrorKind, LaunchError};
use kernelgen::Dtype;
use std::cell::Cell;
use std::error::Error;

/// A backend's array type.
pub type Array<H> = <<H as Harness>::Backend as Backend>::Array;

/// What the suite needs of a backend beyond [`Backend`].
pub trait Harness {
    type Backend: Backend;

    fn backend(&self) -> &Self::Backend;

    /// An array of `dtype` and `shape` holding `bytes` (row-major, little-endian).
    fn array(&self, dtype: Dtype, shape: &[u64], bytes: &[u8]) -> Array<Self>;

    /// Zeros, as the backend makes them (unevaluated where the backend is lazy).
    fn zeros(&self, dtype: Dtype, shape: &[u64]) -> Array<Self>;

    /// The array's bytes, evaluating it where the backend is lazy.
    fn read(&self, array: &Array<Self>) -> Result<Vec<u8>, BackendError>;

    /// Whether kernels run here. When false, every valid launch must fail with the error
    /// [`Harness::is_unavailable`] recognizes, at the launch or when its outputs are read.
    fn can_execute(&self) -> bool;

    /// Whether `error` (or one of its sources) says that this backend cannot run kernels here.
    fn is_unavailable(&self, error: &(dyn Error + 'static)) -> bool;

    /// Whether outputs must equal the replay models bit for bit (the emulator's arithmetic);
    /// every backend is held to the f64 models' bounds.
    fn bit_exact(&self) -> bool {
        false
    }

    /// Whether valid launches of every kernel of the catalog are cheap enough to test (the
    /// emulator compiles each one: it launches the cases' kernels only).
    fn whole_catalog(&self) -> bool {
        false
    }

    /// The most input bytes a kernel of the error tests may take at its sizes set to 2.
    fn input_budget(&self) -> u64 {
        64 << 20
    }

    /// An array of `dtype` and `shape` holding `bytes` bytes, where the backend can make
    /// one whose bytes disagree with its shape.
    fn with_bytes(&self, _dtype: Dtype, _shape: &[u64], _bytes: usize) -> Option<Array<Self>> {
        None
    }

    /// A view that is not row-contiguous of the elements `bytes` (row-major) in `shape`,
    /// where the backend has views.
    fn strided(&self, _dtype: Dtype, _shape: &[u64], _bytes: &[u8]) -> Option<Array<Self>> {
        None
    }

    /// Zeros whose data starts `offset` bytes past an aligned address, where the backend
    /// reports addresses.
    fn misaligned(&self, _dtype: Dtype, _shape: &[u64], _offset: usize) -> Option<Array<Self>> {
        None
    }

    /// Zeros of a dtype no contract has, and that dtype's name in the backend's words,
    /// where the backend has one.
    fn foreign(&self, _shape: &[u64]) -> Option<(Array<Self>, &'static str)> {
        None
    }

    /// Whether the array has been computed; `None` where the backend computes eagerly.
    fn evaluated(&self, _array: &Array<Self>) -> Option<bool> {
        None
    }
}

/// Whether `error` or one of its sources displays `text`.
pub fn chain_says(error: &(dyn Error + 'static), text: &str) -> bool {
    let mut e = Some(error);
    while let Some(x) = e {
        if x.to_string().contains(text) {
            return true;
        }
        e = x.source();
    }
    false
}

/// Asserts that `error` says kernels cannot run here, as the harness says.
fn assert_unavailable<H: Harness>(h: &H, error: &(dyn Error + 'static), what: &str) {
    assert!(!h.can_execute() && h.is_unavailable(error), "{what}: {error}");
}

/// Asserts that kernels may run here, as they just did.
fn assert_executes<H: Harness>(h: &H, what: &str) {
    assert!(h.can_execute(), "{what}: kernels ran where the harness says they cannot: its `can_execute` is wrong");
}

/// The backend under test, counting the launches that reach it. It checks each launch
/// again through the backend it wraps (which describes the arrays alike) to run it there.
pub struct Counting<'b, B> {
    inner: &'b B,
    launches: Cell<usize>,
}

impl<'b, B> Counting<'b, B> {
    pub fn new(inner: &'b B) -> Self {
        Counting { inner, launches: Cell::new(0) }
    }

    pub fn launches(&self) -> usize {
        self.launches.get()
    }
}

impl<B: Backend> Backend for Counting<'_, B> {
    type Array = B::Array;
    type Error = B::Error;

    fn describe(&self, array: &B::Array) -> ArgInfo {
        self.inner.describe(array)
    }

    fn run(&self, launch: &Checked<'_, Self>) -> Result<Vec<B::Array>, B::Error> {
        self.launches.set(self.launches.get() + 1);
        let inner = launch.for_inner(self.inner).unwrap_or_else(|e| panic!("the wrapped backend refuses what it accepted: {e}"));
        self.inner.run(&inner)
    }
}

/// Launches `def` through the backend, counting launches.
pub fn launch<H: Harness>(h: &H, def: &KernelDef, arrays: &[Array<H>], host: &[Vec<i32>]) -> (Result<Vec<Array<H>>, LaunchError>, usize) {
    let counting = Counting::new(h.backend());
    let refs: Vec<&Array<H>> = arrays.iter().collect();
    let host: Vec<&[i32]> = host.iter().map(Vec::as_slice).collect();
    let result = backend::launch_vec(&counting, def, &refs, &host);
    (result, counting.launches())
}

/// Zeros for every array input of `def` and in-range host integers (at their bound),
/// with every run-time size `n`.
pub fn valid<H: Harness>(h: &H, def: &KernelDef, n: u64) -> (Vec<Array<H>>, Vec<Vec<i32>>) {
    let sizes = vec![n; def.sizes.len()];
    let arrays = def.data_inputs().map(|b| h.zeros(b.dtype, &b.shape_at(&sizes).expect("shape"))).collect();
    let host = def.host_inputs().map(|b| vec![b.at_most.map_or(0, |i| sizes[i] as i32); b.elements(&sizes).expect("elements") as usize]).collect();
    (arrays, host)
}

/// Asserts a rejection with a violation of `kind` naming `argument`, the kernel and the
/// argument in its text, and nothing launched; returns the error.
pub fn rejected<H: Harness>(h: &H, def: &KernelDef, args: &(Vec<Array<H>>, Vec<Vec<i32>>), kind: ErrorKind, argument: Option<&str>, what: &str) -> LaunchError {
    let (result, launches) = launch(h, def, &args.0, &args.1);
    let e = result.err().unwrap_or_else(|| panic!("{}: {what} was accepted", def.name));
    assert_eq!(launches, 0, "{}: {what} launched", def.name);
    assert!(matches!(e, LaunchError::Contract { .. }), "{}: {what}: {e}", def.name);
    assert_eq!(e.kernel(), def.name, "{e}");
    let v = e
        .violations()
        .iter()
        .find(|v| v.kind == kind && (argument.is_none() || v.argument.as_deref() == argument))
        .unwrap_or_else(|| panic!("{}: {what}: expected a {kind:?} violation of {argument:?}, got: {e}", def.name));
    let text = e.to_string();
    assert!(text.contains(&format!("kernel `{}`", def.name)) && text.contains(&format!("expected {}", v.expected)), "{text}");
    if let Some(a) = argument {
        assert!(text.contains(&format!("argument `{a}`")), "{text}");
    }
    e
}

/// The kernels the error tests run on: the catalog's, within the harness's input budget.
pub fn kernels<H: Harness>(h: &H) -> impl Iterator<Item = &'static KernelDef> + '_ {
    kernels::CATALOG.iter().copied().filter(|def| {
        let sizes = vec![2; def.sizes.len()];
        def.data_inputs().map(|b| b.elements(&sizes).map_or(u64::MAX, |n| n * b.dtype.size() as u64)).sum::<u64>() <= h.input_budget()
    })
}

fn each_input<H: Harness>(h: &H, mut f: impl FnMut(&'static KernelDef, usize, &'static kernelgen::BufferDef)) {
    let mut seen = 0;
    for def in kernels(h) {
        for (i, b) in def.data_inputs().enumerate() {
            f(def, i, b);
            seen += 1;
        }
    }
    assert!(seen > 40, "only {seen} inputs were tested");
}

fn other_dtype(d: Dtype) -> Dtype {
    if d == Dtype::F32 { Dtype::F16 } else { Dtype::F32 }
}

fn shape(def: &KernelDef, b: &kernelgen::BufferDef, n: u64) -> Vec<u64> {
    b.shape_at(&vec![n; def.sizes.len()]).expect("shape")
}

pub fn wrong_argument_count<H: Harness>(h: &H) {
    for def in kernels(h) {
        let mut args = valid(h, def, 2);
        args.0.pop();
        rejected(h, def, &args, ErrorKind::ArgumentCount, None, "one array too few");
        let mut args = valid(h, def, 2);
        args.0.push(h.zeros(Dtype::U8, &[4]));
        rejected(h, def, &args, ErrorKind::ArgumentCount, None, "one array too many");
        let mut args = valid(h, def, 2);
        args.1.push(vec![1]);
        rejected(h, def, &args, ErrorKind::ArgumentCount, None, "one host argument too many");
    }
}

pub fn wrong_dtype<H: Harness>(h: &H) {
    each_input(h, |def, i, b| {
        let mut args = valid(h, def, 2);
        args.0[i] = h.zeros(other_dtype(b.dtype), &shape(def, b, 2));
        let e = rejected(h, def, &args, ErrorKind::Dtype, Some(&b.name), "a wrong dtype");
        assert!(e.to_string().contains(&format!("expected dtype {}, given dtype {}", b.dtype, other_dtype(b.dtype))), "{e}");
        if let Some((foreign, name)) = h.foreign(&shape(def, b, 2)) {
            let mut args = valid(h, def, 2);
            args.0[i] = foreign;
            let e = rejected(h, def, &args, ErrorKind::Dtype, Some(&b.name), "a dtype no contract has");
            assert!(e.to_string().contains(name), "{e}");
        }
    });
}

pub fn wrong_rank<H: Harness>(h: &H) {
    each_input(h, |def, i, b| {
        let mut args = valid(h, def, 2);
        let mut s = shape(def, b, 2);
        s.push(1);
        args.0[i] = h.zeros(b.dtype, &s);
        rejected(h, def, &args, ErrorKind::Rank, Some(&b.name), "an extra dimension");
        let mut args = valid(h, def, 2);
        args.0[i] = h.zeros(b.dtype, &shape(def, b, 2)[1..]);
        rejected(h, def, &args, ErrorKind::Rank, Some(&b.name), "a missing dimension");
    });
}

pub fn wrong_fixed_dimension<H: Harness>(h: &H) {
    each_input(h, |def, i, b| {
        for (axis, d) in b.shape.iter().enumerate() {
            if d.as_fixed().is_none() {
                continue;
            }
            let mut args = valid(h, def, 2);
            let mut s = shape(def, b, 2);
            s[axis] += 1;
            args.0[i] = h.zeros(b.dtype, &s);
            let e = rejected(h, def, &args, ErrorKind::Dim, Some(&b.name), &format!("dimension {axis} of `{}` one too large", b.name));
            // A fixed shape is shown once, not as an expression equal to itself.
            if b.shape.iter().all(|d| d.as_fixed().is_some()) {
                let v = e.violations().iter().find(|v| v.kind == ErrorKind::Dim).expect("a Dim violation");
                assert!(!v.expected.contains(" = "), "{v}");
            }
        }
    });
}

/// A run-time size carried by two arguments must be the same in both.
pub fn run_time_sizes_that_disagree_between_arguments<H: Harness>(h: &H) {
    let mut covered = 0;
    for def in kernels(h) {
        for size in 0..def.sizes.len() {
            let carriers: Vec<(usize, usize)> = def
                .data_inputs()
                .enumerate()
                .flat_map(|(i, b)| b.shape.iter().enumerate().filter(move |(_, d)| d.linear_in_one_size().is_some_and(|(s, _)| s == size)).map(move |(axis, _)| (i, axis)))
                .collect();
            if let [_, .., (i, axis)] = carriers[..] {
                covered += 1;
                let b = def.data_inputs().nth(i).expect("input");
                let mut args = valid(h, def, 2);
                let mut s = shape(def, b, 2);
                s[axis] *= 2;
                args.0[i] = h.zeros(b.dtype, &s);
                let e = rejected(h, def, &args, ErrorKind::Dim, Some(&b.name), "a run-time size that disagrees");
                // The message says where the size was read.
                assert!(e.to_string().contains("from `"), "{e}");
            }
        }
    }
    assert!(covered > 0);
}

pub fn zero_run_time_sizes<H: Harness>(h: &H) {
    for def in kernels(h).filter(|d| !d.sizes.is_empty()) {
        rejected(h, def, &valid(h, def, 0), ErrorKind::Size, None, "a zero size");
    }
}

pub fn wrong_byte_length<H: Harness>(h: &H) {
    each_input(h, |def, i, b| {
        let s = shape(def, b, 2);
        let bytes = s.iter().product::<u64>() as usize * b.dtype.size();
        for len in [bytes - 1, bytes + 1] {
            let Some(a) = h.with_bytes(b.dtype, &s, len) else {
                // Not visible: then the backend's arrays always hold what their shape says.
                assert_eq!(h.backend().describe(&h.zeros(b.dtype, &s)).bytes, bytes as u64, "{}: `{}`", def.name, b.name);
                return;
            };
            let mut args = valid(h, def, 2);
            args.0[i] = a;
            rejected(h, def, &args, ErrorKind::ByteLength, Some(&b.name), "a byte length that disagrees with the shape");
        }
    });
}

/// A strided argument: refused where the backend reports it so, else accepted (the backend
/// makes it contiguous itself; `values` checks what it computes then).
pub fn strided_arguments<H: Harness>(h: &H) {
    each_input(h, |def, i, b| {
        let s = shape(def, b, 2);
        let zeros = vec![0; s.iter().product::<u64>() as usize * b.dtype.size()];
        let Some(a) = h.strided(b.dtype, &s, &zeros) else {
            // Not visible: then the backend's arrays are always row-contiguous.
            assert!(h.backend().describe(&h.zeros(b.dtype, &s)).row_contiguous, "{}: `{}`", def.name, b.name);
            return;
        };
        let contiguous = h.backend().describe(&a).row_contiguous;
        let mut args = valid(h, def, 2);
        args.0[i] = a;
        if contiguous {
            let (result, launches) = launch(h, def, &args.0, &args.1);
            assert_eq!(launches, 1, "{}: a strided `{}` the backend takes did not launch", def.name, b.name);
            if let Err(e) = result {
                assert_unavailable(h, &e, &def.name);
            }
        } else {
            rejected(h, def, &args, ErrorKind::Layout, Some(&b.name), "a strided view");
        }
    });
}

pub fn misaligned_arguments<H: Harness>(h: &H) {
    each_input(h, |def, i, b| {
        if b.align <= 1 {
            return;
        }
        let Some(a) = h.misaligned(b.dtype, &shape(def, b, 2), b.align as usize / 2) else {
            // Not visible: then the backend reports no address (it aligns what it binds itself).
            assert_eq!(h.backend().describe(&h.zeros(b.dtype, &shape(def, b, 2))).address, None, "{}: `{}`", def.name, b.name);
            return;
        };
        let mut args = valid(h, def, 2);
        args.0[i] = a;
        rejected(h, def, &args, ErrorKind::Alignment, Some(&b.name), "a misaligned address");
    });
}

/// Host values a kernel loops over, outside `0..=` the size that bounds them.
pub fn bounded_values_out_of_range<H: Harness>(h: &H) {
    let mut covered = 0;
    for def in kernels(h) {
        for (i, b) in def.host_inputs().enumerate() {
            let Some(size) = b.at_most else { continue };
            covered += 1;
            for bad in [4, -1] {
                let mut args = valid(h, def, 3);
                args.1[i][0] = bad;
                let e = rejected(h, def, &args, ErrorKind::Value, Some(&b.name), &format!("{bad}, outside 0..={}", def.sizes[size]));
                assert!(e.to_string().contains(&format!("expected every value from 0 to {} = 3, given {bad} at index 0", def.sizes[size])), "{e}");
            }
            let mut args = valid(h, def, 3);
            args.1[i].push(1);
            rejected(h, def, &args, ErrorKind::Dim, Some(&b.name), "one host value too many");
        }
    }
    assert!(covered > 0, "no kernel bounds a value (DeltaNet's prefix state should)");
}

/// Two wrong arguments of one launch are two violations in one error, in argument order.
pub fn every_violation_of_a_launch_is_reported<H: Harness>(h: &H) {
    let def = &kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP;
    let mut args = valid(h, def, 2);
    args.0[0] = h.zeros(Dtype::F32, &[2, 256]);
    args.0[1] = h.zeros(Dtype::U8, &[100]);
    let (result, launches) = launch(h, def, &args.0, &args.1);
    let e = result.err().expect("accepted");
    assert_eq!(launches, 0);
    let kinds: Vec<(ErrorKind, Option<&str>)> = e.violations().iter().map(|v| (v.kind, v.argument.as_deref())).collect();
    assert_eq!(kinds, [(ErrorKind::Dtype, Some("x")), (ErrorKind::Dim, Some("slot"))], "{e}");
    let text = e.to_string();
    assert!(text.contains("2 problems, nothing was launched"), "{text}");
    assert!(text.contains("expected shape [73728], given shape [100]"), "{text}");
}

/// The typed launcher's error, word for word: kernel, argument, what was expected and given.
pub fn typed_launchers_name_kernel_argument_and_expectation<H: Harness>(h: &H) {
    let x = h.zeros(Dtype::F32, &[1, 256]);
    let slot = h.zeros(Dtype::U8, &[73728]);
    let counting = Counting::new(h.backend());
    let e = TinyExpertQ4Bf16R4::gate_up(&counting, &x, &slot).err().expect("an f32 `x` was accepted");
    assert_eq!(counting.launches(), 0);
    assert_eq!(e.to_string(), "kernel `tiny_expert_q4_bf16_r4_gate_up`, argument `x`: expected dtype bf16, given dtype f32; nothing was launched");
    // A slot of another geometry of the same spec is named.
    let other = &kernels::experts::QWEN3MOE_EXPERT_Q4_BF16_R4_GATE_UP;
    let len = other.inputs[1].shape[0].as_fixed().expect("a fixed slot");
    let x = h.zeros(Dtype::Bf16, &[1, 256]);
    let slot = h.zeros(Dtype::U8, &[len]);
    let e = TinyExpertQ4Bf16R4::gate_up(&counting, &x, &slot).err().expect("another geometry's slot was accepted");
    let v = &e.violations()[0];
    assert_eq!(v.argument.as_deref(), Some("slot"), "{e}");
    let hint = v.hint.as_deref().unwrap_or_else(|| panic!("no hint: {e}"));
    assert!(hint.contains(other.name.as_ref()) && !hint.contains("tiny_expert_q4_bf16_r4_gate_up"), "{hint}");
    assert_eq!(counting.launches(), 0);
}

/// Outputs in contract order, of the contract's dtypes and shapes at the launch's sizes.
fn assert_contract_outputs<H: Harness>(h: &H, def: &KernelDef, sizes: &[u64], outputs: &[Array<H>]) {
    assert_eq!(outputs.len(), def.outputs.len(), "{}", def.name);
    for (o, b) in outputs.iter().zip(def.outputs.iter()) {
        let info = h.backend().describe(o);
        assert_eq!(info.dtype, Ok(b.dtype), "{}: output `{}`", def.name, b.name);
        assert_eq!(info.shape, b.shape_at(sizes).expect("shape"), "{}: output `{}`", def.name, b.name);
    }
}

/// A valid launch launches once and returns the contract's outputs (or, where kernels
/// cannot run, the backend's error saying so).
pub fn valid_launches_return_contract_outputs<H: Harness>(h: &H) {
    let defs: Vec<&KernelDef> = if h.whole_catalog() { kernels(h).collect() } else { cases::all().iter().map(|c| c.def).collect() };
    assert!(defs.len() >= 8);
    for def in defs {
        for n in [1, 3] {
            let (arrays, host) = valid(h, def, n);
            let (result, launches) = launch(h, def, &arrays, &host);
            assert_eq!(launches, 1, "{}", def.name);
            match result {
                Ok(outputs) => assert_contract_outputs(h, def, &vec![n; def.sizes.len()], &outputs),
                Err(e) => assert_unavailable(h, &e, &def.name),
            }
        }
    }
}

/// Compares one output read back with what it must be.
fn compare<H: Harness>(h: &H, def: &KernelDef, want: &Expected, got: &[u8]) {
    let what = format!("{}: output `{}`", def.name, want.name);
    assert_eq!(got.len(), want.replay.len(), "{what}: byte length");
    if h.bit_exact() && got != want.replay {
        let size = want.dtype.size();
        let first = got.chunks(size).zip(want.replay.chunks(size)).position(|(a, b)| a != b).expect("a difference");
        panic!("{what}: element {first} differs from the replay model ({:02x?}, want {:02x?})", &got[first * size..][..size], &want.replay[first * size..][..size]);
    }
    let agreement = match want.dtype {
        Dtype::F32 => want.exact.check::<f32>(&cases::elements(got)),
        Dtype::Bf16 => want.exact.check::<bf16>(&cases::elements(got)),
        Dtype::F16 => want.exact.check::<f16>(&cases::elements(got)),
        other => panic!("{what}: no f64 model compares {other}"),
    };
    agreement.unwrap_or_else(|v| panic!("{what}: {v}"));
}

/// Reads and compares every output, or, where kernels cannot run, asserts the backend's
/// error.
fn check_outputs<H: Harness>(h: &H, case: &Case, outputs: &[Array<H>]) {
    assert_contract_outputs(h, case.def, &case.sizes, outputs);
    for (want, o) in case.outputs.iter().zip(outputs) {
        match h.read(o) {
            Ok(bytes) => {
                assert_executes(h, &case.def.name);
                compare(h, case.def, want, &bytes);
            }
            Err(e) => return assert_unavailable(h, &*e, &format!("{}: reading `{}`", case.def.name, want.name)),
        }
    }
}

/// Launches a case and checks its outputs; then, where the backend takes a strided view of
/// an input (copying it to row-major itself), the same launch with one.
pub fn values<H: Harness>(h: &H, case: &Case) {
    let arrays: Vec<Array<H>> = case.inputs.iter().map(|d| h.array(d.dtype, &d.shape, &d.bytes)).collect();
    let (result, launches) = launch(h, case.def, &arrays, &case.host);
    assert_eq!(launches, 1, "{}", case.def.name);
    match result {
        Ok(outputs) => check_outputs(h, case, &outputs),
        Err(e) => return assert_unavailable(h, &e, &case.def.name),
    }
    let strided = case.inputs.iter().enumerate().find_map(|(i, d)| {
        let a = h.strided(d.dtype, &d.shape, &d.bytes).filter(|_| d.shape.len() >= 2)?;
        h.backend().describe(&a).row_contiguous.then_some((i, a))
    });
    if let Some((i, a)) = strided {
        let mut arrays = arrays;
        arrays[i] = a;
        let (result, _) = launch(h, case.def, &arrays, &case.host);
        let outputs = result.unwrap_or_else(|e| panic!("{} with a strided `{}`: {e}", case.def.name, case.inputs[i].name));
        check_outputs(h, case, &outputs);
    }
}

pub fn expert_gate_up_matches_the_reference<H: Harness>(h: &H) {
    values(h, &cases::expert_gate_up());
}

/// Every routed expert of two tokens in two launches (grouped gate_up, then grouped down on
/// its replay), one route's slot index past the slots.
pub fn expert_grouped_step_matches_the_reference<H: Harness>(h: &H) {
    let up = cases::expert_gate_up_grouped();
    let mid: Vec<bf16> = cases::elements(&up.outputs[0].replay);
    values(h, &up);
    values(h, &cases::expert_down_grouped(&mid));
}

pub fn affine_row_matches_the_reference<H: Harness>(h: &H) {
    values(h, &cases::affine_row());
}

pub fn delta_step_matches_the_reference<H: Harness>(h: &H) {
    values(h, &cases::delta_step(false));
}

pub fn delta_masked_step_matches_the_reference<H: Harness>(h: &H) {
    values(h, &cases::delta_step(true));
}

pub fn delta_prefix_state_matches_the_reference<H: Harness>(h: &H) {
    values(h, &cases::delta_prefix_state());
}

pub fn silu_rms_heads_match_the_reference<H: Harness>(h: &H) {
    values(h, &cases::silu_rms_heads());
}

pub fn gated_rms_norm_matches_the_reference<H: Harness>(h: &H) {
    values(h, &cases::gated_rms_norm());
}

/// The expert's `gate_up` then `down` on its output through the typed launchers, nothing
/// evaluated in between (where the backend can show it: no launch evaluates its inputs or
/// outputs); reading `out` evaluates the chain once, and both steps match the references
/// (`down`'s on the `mid` the backend computed).
pub fn a_chain_of_launches_evaluates_once_at_the_end<H: Harness>(h: &H) {
    let up = cases::expert_gate_up();
    let (x, slot) = (&up.inputs[0], &up.inputs[1]);
    let (x, slot) = (h.array(x.dtype, &x.shape, &x.bytes), h.array(slot.dtype, &slot.shape, &slot.bytes));
    let lazy = |a: &Array<H>, what: &str| {
        if let Some(done) = h.evaluated(a) {
            assert!(!done, "{what} is evaluated");
        }
    };
    lazy(&x, "`x` before any launch");
    lazy(&slot, "`slot` before any launch");
    let counting = Counting::new(h.backend());
    let mid = match TinyExpertQ4Bf16R4::gate_up(&counting, &x, &slot) {
        Ok(mid) => {
            lazy(&mid, "`mid` after its launch");
            Some(mid)
        }
        Err(e) => {
            assert_unavailable(h, &e, "gate_up");
            None
        }
    };
    // Where `gate_up` cannot run, `down` is launched on an unevaluated stand-in for `mid`.
    let mid_in = mid.unwrap_or_else(|| h.zeros(up.outputs[0].dtype, &up.outputs[0].shape));
    let out = TinyExpertQ4Bf16R4::down(&counting, &mid_in, &slot);
    assert_eq!(counting.launches(), 2);
    for (a, what) in [(&x, "`x`"), (&slot, "`slot`"), (&mid_in, "`mid`")] {
        lazy(a, &format!("{what} after the chain's launches"));
    }
    let out = match out {
        Ok(out) => out,
        Err(e) => return assert_unavailable(h, &e, "down"),
    };
    lazy(&out, "`out` after its launch");
    let out_bytes = match h.read(&out) {
        Ok(bytes) => bytes,
        Err(e) => return assert_unavailable(h, &*e, "reading `out`"),
    };
    assert_executes(h, "the chain");
    let mid_bytes = h.read(&mid_in).expect("`mid` was computed with `out`");
    compare(h, up.def, &up.outputs[0], &mid_bytes);
    let down = cases::expert_down(&cases::elements::<bf16>(&mid_bytes));
    assert_contract_outputs(h, down.def, &down.sizes, std::slice::from_ref(&out));
    compare(h, down.def, &down.outputs[0], &out_bytes);
}

/// Two DeltaNet steps, the second from the first's `state_out`, nothing evaluated in
/// between; reading the second's outputs evaluates the chain once, and both steps match the
/// references (the second's on the state the backend computed).
pub fn a_delta_step_chain_evaluates_once_at_the_end<H: Harness>(h: &H) {
    let first = cases::delta_step(false);
    let state_in = first.inputs.iter().position(|d| d.name == "state_in").expect("a state input");
    let arrays = |case: &Case| -> Vec<Array<H>> { case.inputs.iter().map(|d| h.array(d.dtype, &d.shape, &d.bytes)).collect() };
    let lazy = |a: &Array<H>, what: &str| {
        if let Some(done) = h.evaluated(a) {
            assert!(!done, "{what} is evaluated");
        }
    };
    let (one, launches) = launch(h, first.def, &arrays(&first), &first.host);
    assert_eq!(launches, 1);
    let one = match one {
        Ok(one) => one,
        Err(e) => return assert_unavailable(h, &e, "the first step"),
    };
    one.iter().for_each(|a| lazy(a, "the first step's output after its launch"));
    // The second step's own inputs (another seed), its state the first step's output,
    // unevaluated.
    let (y1, state1) = (&one[0], &one[1]);
    let placeholder = cases::delta_step_from(false, 31, None);
    let second_arrays = arrays(&placeholder);
    let refs: Vec<&Array<H>> = second_arrays.iter().enumerate().map(|(i, a)| if i == state_in { state1 } else { a }).collect();
    let counting = Counting::new(h.backend());
    let host: Vec<&[i32]> = placeholder.host.iter().map(Vec::as_slice).collect();
    let two = backend::launch_vec(&counting, first.def, &refs, &host).unwrap_or_else(|e| panic!("the second step, after the first launched: {e}"));
    assert_eq!(counting.launches(), 1);
    lazy(y1, "the first step's `y` after the second launch");
    lazy(state1, "the first step's `state_out` after the second launch");
    two.iter().for_each(|a| lazy(a, "the second step's output after its launch"));
    let y2 = match h.read(&two[0]) {
        Ok(bytes) => bytes,
        Err(e) => return assert_unavailable(h, &*e, "reading the second step's `y`"),
    };
    assert_executes(h, "the DeltaNet chain");
    let state1_bytes = h.read(state1).expect("the first step's state was computed with the second step");
    compare(h, first.def, &first.outputs[1], &state1_bytes);
    compare(h, first.def, &first.outputs[0], &h.read(y1).expect("computed with the chain"));
    let second = cases::delta_step_from(false, 31, Some(cases::elements::<f32>(&state1_bytes)));
    assert_contract_outputs(h, second.def, &second.sizes, &two);
    compare(h, second.def, &second.outputs[0], &y2);
    compare(h, second.def, &second.outputs[1], &h.read(&two[1]).expect("computed with `y`"));
}

/// Expands to one `#[test]` per conformance test, each run on the harness `$harness`
/// (an expression) makes.
macro_rules! conformance_tests {
    ($harness:expr) => {
        conformance_tests!(@each $harness;
            wrong_argument_count,
            wrong_dtype,
            wrong_rank,
            wrong_fixed_dimension,
            run_time_sizes_that_disagree_between_arguments,
            zero_run_time_sizes,
            wrong_byte_length,
            strided_arguments,
            misaligned_arguments,
            bounded_values_out_of_range,
            every_violation_of_a_launch_is_reported,
            typed_launchers_name_kernel_argument_and_expectation,
            valid_launches_return_contract_outputs,
            expert_gate_up_matches_the_reference,
            expert_grouped_step_matches_the_reference,
            affine_row_matches_the_reference,
            delta_step_matches_the_reference,
            delta_masked_step_matches_the_reference,
            delta_prefix_state_matches_the_reference,
            silu_rms_heads_match_the_reference,
            gated_rms_norm_matches_the_reference,
            a_chain_of_launches_evaluates_once_at_the_end,
            a_delta_step_chain_evaluates_once_at_the_end,
        );
    };
    (@each $harness:expr; $($test:ident,)*) => {
        $(
            #[test]
            fn $test() {
                $crate::conformance::$test(&$harness);
            }
        )*
    };
}
