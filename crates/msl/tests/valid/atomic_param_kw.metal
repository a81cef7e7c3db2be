// repro K2: `kernel` keyword kernel with a `device atomic_int*` parameter (ggml-metal.metal kernel_count_equal).
#include <metal_stdlib>
using namespace metal;
kernel void count(device atomic_int* dst [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    atomic_fetch_add_explicit(dst, 1, memory_order_relaxed);
}
