// Invalid Metal 4: a float x float matmul2d into a half destination, a combination that
// Apple's table of supported element types does not list. Cites: Apple's
// MPPTensorOpsMatMul2d.h (the data type combinations supported by matmul2d).
// expect: 15: unsupported combination of left, right and destination element types
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(tensor<device float, dextents<int32_t, 2>> A [[buffer(0)]],
              tensor<device float, dextents<int32_t, 2>> B [[buffer(1)]],
              tensor<device half, dextents<int32_t, 2>> C [[buffer(2)]]) {
  constexpr auto desc = matmul2d_descriptor(64, 32);
  matmul2d<desc, execution_simdgroups<4>> op;
  op.run(A, B, C);
}
