// A vector conversion whose one argument has a comma in a template argument list (MLX's dot.h:
// `float4(*reinterpret_cast<const device metal::vec<T, 4>*>(a + idx + j))`): Metal converts the
// half vector element by element; read as two arguments it became a braced initialiser of
// float4 from one half4 lvalue, which clang refused.
#include <metal_stdlib>
using namespace metal;

template <typename T>
[[kernel]] void k(device const T* a [[buffer(0)]], device float* out [[buffer(1)]], uint t [[thread_position_in_grid]]) {
  float4 c = float4(*reinterpret_cast<const device metal::vec<T, 4>*>(a + 4 * t));
  out[t] = c.x + c.w;
}
template [[host_name("k_half")]] [[kernel]] decltype(k<half>) k<half>;
