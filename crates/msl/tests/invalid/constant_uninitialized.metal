// Invalid MSL (a program-scope constant without an initializer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.2 (program-scope variables in the constant address space must be initialized).
// expect: 6: must be initialized
#include <metal_stdlib>
using namespace metal;
constant float scale;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] *= scale;
}
