// A constexpr constant class object copied from another (MLX's reduction ops.h and scan.h:
// `static constexpr constant U init = Limits<U>::max;` with U its complex_t). clang cannot take
// the implicit copy from constant memory, goes through the class's vector conversions, and its
// constant evaluator (clang 14) has no vector element access (`v.x`); Metal copies.
#include <metal_stdlib>
using namespace metal;
template <typename T> struct cx {
  T re, im;
  constexpr cx(T a, T b) thread : re(a), im(b) {}
  constexpr cx(vec<T, 2> v) thread : re(v.x), im(v.y) {}
  constexpr cx(vec<T, 2> v) constant : re(v.x), im(v.y) {}
  constexpr operator vec<T, 2>() const thread { return vec<T, 2>(re, im); }
  constexpr operator vec<T, 2>() const constant { return vec<T, 2>(re, im); }
};
template <typename T> struct Limits {
  static constexpr constant cx<T> max = cx<T>(INFINITY, INFINITY);
};
template <typename U> struct Min {
  static constexpr constant U init = Limits<float>::max;
};
[[kernel]] void k(device cx<float>* out [[buffer(0)]], uint t [[thread_position_in_grid]]) {
  out[t].re = Min<cx<float>>::init.re;
}
