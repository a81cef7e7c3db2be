// repro T1: float4x4/half4x4 (MSL spec v4 2.3; ggml, candle quantized, torchao).
#include <metal_stdlib>
using namespace metal;
kernel void k(device float4* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float4x4 m = float4x4(1.0f);
    half4x4 h = half4x4(m);
    out[i] = m[i & 3] + float4(h[0]);
}
