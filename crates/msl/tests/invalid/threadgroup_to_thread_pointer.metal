// Invalid MSL (threadgroup to thread pointer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.4 (threadgroup address space).
// expect: 8: conversion from 'threadgroup float *' to 'thread float *' changes the address space
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  threadgroup float tile[32];
  float* p = tile;
  p[0] = y[i];
  y[i] = tile[0];
}
