// A functional cast to a template's vector type from a vector of as many elements of another type,
// `s2_t(h)` with s2_t a float2 and h a half2 (ggml-metal.metal:6811): Metal converts each element.
#include <metal_stdlib>
using namespace metal;
template <typename s2_t>
void widen(device const half2* h, device float2* out, uint i) { s2_t s = s2_t(h[i]) * 2.0f; out[i] = s; }
kernel void k(device const half2* h [[buffer(0)]], device float2* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    widen<float2>(h, out, i);
}
