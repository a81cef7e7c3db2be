// Invalid MSL beside the class copies Metal makes across address spaces (a class object read as
// a value from constant memory, `?:` of one class in two spaces): a thread reference to a constant
// object and a `?:` of pointers into two spaces stay refused. g++ with the emulator's macros
// accepts them, Metal does not. Cites: MSL specification chapter 4 (no conversion between address
// spaces).
// expect: 13: binding reference
// expect: 14: incompatible operand types
#include <metal_stdlib>
using namespace metal;
struct P { float a, b; };
constant P p = {1, 2};
[[kernel]] void k(device P* out [[buffer(0)]], device float* f [[buffer(1)]], uint t [[thread_position_in_grid]]) {
  thread P& r = p;
  threadgroup float* q = t < 4 ? f : (threadgroup float*)nullptr;
  out[t] = r;
  out[t].a = *q;
}
