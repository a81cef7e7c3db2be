// Invalid MSL (a GNU destructor): g++ with the emulator's macros accepts it.
// Cites: MSL specification chapter 5 (Metal's attributes), section 1.5 (Metal and C++).
// expect: 6: the attribute 'destructor' is not part of MSL
#include <metal_stdlib>
using namespace metal;
[[gnu::destructor]] void on_unload() {
}
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
}
