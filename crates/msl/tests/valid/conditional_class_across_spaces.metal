// `?:` of one class type in two address spaces (MLX's sort.h `i < n ? tgp[i] : ValT(init)`,
// scan.h, steel's loader.h `tmp_idx[j] ? tmp_val[j] : T(0)`): Metal's result is the class;
// clang finds no common type for a plain struct, and several for a class with conversions
// qualified per address space (a reduction of MLX's complex_t).
#include <metal_stdlib>
using namespace metal;
struct P { float a, b; };
template <typename T> struct cx;
template <typename T> constexpr constant bool is_cx_v = false;
template <typename T> constexpr constant bool is_cx_v<cx<T>> = true;
template <typename T> struct cx {
  T re, im;
  constexpr cx(T a, T b) thread : re(a), im(b) {}
  template <typename U, typename = typename enable_if<!is_cx_v<U>>::type>
  constexpr cx(U x) thread : re(x), im(0) {}
  constexpr cx(vec<T, 2> v) thread : re(v.x), im(v.y) {}
  template <typename U, typename = typename enable_if<!is_cx_v<U>>::type>
  constexpr operator U() const thread { return static_cast<U>(re); }
  template <typename U, typename = typename enable_if<!is_cx_v<U>>::type>
  constexpr operator U() const threadgroup { return static_cast<U>(re); }
  template <typename U, typename = typename enable_if<!is_cx_v<U>>::type>
  constexpr operator U() const device { return static_cast<U>(re); }
  constexpr operator vec<T, 2>() const thread { return vec<T, 2>(re, im); }
  constexpr operator vec<T, 2>() const threadgroup { return vec<T, 2>(re, im); }
  constexpr operator vec<T, 2>() const device { return vec<T, 2>(re, im); }
};
[[kernel]] void k(device P* out [[buffer(0)]], device const cx<float>* in [[buffer(1)]], device cx<float>* o2 [[buffer(2)]],
                  uint t [[thread_position_in_grid]]) {
  threadgroup P ps[4];
  threadgroup cx<float> cs[4];
  ps[t % 4] = P{float(t), 0};
  cs[t % 4] = in[t];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  cx<float> l(1.0f, 2.0f);
  out[t] = t < 4 ? ps[t] : P{1, 2};
  o2[t] = t < 4 ? cs[t] : cx<float>(0.0f, 0.0f);
  o2[t + 1] = t < 4 ? in[t] : l;
}
