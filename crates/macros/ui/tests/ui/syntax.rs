// Rust-syntax errors: each points at the token where the spec stops parsing.

kernelgen::kernels! {
    family = "expert";
    geometry g { hidden = 256, intermediate = 128 }
}

kernelgen::kernels! {
    mod missing_equals;
    family = "expert";
    geometry g { hidden 256, intermediate = 128 }
}

kernelgen::kernels! {
    mod missing_comma;
    family = "expert";
    axes { quant = [q4 q8] }
    geometry g { hidden = 256, intermediate = 128 }
}

kernelgen::kernels! {
    mod missing_separator;
    family = "expert"
    geometry g { hidden = 256, intermediate = 128 }
}

kernelgen::kernels! {
    mod typed_number;
    family = "expert";
    geometry g { hidden = 256usize, intermediate = 128 }
}

kernelgen::kernels! {
    mod duplicate_key;
    family = "expert";
    geometry g { hidden = 256, intermediate = 128, hidden = 512 }
}

fn main() {}
