// Invalid MSL (a 16x16 simdgroup_matrix): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 6.7 (SIMD-group matrices are 8x8).
// expect: 7: 8x8
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  simdgroup_matrix<float, 16, 16> m;
  y[i] = 0.0f;
}
