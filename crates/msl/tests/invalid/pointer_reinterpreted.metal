// Invalid MSL (a pointer's bits read through as_type, a bit cast, a reference or a union): g++ with the
// emulator's macros accepts it.
// Cites: MSL specification chapter 2 (data types: as_type reinterprets data types, no conversion
// between pointers and integers).
// expect: 14: as_type reinterprets data, not pointers
// expect: 17: converts between a pointer and an integer
// expect: 16: converts between a pointer and an integer
// expect: 15: converts between a pointer and an integer
// expect: 12: holds a pointer beside other members
#include <metal_stdlib>
using namespace metal;
union address { device float* p; ulong bits; };
[[kernel]] void k(device float* y [[buffer(0)]], device ulong* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[0] = as_type<ulong>(y);
  out[1] = __builtin_bit_cast(ulong, y);
  out[2] = reinterpret_cast<thread ulong&>(y);
  out[3] = *(thread ulong*)&y;
  address a;
  a.p = y;
  y[i] = float(a.bits);
}
