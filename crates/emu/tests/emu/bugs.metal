// Planted bugs: each kernel has one mistake the emulator must catch and report.
#include <metal_stdlib>
using namespace metal;

// Reads one element past the end of x when the grid is larger than x.
[[kernel]] void read_past_end(const device float* x [[buffer(0)]], device float* y [[buffer(1)]],
                              uint i [[thread_position_in_grid]]) {
  y[i] = x[i] * 2.0f;  // @past-end
}

// A two-level reduction whose second level misses its barrier.
[[kernel]] void missing_barrier(const device float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                uint gid [[thread_position_in_grid]],
                                uint sg [[simdgroup_index_in_threadgroup]],
                                uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float partial[8];
  const float s = simd_sum(x[gid]);
  if (lane == 0) partial[sg] = s;
  // BUG: threadgroup_barrier(mem_flags::mem_threadgroup) missing here
  if (sg == 0) {
    const float t = simd_sum(lane < 8u ? partial[lane] : 0.0f);
    if (lane == 0) out[gid / 256u] = t;
  }
}

// Reads threadgroup memory that no thread wrote.
[[kernel]] void uninit_tg(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float cache[128];
  if (tid < 64u) cache[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = cache[tid];
}

// Gate rows overrun into the next region of a packed slot: row r reads words of row r + 1.
[[kernel]] void slot_overrun(const device uint8_t* slot [[buffer(0)]], device uint* out [[buffer(1)]],
                             uint row [[thread_position_in_grid]]) {
  const device uint32_t* gate = (const device uint32_t*)slot;
  uint acc = 0;
  for (uint k = 0; k <= 1024u; ++k) {  // BUG: <= reads one word too many
    acc += gate[row * 1024u + k];  // @overrun
  }
  out[row] = acc;
}

// Writes past the end of a threadgroup array (threads 32.. write a[32..]).
[[kernel]] void tg_overflow(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float a[32];  // @tg-decl
  a[tid] = float(tid);  // @tg-write
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = a[tid % 32u];
}

// Threads wait at different barriers.
[[kernel]] void barrier_mismatch(device float* out [[buffer(0)]], uint tid [[thread_index_in_threadgroup]]) {
  if (tid < 40u) {
    threadgroup_barrier(mem_flags::mem_threadgroup);  // @barrier-a
  } else {
    threadgroup_barrier(mem_flags::mem_threadgroup);  // @barrier-b
  }
  out[tid] = 1.0f;
}

// Lanes of one SIMD-group reach different collectives.
[[kernel]] void divergent_collective(const device float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                     uint lane [[thread_index_in_simdgroup]], uint i [[thread_position_in_grid]]) {
  float r;
  if (lane < 16u) {
    r = simd_sum(x[i]);  // @div-a
  } else {
    r = simd_max(x[i]);  // @div-b
  }
  out[i] = r;
}

// Integer division by a zero divisor.
[[kernel]] void div_zero(const device int* d [[buffer(0)]], device int* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  out[i] = 1000 / d[i];  // @div-zero
}

// Too much thread-private memory for a GPU thread's stack.
[[kernel]] void stack_hog(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  thread float big[200000];
  for (uint k = 0; k < 200000u; k += 1024u) big[k] = float(k + i);
  out[i] = big[(i * 4096u) % 200000u];
}

// More threadgroup memory than an Apple GPU has (32 KiB).
[[kernel]] void tg_too_big(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup float huge[9000];  // @tg-huge
  huge[i] = 1.0f;
  out[i] = huge[i];
}

// Writes every float of a packed buffer, including its gap.
[[kernel]] void write_gap(device float* slot [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  slot[i] = 1.0f;
}
