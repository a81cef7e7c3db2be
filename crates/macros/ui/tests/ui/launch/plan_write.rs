// A launch plan cannot be changed once `launch::check` made it.

use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;
use kernelgen::launch::{self, ArgInfo};
use kernelgen::Dtype;

fn arg(dtype: Dtype, shape: &[u64]) -> ArgInfo {
    let bytes = shape.iter().product::<u64>() * dtype.size() as u64;
    ArgInfo { dtype: Ok(dtype), shape: shape.to_vec(), bytes, row_contiguous: true, address: None }
}

fn main() {
    let mut plan = launch::check(&DEF, &[arg(Dtype::Bf16, &[3, 256]), arg(Dtype::U8, &[73728])], &[], &[]).unwrap();
    plan.grid = [128, 32, 1 << 20];
    plan.sizes[0] = 1 << 20;
}
