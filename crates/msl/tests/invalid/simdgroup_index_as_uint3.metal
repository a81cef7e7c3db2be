// Invalid MSL ([[simdgroup_index_in_threadgroup]] as uint3): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (indices are uint or ushort).
// expect: 6: simdgroup_index_in_threadgroup
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint3 s [[simdgroup_index_in_threadgroup]]) {
  y[s.x] = 1.0f;
}
