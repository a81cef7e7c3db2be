// repro C12: `threadgroup float buf[32] = {0};` in a kernel (mlx layer_norm.metal:65; compiled in MLX CI).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float buf[32] = {0};
    buf[lid] = out[lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[lid] = buf[31 - lid];
}
