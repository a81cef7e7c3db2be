// Values of the wrong kind, an empty axis list, a slot keyed by a value the
// axis does not have, and an exclusion that matches nothing.

kernelgen::kernels! {
    mod wrong_values;
    family = "expert";
    axes { quant = [], dtype = bf16 }
    exclude = [{ quant = q8 }];
    geometry g { hidden = "256", intermediate = 128, slot { q5 { bytes = 1 } } }
}

fn main() {}
