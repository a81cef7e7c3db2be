// Invalid MSL (a struct's own assignment operator, declared for thread objects and noexcept as clang's implicit ones are, called on a device object): its this is thread, which a device object does not convert to.
// Cites: MSL specification section 4 (no conversion between address spaces: a member declared thread is not callable on a device object).
// expect: 13: changes the address space
#include <metal_stdlib>
using namespace metal;
struct acc {
  float v;
  thread acc& operator=(const thread acc& o) thread noexcept { v = o.v; return *this; }
};
kernel void k(device acc* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  acc a;
  a.v = float(i);
  out[i] = a;
}
