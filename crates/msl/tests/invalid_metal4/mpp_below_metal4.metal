// metal-version: 310
// Invalid below Metal 4: MetalPerformancePrimitives at Metal 3.1. The header exists, but, as
// Apple's, declares nothing without Metal 4's __HAVE_TENSOR__. Cites: Apple's
// MPPTensorOpsMatMul2d.h (#if defined(__METAL_VERSION__) && defined(__HAVE_TENSOR__)).
// expect: 10: tensors and MetalPerformancePrimitives are Metal 4
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>

[[kernel]] void k(device float* y [[buffer(0)]]) {
  constexpr auto desc = mpp::tensor_ops::matmul2d_descriptor(16, 32, 16);
  y[0] = desc.m;
}
