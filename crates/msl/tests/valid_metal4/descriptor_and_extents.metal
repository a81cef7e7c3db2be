// Valid Metal 4 (checked at __METAL_VERSION__ 400): a matmul2d's descriptor carries every field
// of the matmul2d_descriptor it was made from (the constructor's defaults too), and extents
// count their static and dynamic dimensions as std::extents does. Dimensions are ints: a static
// k of a vocabulary's size is one too.
#include <metal_stdlib>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;

static_assert(extents<int, 4, dynamic_extent>::static_extent(0) == 4, "a static extent");
static_assert(extents<int, 4, dynamic_extent>::rank_dynamic() == 1, "one dynamic extent");
static_assert(dextents<int, 3>::rank() == 3 && dextents<int, 3>::rank_dynamic() == 3, "all dynamic");
using op_t = matmul2d<matmul2d_descriptor(64, 32, 16, true, false, true, matmul2d_descriptor::mode::multiply_accumulate),
                      execution_simdgroups<2>>;
static_assert(op_t::descriptor.m == 64 && op_t::descriptor.n == 32 && op_t::descriptor.k == 16, "dimensions");
static_assert(op_t::descriptor.transpose_left && !op_t::descriptor.transpose_right && op_t::descriptor.relaxed_precision,
              "flags");
static_assert(op_t::descriptor.matmul_mode == matmul2d_descriptor::mode::multiply_accumulate, "mode");
static_assert(matmul2d<matmul2d_descriptor(8, 8), execution_thread>::descriptor.k == -1, "k defaults to dynamic");
static_assert(matmul2d<matmul2d_descriptor(8, 8), execution_thread>::descriptor.matmul_mode == matmul2d_descriptor::mode::multiply,
              "the default mode multiplies");
using wide_t = matmul2d<matmul2d_descriptor(16, 2147483647, 151936), execution_simdgroup>;
static_assert(wide_t::descriptor.m == 16 && wide_t::descriptor.n == 2147483647 && wide_t::descriptor.k == 151936,
              "large static dimensions");
static_assert(!wide_t::descriptor.transpose_left && wide_t::descriptor.matmul_mode == matmul2d_descriptor::mode::multiply,
              "large dimensions leave the flags alone");

[[kernel]] void k(device float* y [[buffer(0)]]) {
  op_t op;
  (void)op;
  y[0] = 0;
}
