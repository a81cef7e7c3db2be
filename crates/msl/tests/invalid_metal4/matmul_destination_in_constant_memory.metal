// Invalid Metal 4: a matmul2d destination over constant memory (a constant tensor handle is a
// valid argument, but read-only: run writes the destination). Cites: Apple's
// MPPTensorOpsMatMul2dImpl.h (__run dispatches on the operands' spaces, device or threadgroup
// for SIMD-groups; anything else is its static_assert "Unsupported address space").
// expect: 16: Unsupported address space
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(tensor<device half, dextents<int32_t, 2>> A [[buffer(0)]],
              tensor<device half, dextents<int32_t, 2>> B [[buffer(1)]],
              tensor<constant float, dextents<int32_t, 2>> C [[buffer(2)]]) {
  constexpr auto desc = matmul2d_descriptor(64, 32);
  matmul2d<desc, execution_simdgroups<4>> op;
  op.run(A, B, C);
}
