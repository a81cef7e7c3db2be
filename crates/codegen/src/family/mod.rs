//! Kernel families as data: a family file (`<name>.toml`) beside its template
//! (`<name>.metal.tera`) says everything a family is — axes, geometry fields,
//! derived values and constraints as expressions, run-time sizes, packed
//! layouts and the kernels (parts) with their buffers and launch geometry.

pub mod expr;
