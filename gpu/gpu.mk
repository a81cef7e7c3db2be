# The GPU lane: kernelgen's kernels on an NVIDIA GPU through MLX's CUDA build, launched by the
# typed launchers (gpu/README.md). Build here, run where the GPU is:
#
#   make gpu-build   # on a Linux machine with cargo and pip: target/gpu/bundle/
#   make test-gpu    # on the GPU machine, from that bundle (builds nothing)
#   make bench-gpu   # there too: kernel times and bandwidth beside MLX's own ops (gpu/bench.sh)

GPU_LANE_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

.PHONY: gpu-build test-gpu bench-gpu

gpu-build:
	bash $(GPU_LANE_ROOT)/gpu/build.sh

test-gpu:
	bash $(GPU_LANE_ROOT)/gpu/run.sh

bench-gpu:
	bash $(GPU_LANE_ROOT)/gpu/bench.sh
