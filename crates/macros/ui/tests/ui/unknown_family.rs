// A family kernelgen does not know, and a spec that names none.

kernelgen::kernels! {
    mod unknown_family;
    family = "experts";
    geometry g { hidden = 256, intermediate = 128 }
}

kernelgen::kernels! {
    mod no_family;
    geometry g { hidden = 256, intermediate = 128 }
}

fn main() {}
