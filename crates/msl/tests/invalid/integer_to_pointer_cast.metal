// Invalid MSL (an integer cast to a pointer): g++ with the emulator's macros accepts it, and the kernel
// writes wherever the integer says.
// Cites: MSL specification chapter 2 (data types: no conversion between pointers and integers).
// expect: 8: converts between a pointer and an integer
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device ulong* addr [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  device float* p = (device float*)addr[0];
  p[i] = 1.0f;
}
