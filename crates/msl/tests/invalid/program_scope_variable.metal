// Invalid MSL (program scope variable): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.2 (constant address space).
// expect: 6: program scope variable must reside in constant address space
#include <metal_stdlib>
using namespace metal;
float bias = 1.0f;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = bias;
}
