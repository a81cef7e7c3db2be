// Invalid MSL (a variable declared extern, never defined): g++ with the emulator's macros accepts it,
// and the kernel reads libc's environment pointer.
// Cites: MSL specification section 1.5 (Metal and C++: no C or C++ standard library).
// expect: 7: variable 'environ' is declared but never defined
#include <metal_stdlib>
using namespace metal;
extern constant ulong environ;
[[kernel]] void k(device ulong* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = environ;
}
