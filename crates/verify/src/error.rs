//! Why a kernel failed verification, or could not be verified: one enum, each variant the
//! facts of its case, its text from [`Display`](fmt::Display).

use kernelgen::contract::{Dtype, Tolerance};
use kernelgen::launch::LaunchError;
use kernelgen_emu::{EmuError, Language};
use kernelgen_reference::Violation;
use std::fmt;

/// Why a kernel failed verification, or could not be verified.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The emulator could not build the kernel (not valid Metal, a compile error) or start.
    Emulator(EmuError),
    /// A launch was refused by the contract checks, or failed in the backend (an access
    /// outside a buffer, a divergent barrier).
    Launch(LaunchError),
    /// The backend's arrays could not be made from or read back to host bytes.
    Transfer {
        /// The buffer.
        buffer: String,
        /// The backend's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A property every kernel must have, broken.
    Property(Finding),
    /// An input cannot be made at these sizes.
    Input {
        /// The input's name.
        input: String,
        /// The sizes, `R=3, M=2`.
        sizes: String,
        /// What is wrong.
        problem: InputProblem,
    },
    /// A case and a kernel's contract disagree on the buffers or sizes.
    Case(CaseProblem),
    /// An output is not what the reference says.
    Mismatch(Mismatch),
    /// A Python reference failed (it ran, or it could not run).
    Python {
        /// `reference refs/x.py:function`.
        reference: String,
        /// What went wrong.
        failure: PythonFailure,
    },
    /// A family file's `[verify] reference` names nothing verify can run: an unknown Rust
    /// reference, or a Python file that is not a regular file inside the family's folder.
    NoReference {
        /// `file:line:col` of the family file's `reference`.
        at: String,
        /// What is wrong.
        message: String,
        /// What would be right.
        help: String,
    },
    /// The kernel's plan lacks a parameter a reference reads, or holds another type.
    Param {
        /// The family.
        family: String,
        /// The parameter.
        name: String,
        /// What the reference needs (`integer`, `string`).
        expected: &'static str,
    },
    /// A Rust reference cannot model this kernel (a dtype it was not written for).
    Unmodelled {
        /// The reference's name.
        reference: &'static str,
        /// What it cannot model.
        what: String,
    },
    /// A Rust reference read a parameter or a buffer it does not declare: a bug in kernelgen
    /// (the declarations are what the test against the bundled family files checks).
    Undeclared {
        /// The reference's name.
        reference: &'static str,
        /// `parameter` or `buffer`.
        kind: &'static str,
        /// The name it read.
        name: String,
    },
    /// Verification panicked: a bug in kernelgen.
    Panicked(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Emulator(e) => write!(f, "{e}"),
            Error::Launch(e) => write!(f, "{e}"),
            Error::Transfer { buffer, source } => write!(f, "`{buffer}`: between the host and the backend: {source}"),
            Error::Property(finding) => write!(f, "{finding}"),
            Error::Input { input, sizes, problem: InputProblem::ShapeOverflows } => write!(f, "input `{input}`: its shape overflows at sizes {sizes}"),
            Error::Input { input, sizes, problem: InputProblem::TooLarge { shape, dtype } } => {
                write!(f, "input `{input}` at sizes {sizes} is {shape:?} elements of {dtype}: more than this machine's memory holds")
            }
            Error::Case(p) => write!(f, "{p}"),
            Error::Mismatch(m) => write!(f, "{m}"),
            Error::Python { reference, failure } => match failure {
                PythonFailure::Failed { status, stderr } => write!(f, "{reference} failed ({status}):\n{stderr}"),
                other => write!(f, "{reference}: {other}"),
            },
            Error::NoReference { at, message, help } => write!(f, "{at}: verify.reference: {message}\n  = help: {help}"),
            Error::Param { family, name, expected } => write!(f, "family `{family}` plans no {expected} `{name}`"),
            Error::Unmodelled { reference, what } => write!(f, "the Rust reference `{reference}` has no model {what}"),
            Error::Undeclared { reference, kind, name } => {
                write!(f, "the Rust reference `{reference}` reads the {kind} `{name}`, which it does not declare (a bug in kernelgen, please report it)")
            }
            Error::Panicked(what) => write!(f, "kernelgen panicked while verifying it ({what}): a bug in kernelgen, please report it"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Emulator(e) => Some(e),
            Error::Launch(e) => Some(e),
            Error::Transfer { source, .. } => Some(source.as_ref()),
            Error::Python { failure: PythonFailure::Io { source, .. }, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<EmuError> for Error {
    fn from(e: EmuError) -> Self {
        Error::Emulator(e)
    }
}

impl From<LaunchError> for Error {
    fn from(e: LaunchError) -> Self {
        Error::Launch(e)
    }
}

impl From<Finding> for Error {
    fn from(f: Finding) -> Self {
        Error::Property(f)
    }
}

impl From<Mismatch> for Error {
    fn from(m: Mismatch) -> Self {
        Error::Mismatch(m)
    }
}

impl From<CaseProblem> for Error {
    fn from(p: CaseProblem) -> Self {
        Error::Case(p)
    }
}

/// Why an input cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputProblem {
    /// Its element count overflows 64 bits.
    ShapeOverflows,
    /// It is more bytes than this machine's memory.
    TooLarge {
        /// Its shape.
        shape: Vec<u64>,
        /// Its dtype.
        dtype: Dtype,
    },
}

/// A case and a kernel's contract that disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaseProblem {
    /// The contract has an input the case does not give.
    MissingInput(String),
    /// The case gives an input the contract does not have (a misspelled name).
    UnknownInput(String),
    /// The contract has a run-time size the case does not give.
    MissingSize(String),
    /// The case gives a size the contract does not have.
    UnknownSize(String),
}

impl fmt::Display for CaseProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseProblem::MissingInput(name) => write!(f, "the case gives no input `{name}`, which the kernel reads"),
            CaseProblem::UnknownInput(name) => write!(f, "the case gives an input `{name}`, which the kernel does not have"),
            CaseProblem::MissingSize(name) => write!(f, "the case gives no run-time size `{name}`"),
            CaseProblem::UnknownSize(name) => write!(f, "the case gives a run-time size `{name}`, which the kernel does not have"),
        }
    }
}

