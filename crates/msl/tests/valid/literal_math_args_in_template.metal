// A math function of an integer and an unsuffixed literal in a template, `fmin(1, x / 6 + 0.5)`
// (ggml-metal.metal:1201, hardswish): the literal is float to Metal, so fmin(float, float) is the one;
// and fmax(0, x) of a half4 or float4 x (ggml's relu) left to the vector overloads.
#include <metal_stdlib>
using namespace metal;
template <typename T>
void relu(device T* dst, T x) { dst[0] = fmax(0, x); }
template <typename T>
void hardsigmoid(device T* dst, T x) { dst[0] = (T) fmax(0, fmin(1, x / 6 + 0.5)); }
kernel void k(device float* d [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    hardsigmoid<float>(d + i, float(i));
    relu<half4>((device half4*)d, half4(d[i]));
    relu<float4>((device float4*)d, float4(d[i]));
}
