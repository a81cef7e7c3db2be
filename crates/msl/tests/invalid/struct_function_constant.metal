// Invalid MSL (a struct function constant): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.8 (function constants are scalars or vectors).
// expect: 7: function constant
#include <metal_stdlib>
using namespace metal;
struct Params { float a; float b; };
constant Params kParams [[function_constant(0)]];
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] *= kParams.a;
}
