// Valid MSL that real kernels use; none of it may be rejected.
#include <metal_stdlib>
#include <metal_simdgroup>
using namespace metal;

template <typename T, int N>
struct Acc {
  T v[N];
  T sum() const thread {
    T s = T(0);
#pragma clang loop unroll(full)
    for (int k = 0; k < N; ++k) s += v[k];
    return s;
  }
  T sum() const threadgroup { return v[0]; }
};

template <typename T>
METAL_FUNC T load(const device T* p, uint i) { return p[i]; }
template <typename T>
METAL_FUNC T load(const constant T* p, uint i) { return p[i]; }
template <typename T>
METAL_FUNC T load(const threadgroup T* p, uint i) { return p[i]; }

constant constexpr int kWidth = 4;
static constant constexpr float kScale = 0.5f;

struct Params { uint n; float eps; };

template <typename T, int BITS>
[[kernel]] void many(
    const device T* x [[buffer(0)]],
    device T* y [[buffer(1)]],
    const constant Params& params [[buffer(2)]],
    const constant int* shape [[buffer(3)]],
    device atomic<uint>* counter [[buffer(4)]],
    uint3 gid [[thread_position_in_grid]],
    uint2 tg [[threadgroup_position_in_grid]],
    ushort3 lid [[thread_position_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]],
    uint3 tpg [[threads_per_threadgroup]]) {
  threadgroup float tile[32];
  threadgroup Acc<float, 2> shared_acc;
  const uint i = gid.x;
  float4 v = float4(1.0f, 2.0f, 3.0f, 4.0f);
  float4 w = float4(v.xy, v.z, 1.0f);
  v.xy = w.zw;
  half h = 1.5h;
  half2 hv = half2(h, 2.0h);
  uint bits = as_type<uint>(float(x[i]));
  float back = as_type<float>(bits);
  float e = metal::precise::exp(back) + metal::fast::exp(back) + metal::exp(back);
  e += metal::max(e, 0.0f) + metal::min(e, 1.0f) + metal::clamp(e, 0.0f, 1.0f) + metal::abs(e);
  e += metal::fma(e, 2.0f, 1.0f) + metal::rsqrt(2.0f) + metal::precise::rsqrt(3.0f) + float(hv.x);
  float s = simd_sum(e);
  s += simd_max(e) + simd_shuffle_down(e, 1) + simd_broadcast(e, 0) + simd_prefix_exclusive_sum(e);
  tile[lane] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_barrier(mem_flags::mem_none);
  s += load(tile, lane) + float(load(x, i)) + float(load(shape, 0));
  Acc<float, kWidth> acc;
  acc.v[0] = s;
  s += acc.sum() + shared_acc.sum();
  uint old = atomic_fetch_add_explicit(counter, 1u, memory_order_relaxed);
  int q = static_cast<int>(s) + int(old) + (int)params.n + BITS;
  y[i] = static_cast<T>(float(q) * kScale + float(tg.x + lid.x + sg + tpg.x) + params.eps + float(bits & 0xF));
  y[i] += T(metal::numeric_limits<T>::max() > T(0) ? 1.0f : 0.0f);
  bool4 m = bool4(true, false, true, false);
  if (any(v > w) || all(m)) { y[i] = T(0); }
  y[i] = select(y[i], T(1), v.x > 0.0f);
}

template [[host_name("many_f32_4")]] [[kernel]] decltype(many<float, 4>) many<float, 4>;
template [[host_name("many_bf16_3")]] [[kernel]] decltype(many<bfloat16_t, 3>) many<bfloat16_t, 3>;
template [[host_name("many_f16_3")]] [[kernel]] decltype(many<half, 3>) many<half, 3>;

[[kernel]] void plain(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(metal::numeric_limits<float>::infinity() > 0.0f) + 1.0;
}

// A helper after an explicit instantiation is not a kernel: its pointer parameters and
// unattributed scalars are fine.
template [[host_name("plain_again")]] [[kernel]] decltype(many<float, 2>) many<float, 2>;
inline float helper_after(thread float* p, float x) { return p[0] + x; }

// Found by the emulator's own tests: a one-argument vector constructor converts the element
// type (float2 -> half2, different sizes), and atomic_uint after `using namespace metal`.
[[kernel]] void conversions_and_atomics(device const float* x [[buffer(0)]], device atomic_uint* count [[buffer(1)]],
                                        device atomic<float>* acc [[buffer(2)]], device float* y [[buffer(3)]],
                                        uint i [[thread_position_in_grid]]) {
  const float2 v = float2(x[i], x[i + 1]);
  const half2 h = half2(v);
  const int4 n = int4(float4(v, v));
  const float4 s = metal::float4(h.x);
  y[i] = float(h.y) + float(n.w) + s.z + float2(1.0f).x;
  atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
  atomic_fetch_max_explicit(count + 1, i, memory_order_relaxed);
  atomic_fetch_add_explicit(acc, v.x, memory_order_relaxed);
}

// A braced list passed as a vector argument (MLX's unary_g: elem_to_loc<IdxT>({x, y, z}, ...)).
template <typename IdxT> IdxT loc_of(uint3 e, constant const int* shape) { return IdxT(e.x) + IdxT(e.y * uint(shape[0])); }
[[kernel]] void braced_vector_argument(constant const int* shape [[buffer(0)]], device int* y [[buffer(1)]],
                                       uint3 index [[thread_position_in_grid]]) {
  y[index.x] = loc_of<int>({2 * index.x, index.y, index.z}, shape);
}

// Braces the user writes may give fewer components than the vector has: Metal value-initialises
// the rest (MLX's steel_attention_nax.h: `vec<float, 2> s{0}`).
[[kernel]] void braced_vectors(device float4* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  vec<float, 2> s{0};
  float4 t = {y[i].x, 1.0f};
  y[i] = t + float4(s, s);
}
