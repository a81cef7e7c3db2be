// Invalid MSL (virtual function): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 6: virtual functions are not supported
#include <metal_stdlib>
using namespace metal;
struct Op { virtual float apply(float x) const { return x; } };
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
}
