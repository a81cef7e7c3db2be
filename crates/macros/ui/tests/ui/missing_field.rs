// Required fields left out: reported at the table that lacks them.

kernelgen::kernels! {
    mod missing_fields;
    family = "expert";
    axes { quant = [q4] }
    geometry g {
        hidden = 256,
        slot.q4 {
            gate_weights = 0,
            up_weights = 20480,
            down_weights = 40960,
            gate_scales = 61440,
            up_scales = 65536,
            down_scales = 69632,
        }
    }
}

kernelgen::kernels! {
    mod no_geometry;
    family = "expert";
}

fn main() {}
