// Invalid MSL (fmin of two integers, in a template): Metal's fmin takes half or float, and int converts to either alike (the call is ambiguous); only a floating literal makes the float overload the one.
// Cites: MSL specification section 6.5 (math functions take arguments of one type T, half or float).
// expect: 7: call to 'fmin' is ambiguous
#include <metal_stdlib>
using namespace metal;
template <typename T>
void clamp_one(device T* dst, int n) { dst[0] = (T) fmin(1, n); }
kernel void k(device float* d [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    clamp_one<float>(d + i, int(i));
}
