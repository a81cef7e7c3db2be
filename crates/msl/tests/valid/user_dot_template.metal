// A source's own dot template for its own vector struct, beside Metal's dot, with `using namespace
// metal` (mistral.rs pagedattention.metal:30 and :1089); Metal's dot still serves float4.
#include <metal_stdlib>
using namespace metal;
struct Float8_ { float4 x; float4 y; };
template <typename T> inline float sum(T v);
template <> inline float sum(Float8_ v) { return v.x.x + v.x.y + v.x.z + v.x.w + v.y.x + v.y.y + v.y.z + v.y.w; }
inline Float8_ mul(Float8_ a, Float8_ b) { return {a.x * b.x, a.y * b.y}; }
template <typename T> inline float dot(T a, T b) { return sum(mul(a, b)); }
[[kernel]] void k(device const Float8_* a [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  Float8_ u = a[2 * i], v = a[2 * i + 1];
  out[i] = dot(u, v) + dot(u.x, v.y) + float(dot(half2(u.x.xy), half2(v.x.zw)));
}
