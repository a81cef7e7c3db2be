// repro (candle-metal-kernels 0.11.1 reduce.metal:1114, rms_norm_case): threadgroup locals declared in a macro's body, one `case` of a switch per size, in a kernel a macro defines too (and in one written out).
#include <metal_stdlib>
using namespace metal;
#define sum_case(N)                                             \
case N: {                                                       \
    threadgroup float shared[N];                                \
    threadgroup float total;                                    \
    shared[tid % N] = src[tid];                                 \
    threadgroup_barrier(mem_flags::mem_threadgroup);            \
    if (tid == 0) { total = shared[0] + shared[N - 1]; }        \
    threadgroup_barrier(mem_flags::mem_threadgroup);            \
    dst[tid] = total;                                           \
    break;                                                      \
}
#define impl_sum(NAME)                                          \
kernel void NAME(                                               \
    device const float* src [[buffer(0)]],                      \
    device float* dst [[buffer(1)]],                            \
    uint tid [[thread_index_in_threadgroup]],                   \
    uint block_dim [[threads_per_threadgroup]]) {               \
    switch (block_dim) {                                        \
        sum_case(64);                                           \
        sum_case(32);                                           \
    }                                                           \
}
impl_sum(sum_f32)
kernel void sum_written_out(device const float* src [[buffer(0)]], device float* dst [[buffer(1)]],
                            uint tid [[thread_index_in_threadgroup]], uint block_dim [[threads_per_threadgroup]]) {
    switch (block_dim) {
        sum_case(16);
    }
}