/// A property a kernel broke.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Finding {
    /// Elements of an output were never written.
    Unwritten {
        /// The output buffer's name.
        output: String,
        /// How many elements keep their poison.
        count: usize,
        /// The index of the first.
        first: usize,
    },
    /// An output depends on the initial contents of threadgroup memory.
    UninitializedThreadgroup {
        /// The output buffer's name.
        output: String,
        /// The first element that changes with the poison.
        first: usize,
        /// The first read of threadgroup memory no thread had written, as the emulator's
        /// threadgroup-memory check reports it (its array, element, thread and line), when it
        /// found one.
        read: Option<String>,
    },
    /// The threadgroup memory the contract declares (the family's `threadgroup_memory`) is not
    /// what the kernel's threadgroup arrays take.
    ThreadgroupMemory {
        /// Where the family file declares it (`path:line:col` of `threadgroup_memory`, or of
        /// its `[[kernel]]` table when it leaves the default of 0), when known.
        at: Option<String>,
        /// The body: the Metal one's is the family's `threadgroup_memory`, the CUDA one's its
        /// `cuda_shared_memory` (by default the same).
        body: Language,
        /// The contract's bytes.
        declared: u32,
        /// The bytes of the arrays one threadgroup allocated.
        allocated: usize,
        /// Those arrays: each one's name, bytes and declaration.
        arrays: Vec<String>,
    },
    /// An output depends on its own initial contents: read before written.
    ReadsOutput {
        /// The output buffer's name.
        output: String,
        /// The first element that changes with the poison.
        first: usize,
    },
    /// An output differs between run orders: a race or a missing barrier.
    OrderDependent {
        /// The output buffer's name.
        output: String,
        /// The first element that differs.
        first: usize,
        /// The run order that differs from forward.
        order: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Unwritten { output, count, first } => write!(f, "{count} elements of output `{output}` are never written (the first at index {first})"),
            Finding::UninitializedThreadgroup { output, first, read: None } => write!(f, "output `{output}` depends on uninitialized threadgroup memory (element {first} changes with the memory's initial bytes): a read before any thread wrote it, or a missing barrier"),
            Finding::UninitializedThreadgroup { output, first, read: Some(read) } => {
                write!(f, "output `{output}` depends on uninitialized threadgroup memory (element {first} changes with the memory's initial bytes): {read}")
            }
            Finding::ThreadgroupMemory { at, body, declared, allocated, arrays } => {
                let (key, memory, kind) = match body {
                    Language::Cuda => ("cuda_shared_memory", "shared memory for the CUDA body", "__shared__ arrays"),
                    _ => ("threadgroup_memory", "threadgroup memory", "threadgroup arrays"),
                };
                if let Some(at) = at {
                    write!(f, "{at}: {key}: ")?;
                }
                write!(
                    f,
                    "the family declares {declared} bytes of {memory}, but the kernel's {kind} take {allocated} bytes{}: \
                     declare what the template allocates (the launch contract and MLX's occupancy read this number)",
                    if arrays.is_empty() { String::new() } else { format!(" ({})", arrays.join("; ")) }
                )
            }
            Finding::ReadsOutput { output, first } => write!(f, "output `{output}` is read before it is written (element {first} changes with the buffer's initial bytes)"),
            Finding::OrderDependent { output, first, order } => write!(f, "output `{output}` differs in {order} run order (element {first}): a race or a missing barrier"),
        }
    }
}

