// Invalid MSL (a thread T& template whose signature names T::type, called with a float element of a thread array reference): the substitution fails in Metal too, float having no member type.
// Cites: MSL specification section 1.5 (Metal is C++14: a call with no viable candidate is an error).
// expect: 11: no matching function for call to 'scale'
#include <metal_stdlib>
using namespace metal;
template <typename T>
METAL_FUNC void scale(thread T& a, typename T::type s) { a *= s; }
template <short N>
struct Scaler {
  static METAL_FUNC void run(thread float (&vals)[N]) {
    scale(vals[0], 2.0f);
  }
};
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float vals[2] = {out[i], out[i + 1]};
    Scaler<2>::run(vals);
    out[i] = vals[0];
}
