// Invalid MSL (a device pointer behind an alias template, converted to a thread pointer): g++
// with the emulator's macros accepts it, Metal does not. Cites: MSL specification chapter 4
// (address spaces: no conversion between them; an alias names the same device pointer).
// expect: 10: changes the address space
#include <metal_stdlib>
using namespace metal;
template <class T> using ptr = T*;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  ptr<device float> p = y + i;
  thread float* q = p;
  q[0] = 1.0f;
}
