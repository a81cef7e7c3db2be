// repro control: the same kernel with the [[kernel]] attribute.
#include <metal_stdlib>
using namespace metal;
template <typename T>
[[kernel]] void scale(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = x[i] * T(2); }
template [[host_name("scale_f32")]] [[kernel]] void scale<float>(device float*, uint);
