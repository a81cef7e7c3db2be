// half does not convert to bfloat implicitly (MSL 2.22): with overloads for float and bfloat, a half
// argument takes the float one (MLX utils.h's log1p from binary_ops.h:133; mistral.rs utils.metal),
// and a class converting to both becomes half through float (MLX fp_quantized.h:36, fp8_e8m0).
#include <metal_stdlib>
using namespace metal;
inline float my_log1p(float x) { return log(1.0f + x); }
inline bfloat my_log1p(bfloat x) { return bfloat(log(1.0f + float(x))); }
struct e8m0 {
    uchar bits;
    operator bfloat() const thread { return as_type<bfloat>(ushort(ushort(bits) << 7)); }
    operator float() const thread { return as_type<float>(uint(bits) << 23); }
};
kernel void k(device half* out [[buffer(0)]], device const uchar* s [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    half h = out[i];
    e8m0 e{s[i]};
    out[i] = half(my_log1p(h)) + half(e);
}
