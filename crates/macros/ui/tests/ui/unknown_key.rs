// Keys the spec model does not have, each reported at the key.

kernelgen::kernels! {
    mod unknown_keys;
    family = "expert";
    axis { quant = [q4] }
    axes { quantization = [q4] }
    geometry g { hiden = 256, intermediate = 128 }
}

fn main() {}
