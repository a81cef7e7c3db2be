// Invalid MSL (an asm label): g++ with the emulator's macros accepts it, and the call runs libc's system.
// Cites: MSL specification section 1.5 (Metal and C++: MSL has no asm).
// expect: 6: an asm label
#include <metal_stdlib>
using namespace metal;
int run(constant char* command) asm("system");
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i == 0) run("id");
  y[i] = 1.0f;
}
