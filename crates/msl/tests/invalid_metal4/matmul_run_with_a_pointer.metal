// Invalid Metal 4: matmul2d::run with a raw device pointer as its destination. Cites: Apple's
// MPPTensorOpsMatMul2d.h (every operand of run is a tensor or a cooperative tensor).
// expect: 16: no matching member function for call to 'run'
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(tensor<device half, dextents<int32_t, 2>> A [[buffer(0)]],
              tensor<device half, dextents<int32_t, 2>> B [[buffer(1)]],
              device float* C [[buffer(2)]], uint2 tgid [[threadgroup_position_in_grid]]) {
  constexpr auto desc = matmul2d_descriptor(64, 32);
  matmul2d<desc, execution_simdgroups<4>> op;
  auto mA = A.slice(0, tgid.y * 64);
  auto mB = B.slice(tgid.x * 32, 0);
  op.run(mA, mB, C);
}
