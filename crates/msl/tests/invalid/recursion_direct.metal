// Invalid MSL (recursion direct): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features). Valid from a later version (recursive calls are Metal 2.4): checked at 2.3.
// metal-version: 230
// expect: 7: recursive function calls
#include <metal_stdlib>
using namespace metal;
inline uint fact(uint n) { return n <= 1 ? 1 : n * fact(n - 1); }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(fact(i));
}
