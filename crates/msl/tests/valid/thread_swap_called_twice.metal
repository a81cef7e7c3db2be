// thread_swap(thread T&) on elements of a thread array reference, from two instantiations of a sorter
// (candle mlx_sort.metal:150, mistral.rs sort_impl.metal:45): clang deduces T = __generic float and,
// once that instantiation failed, refuses the next one's call as a substitution failure; Metal's T is float.
#include <metal_stdlib>
using namespace metal;
template <typename T>
METAL_FUNC void thread_swap(thread T& a, thread T& b) { T w = a; a = b; b = w; }
template <typename T, short N>
struct Sorter {
  static METAL_FUNC void sort(thread T (&vals)[N], thread uint (&idxs)[N]) {
    if (vals[1] < vals[0]) {
      thread_swap(vals[1], vals[0]);
      thread_swap(idxs[1], idxs[0]);
    }
    if (vals[2] < vals[1]) {
      thread_swap(vals[2], vals[1]);
      thread_swap(idxs[2], idxs[1]);
    }
  }
};
kernel void k(device float* out [[buffer(0)]], device uint* idx [[buffer(1)]], uint i [[thread_position_in_grid]]) {
    float vals[3] = {out[3 * i], out[3 * i + 1], out[3 * i + 2]};
    uint idxs[3] = {0, 1, 2};
    Sorter<float, 3>::sort(vals, idxs);
    float more[4] = {vals[0], vals[1], vals[2], out[3 * i]};
    uint more_idxs[4] = {idxs[0], idxs[1], idxs[2], 3};
    Sorter<float, 4>::sort(more, more_idxs);
    out[3 * i] = more[0];
    idx[i] = idxs[0];
}
