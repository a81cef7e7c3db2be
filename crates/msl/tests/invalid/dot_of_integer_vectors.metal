// Invalid MSL (dot of two int4): Metal's dot takes floating vectors only.
// Cites: MSL specification section 6.14 (geometric functions: T is a vector of half, float or bfloat).
// expect: 7: no matching function for call to 'dot'
#include <metal_stdlib>
using namespace metal;
kernel void k(device const int4* a [[buffer(0)]], device int* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    out[i] = dot(a[i], a[i + 1]);
}
