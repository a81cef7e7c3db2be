// Accesses at an index read from a buffer: thread i reads or writes x[at[i]], so a test
// can place one access anywhere, near or far, before or after the buffer.
#include <metal_stdlib>
using namespace metal;

[[kernel]] void read_at(const device float* x [[buffer(0)]], const device uint* at [[buffer(1)]],
                        device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = x[at[i]];  // @read-at
}

[[kernel]] void write_at(device float* x [[buffer(0)]], const device uint* at [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  x[at[i]] = 1.0f;  // @write-at
}

// Signed indices: negative ones reach before the buffer.
[[kernel]] void read_signed(const device float* x [[buffer(0)]], const device int* at [[buffer(1)]],
                            device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = x[at[i]];  // @read-signed
}

[[kernel]] void write_signed(device float* x [[buffer(0)]], const device int* at [[buffer(1)]],
                             uint i [[thread_position_in_grid]]) {
  x[at[i]] = 1.0f;  // @write-signed
}

// 16-byte elements: a uint index reaches 64 GiB past the start.
[[kernel]] void read_at4(const device float4* x [[buffer(0)]], const device uint* at [[buffer(1)]],
                         device float4* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = x[at[i]];  // @read-at4
}

// A wild 64-bit index: thread i reads or writes x[at[i]], anywhere in the address space
// (past the canonical addresses, or onto a page that is not mapped).
[[kernel]] void write_wild(device float* x [[buffer(0)]], const device long* at [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  x[at[i]] = 1.0f;  // @write-wild
}

[[kernel]] void read_wild(const device float* x [[buffer(0)]], const device long* at [[buffer(1)]],
                          device float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  out[i] = x[at[i]];  // @read-wild
}
