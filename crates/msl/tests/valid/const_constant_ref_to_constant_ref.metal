// repro C1: `const constant int&` passed to a `constant int&` parameter (mlx quantized.h:1588 and mistral.rs quantized.metal:2693 qmv_quad_impl).
#include <metal_stdlib>
using namespace metal;
inline int twice(constant int& n) { return 2 * n; }
kernel void k(device int* out [[buffer(0)]], const constant int& n [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    out[i] = twice(n);
}
