// A checked launch comes only from `backend::check`: a valid launch's plan cannot be
// paired with other arrays by hand.

use kernelgen::backend::{self, Backend, Checked};
use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;

fn other_arrays<'a, B: Backend>(backend: &B, checked_on: &'a [&'a B::Array], short: &'a [&'a B::Array]) {
    let checked = backend::check(backend, &DEF, checked_on, &[], &[]).unwrap();
    let _forged: Checked<'a, B> = Checked { plan: checked.plan().clone(), arrays: short, backend: std::marker::PhantomData };
}

fn main() {}
