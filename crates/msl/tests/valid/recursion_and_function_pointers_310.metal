// Valid at Metal 3.1 (MSL section 1.5: function pointers from Metal 2.3, recursive calls from 2.4): a
// function pointer variable (MLX steel_gemm_gather_nax.h: `auto do_gemm = gemm_loop<...>`) and a recursive helper.
#include <metal_stdlib>
using namespace metal;
template <typename T> inline T twice(T x) { return x + x; }
inline uint fact(uint n) { return n <= 1 ? 1 : n * fact(n - 1); }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  auto f = twice<float>;
  y[i] = f(y[i]) + float(fact(i & 7));
}
