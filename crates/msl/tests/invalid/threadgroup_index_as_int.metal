// Invalid MSL ([[thread_index_in_threadgroup]] as int): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (indices are uint or ushort).
// expect: 6: thread_index_in_threadgroup
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], int t [[thread_index_in_threadgroup]]) {
  y[t] = 1.0f;
}
