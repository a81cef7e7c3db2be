// A launch plan comes only from `launch::check`: it cannot be written by hand.

use kernelgen::kernels::experts::TINY_EXPERT_Q4_BF16_R4_GATE_UP as DEF;
use kernelgen::launch::LaunchPlan;

fn main() {
    let _forged = LaunchPlan { def: &DEF, sizes: vec![1 << 20], grid: [128, 32, 1 << 20], threadgroup: [128, 1, 1], inputs: vec![], outputs: vec![] };
}
