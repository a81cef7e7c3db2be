// Invalid MSL (noexcept): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 7: the noexcept operator is not supported
#include <metal_stdlib>
using namespace metal;
inline float twice(float x) noexcept { return 2.0f * x; }
constant constexpr bool kNoThrow = noexcept(twice(1.0f));
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = twice(y[i]);
}
