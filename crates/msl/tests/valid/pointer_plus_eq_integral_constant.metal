// repro (MLX 0.32.1 steel/attn/mma.h:118, `src += str_y;` with str_y an `Int<1>`): a pointer plus-assigned (and minus-assigned) an object of MLX's own integral_constant, a class that converts to int.
#include <metal_stdlib>
using namespace metal;
namespace steel {
template <typename T, T v> struct integral_constant {
  static constexpr constant T value = v;
  using value_type = T;
  METAL_FUNC constexpr operator value_type() const thread noexcept { return value; }
};
template <int val> using Int = integral_constant<int, val>;
}
template <typename SrcPtr, typename Str>
float sum2(SrcPtr src, Str str) {
  float s = float(src[0]);
  src += str;
  s += float(src[0]);
  src -= str;
  return s;
}
kernel void k(const device float* in [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = sum2(in + 2 * i, steel::Int<1>{});
}
