//! What a loaded program declares: its kernels' signatures (each parameter's binding, type
//! and address space) and its function constants.

use crate::FunctionConstant;
#[cfg(doc)]
use crate::Program;

/// Metal thread attributes a kernel parameter can carry (Metal's vocabulary, shared with the
/// generator and the Metal check).
pub use kernelgen_msl::vocab::Attribute;

/// Where a kernel parameter's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Binding {
    /// `[[buffer(i)]]`: bound to `buffers[i]` of [`Program::dispatch`].
    Buffer(u32),
    /// A thread attribute (`[[thread_position_in_grid]]`, ...).
    Attribute(Attribute),
}

/// Metal address spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AddressSpace {
    /// `device`: buffers the kernel reads and writes.
    Device,
    /// `constant`: read-only buffers.
    Constant,
    /// `threadgroup`: memory shared by one threadgroup.
    Threadgroup,
    /// Also what attribute parameters (plain values) report.
    Thread,
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name.
    pub name: String,
    /// What it is bound to.
    pub binding: Binding,
    /// The pointee (or value) C type as written, e.g. `float`, `uint32_t`, `uint3`;
    /// template parameters are replaced by the instantiation's arguments.
    pub type_name: String,
    /// The address space of the pointee (`thread` for values).
    pub address_space: AddressSpace,
    /// Whether the pointee is `const`.
    pub is_const: bool,
    /// `constant T& x` (a reference), as opposed to a pointer.
    pub is_reference: bool,
}

/// A kernel of a loaded program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignature {
    /// The name `dispatch` takes: the function name, or the `host_name` of an explicit
    /// instantiation of a templated kernel.
    pub name: String,
    /// The C++ callee (`f` or `f<1, float>`).
    pub function: String,
    /// Line of the declaration (or of the instantiation) in the `.metal` file.
    pub metal_line: u32,
    /// The parameters, in declaration order.
    pub params: Vec<Param>,
}

impl KernelSignature {
    /// Number of buffers `dispatch` expects (largest buffer index + 1).
    pub fn buffer_count(&self) -> usize {
        self.params
            .iter()
            .filter_map(|p| match p.binding {
                Binding::Buffer(i) => Some(i as usize + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}

/// A `constant T name [[function_constant(index)]];` declaration of a loaded program.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionConstantDecl {
    /// The constant's name.
    pub name: String,
    /// Its `[[function_constant(index)]]`.
    pub index: u32,
    /// The declared type, e.g. `bool`, `int`, `float`.
    pub type_name: String,
    /// The value it was compiled with; `None`: not given (reading it does not compile).
    pub value: Option<FunctionConstant>,
    /// Line of the declaration (in the `.metal` file or the header declaring it).
    pub metal_line: u32,
}
