// A matrix (or any class template of several arguments) copied from device or threadgroup memory into
// a thread variable: the implicit copy constructor, which Metal gives every address space (candle
// quantized.metal:6460, dequantize_f32).
#include <metal_stdlib>
using namespace metal;
template <typename T, int N> struct pair_of { vec<T, N> a; vec<T, N> b; };
kernel void k(device const float4x4* m [[buffer(0)]], device const pair_of<float, 4>* s [[buffer(1)]], device float4* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    float4x4 t = *m;
    pair_of<float, 4> u = s[i];
    out[i] = t[0] + u.a;
}
