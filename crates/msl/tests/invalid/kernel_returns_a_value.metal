// Invalid MSL (kernel returns a value): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.1.3 (a compute function's return type must be void).
// expect: 6: a kernel function must return void
#include <metal_stdlib>
using namespace metal;
[[kernel]] float k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
  return y[i];
}
