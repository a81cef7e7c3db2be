// Function templates of kernels may share a name (MLX steel_gemm_masked.h: two block_masked_gemm
// templates): each instantiation has its own host name, so Metal accepts them (MSL 1.5 forbids
// overloading kernel functions, not templates told apart by their explicit instantiations).
#include <metal_stdlib>
using namespace metal;
template <typename T>
[[kernel]] void scale(device T* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] *= T(2); }
template <typename T, int N>
[[kernel]] void scale(device T* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] *= T(N); }
template [[host_name("scale_f32")]] [[kernel]] void scale<float>(device float*, uint);
template [[host_name("scale3_f32")]] [[kernel]] void scale<float, 3>(device float*, uint);
