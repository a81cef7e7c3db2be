// Names of Metal's own header that sources use (candle reduce.metal:31, :199, :314): vec_elements,
// _numeric_limits_impl specialized for a source's type (numeric_limits then gives it), and
// __is_valid_simdgroup_type.
#include <metal_stdlib>
using namespace metal;
template <typename T> struct indexed { uint i; T val; };
template <typename T> struct _numeric_limits_impl<indexed<T>> {
  static constexpr METAL_FUNC indexed<T> lowest() { return indexed<T>{0, numeric_limits<T>::lowest()}; }
};
template <typename T> constexpr ushort granularity() { return vec_elements<T>::value == 0 ? 1 : vec_elements<T>::value; }
template <typename T> constexpr constant bool is_simd_t = __is_valid_simdgroup_type<T>::value;
kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  indexed<float> m = numeric_limits<indexed<float>>::lowest();
  static_assert(granularity<float4>() == 4 && granularity<float>() == 1, "vec_elements");
  static_assert(is_simd_t<half2> && !is_simd_t<indexed<float>>, "simdgroup types");
  out[i] = m.val + float(numeric_limits<int>::max());
}
