#include <metal_stdlib>
using namespace metal;

[[kernel]] void h2f(const device ushort* in [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = float(as_type<half>(in[i]));
}
[[kernel]] void b2f(const device ushort* in [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = float(as_type<bfloat16_t>(in[i]));
}
[[kernel]] void f2h(const device float* in [[buffer(0)]], device ushort* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = as_type<ushort>(half(in[i]));
}
[[kernel]] void f2b(const device float* in [[buffer(0)]], device ushort* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  const bfloat16_t b = static_cast<bfloat16_t>(in[i]);
  out[i] = as_type<ushort>(b);
}
// Operator rules: T op T -> T (rounded), T op float -> float, T op int -> T,
// comparisons in float, math on T rounded once.
template <typename T>
[[kernel]] void ops(const device T* a [[buffer(0)]], const device T* b [[buffer(1)]],
                    device T* tt [[buffer(2)]], device float* tf [[buffer(3)]],
                    uint i [[thread_position_in_grid]]) {
  const T x = a[i];
  const T y = b[i];
  tt[i * 6 + 0] = x + y;
  tt[i * 6 + 1] = x * y;
  tt[i * 6 + 2] = x - 3;
  tt[i * 6 + 3] = metal::exp(x);
  tt[i * 6 + 4] = metal::abs(y) / x;
  T z = x;
  z += 0.1f;
  tt[i * 6 + 5] = z;
  tf[i * 3 + 0] = x * 0.1f;
  tf[i * 3 + 1] = 2.5f + y;
  tf[i * 3 + 2] = (x < y) ? 1.0f : 0.0f;
}
template [[host_name("ops_half")]] [[kernel]] decltype(ops<half>) ops<half>;
template [[host_name("ops_bfloat")]] [[kernel]] decltype(ops<bfloat16_t>) ops<bfloat16_t>;
// Metal's usual arithmetic conversions where C++'s differ: `?:` with half and float is a
// float (candle affine.metal:113), with half and int a half.
[[kernel]] void mixed_conditionals(const device half* h [[buffer(0)]], const device float* f [[buffer(1)]],
                                   device float* wide [[buffer(2)]], device half* narrow [[buffer(3)]],
                                   uint i [[thread_position_in_grid]]) {
  const bool odd = (i & 1) != 0;
  const half x = h[i];
  const float y = f[i];
  auto r = odd ? x : y;
  wide[i * 3 + 0] = r;
  wide[i * 3 + 1] = odd ? y : x * x;
  narrow[i * 2 + 0] = odd ? 0 : x;
  // an lvalue stays one, and the same types keep their type
  float s = 0.0f, t = 0.0f;
  (odd ? s : t) = y;
  wide[i * 3 + 2] = s - t;
  narrow[i * 2 + 1] = odd ? x : half(y);
}
