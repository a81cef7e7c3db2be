// Invalid MSL (a function declared, never defined): g++ with the emulator's macros accepts it.
// Cites: MSL specification section 1.5 (Metal and C++: no C++ or C standard library; a kernel calls
// only the functions its source defines and Metal's standard library, chapter 6).
// expect: 9: 'helper' is declared but never defined
// expect: 10: 'twice' is declared but never defined
#include <metal_stdlib>
using namespace metal;
template <typename T> T defined_later(T x);
float helper(float x);
template <typename T> T twice(T x);
template <typename T> T defined_later(T x) { return x; }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = defined_later(y[i]) + helper(y[i]) + twice(y[i]);
}
