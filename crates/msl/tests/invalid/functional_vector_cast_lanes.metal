// Invalid MSL (a functional cast to a template's vector type from a vector of another length, float4 from half2): Metal's vector conversions keep the element count.
// Cites: MSL specification section 2.2 (vector types convert element by element, between vectors of as many elements).
// expect: 7: of different size
#include <metal_stdlib>
using namespace metal;
template <typename s4_t>
void widen(device const half2* h, device float4* out, uint i) { s4_t s = s4_t(h[i]); out[i] = s; }
kernel void k(device const half2* h [[buffer(0)]], device float4* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    widen<float4>(h, out, i);
}
