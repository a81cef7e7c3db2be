// An expert-style Q4 gate/up kernel written for the emulator's tests and benchmark (same
// shape of work as a routed SwiGLU gate/up projection: one SIMD-group per output row, lanes
// striding over packed 4-bit words, two simd_sum reductions, lane 0 writes silu(g) * u).
// MLX layout: template args, then the kernel, then the host_name instantiation.
#include <metal_stdlib>
using namespace metal;

template <typename T, int H, int I, int ROWS, int GATE_OFF, int UP_OFF, int GS_OFF, int US_OFF>
[[kernel]] void q4_gate_up(
    const device T* act [[buffer(0)]],
    const device uint8_t* weights [[buffer(1)]],
    device T* hidden [[buffer(2)]],
    uint3 gpos [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd [[simdgroup_index_in_threadgroup]]) {
  const uint r = gpos.y * (uint)ROWS + simd;
  if (r >= (uint)I) return;
  const device uint32_t* g_words = (const device uint32_t*)(weights + GATE_OFF) + (ulong)r * (ulong)(H / 8);
  const device uint32_t* u_words = (const device uint32_t*)(weights + UP_OFF) + (ulong)r * (ulong)(H / 8);
  const float g_scale = ((const device float*)(weights + GS_OFF))[r];
  const float u_scale = ((const device float*)(weights + US_OFF))[r];
  float g_acc = 0.0f;
  float u_acc = 0.0f;
  for (uint w = lane; w < (uint)(H / 8); w += 32u) {
    const uint32_t gw = g_words[w];
    const uint32_t uw = u_words[w];
    for (uint k = 0; k < 8u; ++k) {
      const float a = float(act[w * 8u + k]);
      g_acc = metal::fma(float((gw >> (4u * k)) & 0xFu) - 8.0f, a, g_acc);
      u_acc = metal::fma(float((uw >> (4u * k)) & 0xFu) - 8.0f, a, u_acc);
    }
  }
  const float g = metal::simd_sum(g_acc) * g_scale;
  const float u = metal::simd_sum(u_acc) * u_scale;
  if (lane == 0u) {
    const T gt = T(g);
    const T ut = T(u);
    const T sig = T(1.0f / (1.0f + metal::precise::exp(-float(gt))));
    const T silu = T(float(gt) * float(sig));
    hidden[r] = T(float(silu) * float(ut));
  }
}
template [[host_name("q4_gate_up_bf16")]] [[kernel]] decltype(q4_gate_up<bfloat16_t, 2048, 768, 4, 0, 786432, 1572864, 1575936>) q4_gate_up<bfloat16_t, 2048, 768, 4, 0, 786432, 1572864, 1575936>;
template [[host_name("q4_gate_up_f32_small")]] [[kernel]] decltype(q4_gate_up<float, 256, 8, 4, 0, 1024, 2048, 2080>) q4_gate_up<float, 256, 8, 4, 0, 1024, 2048, 2080>;
