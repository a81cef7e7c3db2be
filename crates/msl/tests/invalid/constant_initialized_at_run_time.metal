// Invalid MSL (program-scope constant initialized by a call): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.2 (program-scope constant variables must be initialized with constant expressions).
// expect: 7: constant expression
#include <metal_stdlib>
using namespace metal;
inline float scale() { return 2.0f; }
constant float kScale = scale();
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] *= kScale;
}
