//! Greedy decoding's last step with a fused softcap + argmax kernel that this
//! crate defines itself (families/softcap_argmax.toml and its template), for
//! any kernelgen backend.

use kernelgen::backend::Backend;
use kernelgen::launch::LaunchError;

/// The launchers the build script wrote (build.rs): one module per spec in
/// kernels/, here `built::softcap_argmax`.
pub mod built {
    include!(concat!(env!("OUT_DIR"), "/kernelgen/kernels.rs"));
}

// The same spec through the proc-macro: `pub mod softcap_argmax { ... }`, the
// same launchers, generated while compiling this file. It finds the family in
// families/ beside Cargo.toml.
kernelgen::include_specs!("kernels/softcap_argmax.toml");

use softcap_argmax::Vocab152kSoftcapArgmaxBf16;

/// The next token of each sequence: `logits` is bf16 `[R, 151936]` (the last
/// position of each), capped at 30. Returns `token` (u32 `[R]`) and the
/// softcapped maximum (`value`, bf16 `[R]`).
pub fn next_tokens<B: Backend>(backend: &B, logits: &B::Array) -> Result<(B::Array, B::Array), LaunchError> {
    let out = Vocab152kSoftcapArgmaxBf16::launch(backend, logits)?;
    Ok((out.token, out.value))
}

/// On Apple silicon, through MLX: the outputs are lazy MLX arrays, so the
/// launch joins the model's graph like any MLX op.
#[cfg(feature = "mlx")]
pub fn next_tokens_on_mlx(logits: &kernelgen::backend::mlx::mlx_rs::Array) -> Result<(kernelgen::backend::mlx::mlx_rs::Array, kernelgen::backend::mlx::mlx_rs::Array), LaunchError> {
    next_tokens(&kernelgen::backend::mlx::MlxBackend::new(), logits)
}
