// Invalid MSL (a GNU section attribute): g++ with the emulator's macros accepts it; in .init_array
// a function pointer is a constructor.
// Cites: MSL specification chapter 5 (Metal's attributes), section 1.5 (Metal and C++).
// expect: 8: the attribute 'visibility' is not part of MSL
// expect: 9: the attribute 'section' is not part of MSL
#include <metal_stdlib>
using namespace metal;
inline __attribute__((visibility("default"))) float scale() { return 2.0f; }
__attribute__((section(".kernel_data"))) constant float factor = 3.0f;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = scale() * factor;
}
