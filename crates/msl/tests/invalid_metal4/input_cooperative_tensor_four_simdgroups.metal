// Invalid Metal 4: a cooperative left input from a matmul2d run by four SIMD-groups (input
// cooperative tensors need a single one, execution_simdgroup). Cites: Apple's
// MPPTensorOpsMatMul2dImpl.h ("Input cooperative tensors require a single SIMD group").
// expect: 13: Input cooperative tensors require a single SIMD group
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  constexpr auto desc = matmul2d_descriptor(16, 32, 16);
  matmul2d<desc, execution_simdgroups<4>> op;
  auto a = op.get_left_input_cooperative_tensor<half, half, float>();
  y[i] = a[0];
}
