// Axis values the family does not have: an unknown dtype, an unknown quant,
// an integer out of range; each at the value.

kernelgen::kernels! {
    mod unknown_values;
    family = "expert";
    axes {
        quant = [q4, q3],
        dtype = [bf16, f64],
        rows_per_threadgroup = [0],
    }
    geometry g { hidden = 256, intermediate = 128 }
}

fn main() {}
