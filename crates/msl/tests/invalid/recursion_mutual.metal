// Invalid MSL (recursion mutual): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features). Valid from a later version (recursive calls are Metal 2.4): checked at 2.3.
// metal-version: 230
// expect: 9: recursive function calls
// expect: 10: recursive function calls
#include <metal_stdlib>
using namespace metal;
inline uint odd(uint n);
inline uint even(uint n) { return n == 0 ? 1 : odd(n - 1); }
inline uint odd(uint n) { return n == 0 ? 0 : even(n - 1); }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(even(i));
}
