// repro D1: #include <cuda_fp16.h> inside an #if branch the preprocessor drops (ggml-common.h:39).
#include <metal_stdlib>
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif
using namespace metal;
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) { out[i] = 1.0f; }
