//! CUDA for kernelgen, the second language beside Metal: its vocabulary ([`vocab`], the twin
//! of `kernelgen_msl::vocab`) and MLX 0.32's CUDA source assembly ([`mlx`]), which the
//! generator uses to write `generated/cuda/<spec>/<kernel>.cu`, byte for byte the source
//! MLX's `cuda_kernel` compiles. It depends only on the contract, so the generator stays
//! light; a CUDA front-end check belongs here too when there is one.

#![warn(missing_docs)]

pub mod mlx;
pub mod vocab;
