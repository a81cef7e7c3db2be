// Invalid MSL (long long): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 2.1 (scalar types: long is 64-bit; there is no long long).
// expect: 7: long long
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device long* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  long long big = y[i];
  y[i] = long(big) * 2;
}
