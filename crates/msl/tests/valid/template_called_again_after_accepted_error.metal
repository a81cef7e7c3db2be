// A function template specialization called twice, whose body has an error that clang's OpenCL
// model raises and Metal does not (MLX's fp_quantized.h: `dequantize_scale<half, 32>`, whose
// `half(fp8_e8m0)` has an `operator float` and an `operator bfloat16_t`, ambiguous to clang,
// where Metal takes float). clang marks the specialization invalid once it instantiated it, and
// refuses a later call (one it instantiates after, in `second_scale<half>`) as a substitution
// failure with no reason of its own.
#include <metal_stdlib>
using namespace metal;
struct scale8 {
  uchar bits;
  operator bfloat() thread { return as_type<bfloat>(ushort(ushort(bits) << 7)); }
  operator float() thread { return as_type<float>(uint(bits) << 23); }
};
template <typename T, int group_size>
T dequantize_scale(uchar s) { return T(*(thread scale8*)(&s)); }
template <typename T>
T second_scale(device const uchar* s) { return dequantize_scale<T, 32>(s[1]); }
[[kernel]] void k(device const uchar* s [[buffer(0)]], device half* out [[buffer(1)]], uint t [[thread_position_in_grid]]) {
  out[t] = dequantize_scale<half, 32>(s[t]);
  out[t + 1] = second_scale<half>(s + t);
}
