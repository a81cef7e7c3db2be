//! A user's code over kernelgen's generated launchers: one routed expert of
//! GLM-5.2 (gate/up, then down), generic over the backend, and the same on
//! MLX. Nothing here knows a kernel name, a buffer index or an MSL string.

use kernelgen::backend::Backend;
use kernelgen::kernels::experts::{Glm52ExpertQ4Bf16R4, TinyExpertQ4Bf16R4};
use kernelgen::launch::LaunchError;

/// `out = down(silu(gate(x)) * up(x))` for one expert whose weights sit in
/// `slot` (GLM-5.2's Q4 residency slot), on any backend. With MLX both
/// launches are lazy: `mid` never leaves the graph.
pub fn glm52_expert<B: Backend>(backend: &B, x: &B::Array, slot: &B::Array) -> Result<B::Array, LaunchError> {
    let mid = Glm52ExpertQ4Bf16R4::gate_up(backend, x, slot)?;
    Glm52ExpertQ4Bf16R4::down(backend, &mid, slot)
}

/// The same expert at the tiny test geometry (H = 256, I = 128).
pub fn tiny_expert<B: Backend>(backend: &B, x: &B::Array, slot: &B::Array) -> Result<B::Array, LaunchError> {
    let mid = TinyExpertQ4Bf16R4::gate_up(backend, x, slot)?;
    TinyExpertQ4Bf16R4::down(backend, &mid, slot)
}

/// On Apple silicon, through MLX: returns the unevaluated output; evaluate it
/// (or keep building the graph) as with any MLX array.
#[cfg(feature = "mlx")]
pub fn glm52_expert_on_mlx(x: &kernelgen::backend::mlx::mlx_rs::Array, slot: &kernelgen::backend::mlx::mlx_rs::Array) -> Result<kernelgen::backend::mlx::mlx_rs::Array, LaunchError> {
    glm52_expert(&kernelgen::backend::mlx::MlxBackend::new(), x, slot)
}
