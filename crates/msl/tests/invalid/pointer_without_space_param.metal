// Invalid MSL (a pointer type without an address space, as a param): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4 (every pointer names the address space of what it points to; Apple: "pointer type must have explicit address space qualifier").
// expect: 6: pointer type must have explicit address space qualifier
#include <metal_stdlib>
using namespace metal;
inline float first(float* p) { return p[0]; }
[[kernel]] void k(device const float* x [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  float v[2] = {x[i], 1.0f};
  y[i] = first(v);
  (void)0;
}
