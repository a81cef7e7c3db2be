// Invalid MSL (an array function constant): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.8 (function constants are scalars or vectors).
// expect: 6: function constant
#include <metal_stdlib>
using namespace metal;
constant float kWeights[4] [[function_constant(0)]];
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] *= kWeights[i & 3];
}
