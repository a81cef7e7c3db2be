// kernelgen's own instantiations of MLX's quantized kernels: the kernels themselves
// come from MLX's headers, unmodified, found on the include path (the mlx-metal wheel,
// fetched by crates/emu/tests/mlx-metal/fetch.sh). Host names follow MLX's
// quantized.metal: <kernel>_<type>_gs_<group size>_b_<bits>_batch_<batched>.
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/steel/gemm/gemm.h"
#include "mlx/backend/metal/kernels/quantized_utils.h"
#include "mlx/backend/metal/kernels/quantized.h"

#define kg_qmv(name, type, gs, bits, batched) \
  instantiate_kernel(#name "_" #type "_gs_" #gs "_b_" #bits "_batch_" #batched, name, type, gs, bits, batched)

kg_qmv(affine_qmv_fast, bfloat16_t, 64, 4, 0)
kg_qmv(affine_qmv_fast, bfloat16_t, 64, 3, 0)
kg_qmv(affine_qmv_fast, bfloat16_t, 64, 4, 1)
kg_qmv(affine_qmv_fast, bfloat16_t, 64, 3, 1)
