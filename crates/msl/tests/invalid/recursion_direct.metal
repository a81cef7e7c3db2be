// Invalid MSL (recursion direct): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 6: recursive function calls
#include <metal_stdlib>
using namespace metal;
inline uint fact(uint n) { return n <= 1 ? 1 : n * fact(n - 1); }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(fact(i));
}
