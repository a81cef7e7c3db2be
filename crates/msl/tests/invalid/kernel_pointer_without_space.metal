// Invalid MSL (kernel pointer without space): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification chapter 4 (address spaces: kernel pointer arguments need one).
// expect: 6: must be declared device, constant or threadgroup
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
}
