// Invalid MSL (a pointer type without an address space, written `const T*`, as a local): the const read before the type names no space.
// Cites: MSL specification section 4 (every pointer names the address space of what it points to; Apple: "pointer type must have explicit address space qualifier").
// expect: 8: pointer type must have explicit address space qualifier
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device const float* x [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  float v[2] = {x[i], 1.0f};
  const volatile float* p = v;
  y[i] = *p;
}
