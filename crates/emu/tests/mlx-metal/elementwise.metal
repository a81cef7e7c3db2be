// kernelgen's own instantiations of MLX's elementwise, softmax and reduction
// kernels (the kernels come from MLX's headers, unmodified, on the include path).
// Host names follow MLX's unary.metal, binary.metal, softmax.metal, arange.metal
// and reduce.metal.
#include <metal_atomic>
#include <metal_simdgroup>
#include "mlx/backend/metal/kernels/defines.h"
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/unary_ops.h"
#include "mlx/backend/metal/kernels/unary.h"
#include "mlx/backend/metal/kernels/binary_ops.h"
#include "mlx/backend/metal/kernels/binary.h"
#include "mlx/backend/metal/kernels/softmax.h"
#include "mlx/backend/metal/kernels/arange.h"
#include "mlx/backend/metal/kernels/atomic.h"
#include "mlx/backend/metal/kernels/reduction/ops.h"
#include "mlx/backend/metal/kernels/reduce.h"

// unary: vn_ = N values per thread (WorkPerThread), v_ = one
instantiate_kernel("vn_Expfloat32float32", unary_v, float, float, Exp)
instantiate_kernel("v_Sigmoidbfloat16bfloat16", unary_v, bfloat16_t, bfloat16_t, Sigmoid, 1)
instantiate_kernel("gn1_Absfloat32float32", unary_g, float, float, Abs, 1, int)
// binary
instantiate_kernel("vvn_Addfloat32", binary_vv, float, float, Add)
instantiate_kernel("vv_Multiplybfloat16", binary_vv, bfloat16_t, bfloat16_t, Multiply, 1)
// softmax (float accumulation for bf16, as MLX's precise variant)
instantiate_kernel("block_softmax_float32", softmax_single_row, float, float)
instantiate_kernel("block_softmax_precise_bfloat16", softmax_single_row, bfloat16_t, float)
instantiate_kernel("looped_softmax_float32", softmax_looped, float, float)
// arange
instantiate_kernel("arangefloat32", arange, float)
// reductions
instantiate_kernel("all_reduce_sumfloat32", all_reduce, float, float, Sum<float>)
instantiate_kernel("all_reduce_maxfloat32", all_reduce, float, float, Max<float>)
