// A matrix assigned into device or threadgroup memory from a thread one: the implicit copy assignment,
// which Metal gives every address space (candle quantized.metal:6922, ggml-metal.metal:9850 and 11350).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float4x4* m [[buffer(0)]], threadgroup half4x4* s [[threadgroup(0)]], uint i [[thread_position_in_grid]]) {
    float4x4 t = m[0];
    m[i] = t;
    half4x4 h = s[0];
    s[i] = h;
}
