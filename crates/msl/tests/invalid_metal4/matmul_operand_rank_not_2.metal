// Invalid Metal 4: matmul2d::run with a rank-3 left operand and a rank-1 destination (matmul2d
// multiplies matrices). Cites: Apple's MPPTensorOpsMatMul2dImpl.h (__run: static_assert
// "Operand must have rank 2" for the left, right and destination operands).
// expect: 15: Operand must have rank 2
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(tensor<device half, dextents<int32_t, 3>> A [[buffer(0)]],
              tensor<device half, dextents<int32_t, 2>> B [[buffer(1)]],
              tensor<device float, dextents<int32_t, 1>> C [[buffer(2)]]) {
  constexpr auto desc = matmul2d_descriptor(64, 32);
  matmul2d<desc, execution_simdgroups<4>> op;
  op.run(A, B, C);
}
