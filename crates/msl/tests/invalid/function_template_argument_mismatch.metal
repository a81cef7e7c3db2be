// Invalid MSL (a function whose parameter is a device pointer passed for a template's function pointer parameter taking a thread pointer): no conversion between the two function types.
// Cites: MSL specification section 4 (a pointer's address space is part of its type: a thread float* parameter is not a device float* one).
// expect: 11: no matching function
#include <metal_stdlib>
using namespace metal;
void twice(device float* x) { x[0] *= 2.0f; }
template <void (*op)(thread float*)>
void apply(thread float* x) { op(x); }
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float v = out[i];
    apply<twice>(&v);
    out[i] = v;
}
