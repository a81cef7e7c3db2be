//! Only acts with the `mlx` feature: the MLX backend links the shared libmlx
//! of a prebuilt MLX (on Linux, the mlx-cpu wheel that mlx/setup.sh unpacks),
//! and only the final binary's own build script can give it an rpath to find
//! that library at run time. mlx/cargo-config.toml sets KERNELGEN_MLX_LIB_DIR.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=KERNELGEN_MLX_LIB_DIR");
    if std::env::var_os("CARGO_FEATURE_MLX").is_none() {
        return;
    }
    if let Some(dir) = std::env::var_os("KERNELGEN_MLX_LIB_DIR") {
        let dir = std::path::PathBuf::from(dir);
        let dir = dir.canonicalize().unwrap_or(dir);
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
}
