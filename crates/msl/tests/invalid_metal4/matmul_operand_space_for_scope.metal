// Invalid Metal 4: tensor operands in memory the operation's scope cannot reach (thread memory
// in a four-SIMD-group matmul2d, threadgroup memory in a one-thread one), and a cooperative
// destination of a one-thread matmul2d. Cites: Apple's MPPTensorOpsMatMul2dImpl.h (__run: device
// or threadgroup operands for SIMD-groups, device or thread ones for execution_thread, else
// "Unsupported address space"; "destination cannot be cooperative tensor with cooperative group
// of size 1").
// expect: 19: Unsupported address space
// expect: 22: Unsupported address space
// expect: 24: destination cannot be cooperative tensor with cooperative group of size 1
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

[[kernel]] void k(tensor<device half, dextents<int32_t, 2>> A [[buffer(0)]], tensor<device float, dextents<int32_t, 2>> C [[buffer(1)]], threadgroup half* stage [[threadgroup(0)]]) {
  half local[16 * 16];
  auto tB = tensor<half, dextents<int32_t, 2>, tensor_inline>(local, dextents<int32_t, 2>(16, 16));
  matmul2d<matmul2d_descriptor(16, 16, 16), execution_simdgroups<4>> op;
  op.run(A, tB, C);
  auto tS = tensor<threadgroup half, dextents<int32_t, 2>, tensor_inline>(stage, dextents<int32_t, 2>(16, 16));
  matmul2d<matmul2d_descriptor(16, 16, 16), execution_thread> single;
  single.run(tS, tB, C);
  auto acc = single.get_destination_cooperative_tensor<decltype(tB), decltype(tB), float>();
  single.run(tB, tB, acc);
}
