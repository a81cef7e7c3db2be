// Invalid MSL (simdgroup_matrix of int): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 6.7 (SIMD-group matrices of float, half or bfloat).
// expect: 7: float, half or bfloat
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device int* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  simdgroup_matrix<int, 8, 8> m;
  y[i] = 0;
}
