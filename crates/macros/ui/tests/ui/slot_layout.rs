// Slot regions that overlap, run past the slot or are misaligned, each at
// the offending offset.

kernelgen::kernels! {
    mod overlapping;
    family = "expert";
    axes { quant = [q4] }
    geometry g {
        hidden = 256,
        intermediate = 128,
        slot.q4 {
            bytes = 73728,
            gate_weights = 0,
            up_weights = 8192,
            down_weights = 40960,
            gate_scales = 61440,
            up_scales = 65536,
            down_scales = 69632,
        }
    }
}

kernelgen::kernels! {
    mod out_of_slot;
    family = "expert";
    axes { quant = [q4] }
    geometry g {
        hidden = 256,
        intermediate = 128,
        slot.q4 {
            bytes = 70000,
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
    mod misaligned;
    family = "expert";
    axes { quant = [q4] }
    geometry g {
        hidden = 256,
        intermediate = 128,
        slot.q4 {
            bytes = 73728,
            gate_weights = 0,
            up_weights = 20482,
            down_weights = 40960,
            gate_scales = 61440,
            up_scales = 65536,
            down_scales = 69632,
        }
    }
}

fn main() {}
