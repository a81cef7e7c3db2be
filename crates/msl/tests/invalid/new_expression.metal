// Invalid MSL (new expression): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 7: the new operator is not supported
// expect: 10: the new operator is not supported
#include <metal_stdlib>
using namespace metal;
inline void* operator new(unsigned long, void* p) { return p; }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  float slot[1];
  thread float* p = new (slot) float(2.0f);
  y[i] = *p;
}
