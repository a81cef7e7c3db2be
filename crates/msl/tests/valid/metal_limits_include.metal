// repro T5: #include <metal_limits> (candle reduce.metal:2).
#include <metal_stdlib>
#include <metal_limits>
using namespace metal;
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = numeric_limits<float>::max();
}
