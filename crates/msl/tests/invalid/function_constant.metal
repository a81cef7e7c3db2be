// Invalid MSL (function constant): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.8 (function constants; not supported by kernelgen).
// expect: 6: function constants
#include <metal_stdlib>
using namespace metal;
constant bool use_bias [[function_constant(0)]];
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = use_bias ? 1.0f : 0.0f;
}
