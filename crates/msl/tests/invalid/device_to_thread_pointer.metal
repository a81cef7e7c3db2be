// Invalid MSL (device to thread pointer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification chapter 4 (address spaces: no conversion between them).
// expect: 7: conversion from 'device float *' to 'thread float *' changes the address space
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  thread float* p = y;
  p[i] = 1.0f;
}
