// Invalid MSL (a GNU constructor): g++ with the emulator's macros accepts it, and it runs when the
// compiled object loads, before any kernel.
// Cites: MSL specification chapter 5 (Metal's attributes), section 1.5 (Metal and C++).
// expect: 7: the attribute 'constructor' is not part of MSL
#include <metal_stdlib>
using namespace metal;
__attribute__((constructor)) void on_load() {
}
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
}