/// An output that is not what its reference says.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Mismatch {
    /// The output's dtype or shape is not the reference's.
    Shape {
        /// The output.
        output: String,
        /// The kernel's dtype and shape.
        got: (Dtype, Vec<u64>),
        /// The reference's.
        want: (Dtype, Vec<u64>),
    },
    /// The kernel's output has another element count than the reference's values.
    Count {
        /// The output.
        output: String,
        /// The kernel's.
        got: usize,
        /// The reference's.
        want: usize,
    },
    /// The reference says nothing about an output of the kernel.
    Missing {
        /// The output.
        output: String,
    },
    /// The reference names an output the kernel does not have.
    Unknown {
        /// The name the reference gave.
        output: String,
    },
    /// A bit difference from the replay model (the kernel's own order of operations).
    Replay {
        /// The output.
        output: String,
        /// The first element that differs.
        index: usize,
        /// The kernel's value there.
        got: f32,
        /// The replay's.
        replay: f32,
        /// How many elements differ.
        differing: usize,
    },
    /// An element outside the f64 model's rigorous bound.
    Bound {
        /// The output.
        output: String,
        /// The element, its values and the bound.
        violation: Violation,
    },
    /// An element outside the family's tolerance of a reference's value.
    Tolerance {
        /// The output.
        output: String,
        /// The first such element.
        index: usize,
        /// The kernel's value there.
        got: f64,
        /// The reference's.
        want: f64,
        /// The tolerance.
        tolerance: Tolerance,
        /// How many elements are outside it.
        outside: usize,
        /// How many elements the output has.
        elements: usize,
    },
    /// A reference gave another number of outputs than the kernel has.
    Outputs {
        /// How many the reference gave.
        got: usize,
        /// How many the kernel has.
        want: usize,
    },
    /// The output's dtype has no bit-level model comparison.
    Dtype {
        /// The output.
        output: String,
        /// Its dtype.
        dtype: Dtype,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Shape { output, got, want } => write!(f, "`{output}`: output {:?} {:?} where the reference has {:?} {:?}", got.0, got.1, want.0, want.1),
            Mismatch::Count { output, got, want } => write!(f, "output `{output}` has {got} elements where the reference gave {want}"),
            Mismatch::Missing { output } => write!(f, "the reference gives no values for output `{output}`"),
            Mismatch::Unknown { output } => write!(f, "the reference gives values for `{output}`, which the kernel does not output"),
            Mismatch::Replay { output, index, got, replay, differing } => {
                write!(f, "`{output}` differs from the replay model at element {index}: got {got:?}, replay {replay:?} ({differing} elements differ)")
            }
            Mismatch::Bound { output, violation } => write!(f, "`{output}` against the f64 model: {violation}"),
            Mismatch::Tolerance { output, index, got, want, tolerance, outside, elements } => {
                write!(f, "output `{output}` element {index}: got {got}, reference {want} (tolerance {tolerance}); {outside} of {elements} elements are outside it")
            }
            Mismatch::Outputs { got, want } => write!(f, "the reference gave {got} outputs for the kernel's {want}"),
            Mismatch::Dtype { output, dtype } => write!(f, "`{output}`: no ulp comparison for dtype {dtype}"),
        }
    }
}

/// How a Python reference failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum PythonFailure {
    /// A file of the call could not be written or read.
    Io {
        /// What was being done.
        doing: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// `python3` could not be started.
    NoPython(std::io::Error),
    /// The function (or the driver around it) failed.
    Failed {
        /// The exit status.
        status: String,
        /// The last lines of its standard error.
        stderr: String,
    },
    /// The driver wrote no outputs.
    NoOutputs,
    /// An output of another shape than the kernel's.
    Shape {
        /// The output.
        output: String,
        /// The shape returned.
        got: Vec<u64>,
        /// The kernel's.
        want: Vec<u64>,
    },
}

impl fmt::Display for PythonFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PythonFailure::Io { doing, source } => write!(f, "{doing}: {source}"),
            PythonFailure::NoPython(e) => write!(f, "cannot run python3 ({e}); install Python 3 with numpy"),
            PythonFailure::Failed { status, stderr } => write!(f, "failed ({status}):\n{stderr}"),
            PythonFailure::NoOutputs => f.write_str("the driver wrote no outputs"),
            PythonFailure::Shape { output, got, want } => write!(f, "output `{output}` has shape {got:?}, the kernel's is {want:?}"),
        }
    }
}
