// repro (MLX 0.32.1 steel/attn/nax.h:43,68 and steel_attention_nax.h:330): a fragment type named through a member alias template of `vec`, instantiated with bool (the mask tile), and passed to a function template that deduces its element through that alias.
#include <metal_stdlib>
using namespace metal;
struct Frag {
  template <typename U>
  using dtype_frag_t = typename metal::vec<U, 8>;
  template <typename T, typename S>
  static void load(thread dtype_frag_t<T>& dst, S src) {
    for (short i = 0; i < 8; i++) {
      dst[i] = static_cast<T>(src[i]);
    }
  }
};
template <typename T> struct Tile { typedef typename Frag::template dtype_frag_t<T> frag_type; };
kernel void k(const device bool* mask [[buffer(0)]], device float* out [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  using mfrag_t = typename Tile<bool>::frag_type;
  mfrag_t m;
  Frag::load(m, mask + 8 * i);
  out[i] = m[0] ? out[i] : -INFINITY;
}
