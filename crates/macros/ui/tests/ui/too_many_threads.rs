// 64 rows per threadgroup need 2048 threads, above Metal's 1024.

kernelgen::kernels! {
    mod too_many_threads;
    family = "expert";
    axes { rows_per_threadgroup = [4, 64] }
    geometry g { hidden = 256, intermediate = 128 }
}

fn main() {}
