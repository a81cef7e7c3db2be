// Invalid MSL (delete expression): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 7: the delete operator is not supported
#include <metal_stdlib>
using namespace metal;
struct S { float v; };
inline void drop(thread S* s) { delete s; }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
}
