// Invalid MSL (a C function declared, never defined): g++ with the emulator's macros accepts it
// and links libc's system; Metal does not (a kernel calls only what its source defines and Metal's library).
// Cites: MSL specification section 1.5 (Metal and C++: no C++ or C standard library).
// expect: 7: 'system' is declared but never defined
#include <metal_stdlib>
using namespace metal;
extern "C" int system(constant char* command);
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i == 0) system("id");
  y[i] = 1.0f;
}
