// Invalid Metal 4: a matmul2d whose descriptor depends on a kernel argument (the descriptor is
// a template argument: a constant expression). Cites: Apple's MPPTensorOpsMatMul2d.h
// (template <matmul2d_descriptor Descriptor, typename Scope, class... Args> class matmul2d).
// expect: 11: not a constant expression
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(constant int& m [[buffer(0)]], device float* y [[buffer(1)]]) {
  matmul2d<matmul2d_descriptor(m, 32, 16), execution_simdgroup> op;
  (void)op;
  y[0] = 0;
}
