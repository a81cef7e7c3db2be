// Invalid MSL (simd lane as uint3): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (kernel function input attributes).
// expect: 6: Metal allows uint or ushort
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint3 lane [[thread_index_in_simdgroup]]) {
  y[lane.x] = 1.0f;
}
