// Invalid MSL (a static constant local in a kernel): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.2 (constant variables are declared at program scope; a kernel's locals are thread variables).
// expect: 7: static
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  static constant float kTable[2] = {1.0f, 2.0f};
  y[i] *= kTable[i & 1];
}
