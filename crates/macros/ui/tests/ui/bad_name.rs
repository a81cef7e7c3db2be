// Names that cannot become kernel or module names.

kernelgen::kernels! {
    mod bad_geometry_names;
    family = "expert";
    geometry Tiny { hidden = 256, intermediate = 128 }
    geometry "2x" { hidden = 256, intermediate = 128 }
}

kernelgen::kernels! {
    mod Experts;
    family = "expert";
    geometry g { hidden = 256, intermediate = 128 }
}

fn main() {}
