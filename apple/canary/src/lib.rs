//! x86-64-only code, as the emulator's fault handler once had: it must not
//! type-check for aarch64-apple-darwin.

/// Whether the CPU has AVX2 (x86-64 only).
pub fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}
