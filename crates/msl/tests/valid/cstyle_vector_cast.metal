// A C-style cast between vectors of as many elements converts each one (candle quantized.metal:3495,
// mistral.rs pagedattention.metal:483), where OpenCL would reinterpret the bits.
#include <metal_stdlib>
using namespace metal;
kernel void k(device half2* h [[buffer(0)]], device float2* f [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    f[i] = (float2)h[i];
    h[i] = (half2)(f[i] * 2.0f);
}
