// Dimensions no kernel can have, each at the number.

kernelgen::kernels! {
    mod not_whole_words;
    family = "expert";
    axes { quant = [q4] }
    geometry g { hidden = 250, intermediate = 128 }
}

kernelgen::kernels! {
    mod out_of_range;
    family = "expert";
    geometry g { hidden = 256, intermediate = 0 }
}

fn main() {}
