// Invalid MSL (derived class): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 7: derived classes are not supported
#include <metal_stdlib>
using namespace metal;
struct Base { float scale; };
struct Scaled : Base { float bias; };
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  const constant Scaled* s = nullptr;
  y[i] = s ? s->scale * y[i] + s->bias : y[i];
}
