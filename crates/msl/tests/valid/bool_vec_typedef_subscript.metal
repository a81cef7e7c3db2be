// repro (MLX 0.32.1 steel/attn/mma.h:61 and steel_attention.h:363; candle-metal-kernels 0.11.1 scaled_dot_product_attention.metal:1163): a fragment type `typedef metal::vec<T, N> frag_type;` of a tile instantiated with bool (the attention kernels' mask), subscripted.
#include <metal_stdlib>
using namespace metal;
template <typename T, int N> struct Frag {
  typedef metal::vec<T, N> frag_type;
  static void load(thread frag_type& dst, const device T* src) {
    for (short i = 0; i < N; i++) {
      dst[i] = src[i];
    }
  }
};
kernel void k(const device bool* mask [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  Frag<bool, 2>::frag_type m;
  Frag<bool, 2>::load(m, mask + 2 * i);
  out[i] = m[0] ? out[i] : -INFINITY;
}
