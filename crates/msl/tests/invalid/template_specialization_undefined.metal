// Invalid MSL (a function template without a body called for a type no specialization defines): g++ with the emulator's macros accepts it without linking, Metal cannot link it.
// Cites: MSL specification section 1.5 (a Metal library is the source's own code and the Metal standard library: nothing else to link).
// expect: 6: declared but never defined
#include <metal_stdlib>
using namespace metal;
template <typename T> inline T max_value();
template <> inline uint max_value<uint>() { return 0xFFFFFFFFu; }
kernel void k(device uint* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    out[i] = max_value<uint>() + uint(max_value<uchar>());
}
