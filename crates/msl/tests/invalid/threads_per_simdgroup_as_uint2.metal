// Invalid MSL ([[threads_per_simdgroup]] as uint2): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (threads_per_simdgroup is uint or ushort).
// expect: 6: threads_per_simdgroup
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint2 n [[threads_per_simdgroup]]) {
  y[0] = float(n.x);
}
