// Invalid MSL (a pointer cast to an integer): g++ with the emulator's macros accepts it, and the kernel
// reads its buffer's host address.
// Cites: MSL specification chapter 2 (data types: no conversion between pointers and integers).
// expect: 10: converts between a pointer and an integer
// expect: 9: converts between a pointer and an integer
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], device ulong* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[0] = (ulong)y;
  out[1] = reinterpret_cast<ulong>(y);
  y[i] = 1.0f;
}
