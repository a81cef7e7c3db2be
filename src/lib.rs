//! kernelgen: ahead-of-time generated MLX Metal kernels with typed launchers,
//! and an emulator that runs Metal Shading Language on a Linux CPU.

pub mod contract;

pub use contract::{BufferDef, Dim, Dtype, KernelDef, Region, Source};
