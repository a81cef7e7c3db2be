// Invalid MSL (const device to plain pointer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification chapter 4 (address spaces: no conversion between them).
// expect: 7: conversion from 'const device float *' to 'const thread float *' changes the address space
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(const device float* x [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  const float* p = x;
  y[i] = p[i];
}
