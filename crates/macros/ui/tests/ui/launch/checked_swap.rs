// A checked launch keeps the arrays it checked, and runs only on the backend whose
// `describe` they were checked through.

use kernelgen::backend::{self, Backend};
use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;

fn other_arrays<'a, B: Backend>(backend: &B, checked_on: &'a [&'a B::Array], short: &'a [&'a B::Array]) {
    let mut checked = backend::check(backend, &DEF, checked_on, &[], &[]).unwrap();
    checked.arrays = short;
}

fn other_backend<B: Backend, C: Backend<Array = B::Array>>(b: &B, c: &C, arrays: &[&B::Array]) {
    let checked = backend::check(b, &DEF, arrays, &[], &[]).unwrap();
    let _ = c.run(&checked);
}

fn main() {}
