// Threadgroup memory: its bounds (guards and canaries) and the threadgroup-memory check (races,
// reads of what no thread wrote). Markers `@name` are found by the tests.
#include <metal_stdlib>
using namespace metal;

// Thread 63 reads one element past the end of `a`.
[[kernel]] void read_past_end(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float a[64];  // @a-decl
  a[i] = float(i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = a[i + 1u];  // @read-past-end
}

// Thread 0 reads one element before the start of `a`.
[[kernel]] void read_before_start(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float a[64];
  a[i] = float(i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = a[int(i) - 1];  // @read-before-start
}

// Thread 64 writes into the slack after `b` (65 floats, 260 bytes: 12 bytes short of 16-byte
// alignment), which no guard covers: the canaries show it at the next barrier.
[[kernel]] void write_into_slack(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float b[65];  // @b-decl
  b[i + 1u] = float(i);  // @slack-write
  threadgroup_barrier(mem_flags::mem_threadgroup);  // @slack-barrier
  out[i] = b[i];
}

// Two SIMD-groups sum four rounds of 64 values; `partial` holds one sum per SIMD-group and is
// reused every round with one barrier per round: a SIMD-group that runs ahead writes the next
// round's sum before the other has read this round's (a write-after-read race). The collectives
// between the read and the write make every thread read before any writes in every run order.
[[kernel]] void reused_each_round(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                  uint i [[thread_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partial[2];  // @partial-decl
  float acc = 0.0f;
  for (uint round = 0; round < 4u; ++round) {
    float v = simd_sum(x[round * 64u + i]);
    if (lane == 0u) {
      partial[sg] = v;  // @partial-write
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = partial[0] + partial[1];  // @partial-read
    acc += simd_max(total);
  }
  out[i] = acc;
}

// The same with the second barrier that makes it correct.
[[kernel]] void reused_each_round_fixed(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                        uint i [[thread_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                                        uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partial[2];
  float acc = 0.0f;
  for (uint round = 0; round < 4u; ++round) {
    float v = simd_sum(x[round * 64u + i]);
    if (lane == 0u) {
      partial[sg] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = partial[0] + partial[1];
    acc += simd_max(total);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[i] = acc;
}

// Neighbours exchange values without a barrier: thread i reads what thread i + 1 writes.
[[kernel]] void no_barrier(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float s[64];  // @s-decl
  s[i] = float(i);  // @s-write
  out[i] = s[(i + 1u) % 64u];  // @s-read
}

// Lanes of one SIMD-group exchange through threadgroup memory, ordered by a simdgroup barrier
// with mem_threadgroup (`FLAGS`), or only as an execution barrier (mem_none): a race.
[[kernel]] void simd_exchange(device float* out [[buffer(0)]], constant uint& ordered [[buffer(1)]],
                              uint i [[thread_index_in_threadgroup]]) {
  threadgroup float s[32];
  s[i] = float(i) * 2.0f;  // @simd-write
  if (ordered != 0u) {
    simdgroup_barrier(mem_flags::mem_threadgroup);
  } else {
    simdgroup_barrier(mem_flags::mem_none);
  }
  out[i] = s[31u - i];  // @simd-read
}

// A threadgroup barrier without mem_threadgroup orders no threadgroup memory.
[[kernel]] void execution_barrier_only(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float s[64];
  s[i] = float(i);
  threadgroup_barrier(mem_flags::mem_device);
  out[i] = s[63u - i];
}

// Every thread counts into one threadgroup atomic: atomics do not race.
[[kernel]] void atomic_count(device uint* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup metal::atomic_uint count;
  if (i == 0u) {
    atomic_store_explicit(&count, 0u, memory_order_relaxed);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&count, 1u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = atomic_load_explicit(&count, memory_order_relaxed);
}

// Thread 63 reads the element no thread writes.
[[kernel]] void reads_unwritten(device float* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float u[65];  // @u-decl
  u[i] = float(i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = u[i + 1u];  // @u-read
}

// Two arrays through a helper taking threadgroup pointers: sums of neighbours, correct.
static void stage(threadgroup float* dst, device const float* src, uint i) {
  dst[i] = src[i];
}
[[kernel]] void through_pointers(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                 uint i [[thread_index_in_threadgroup]]) {
  threadgroup float p[64];
  threadgroup float q[64];
  stage(p, x, i);
  stage(q, x + 64, i);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = p[(i + 1u) % 64u] + q[(i + 63u) % 64u];
}
