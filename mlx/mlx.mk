# The `mlx` lane: builds the runtime crate with the cargo feature
# `mlx` (mlx-rs 0.33) against the CPU build of MLX from the PyPI wheel
# mlx-cpu, and runs the tests that need it (tests/mlx_*.rs).
#
#   make test-mlx                 (from the top Makefile, which includes this)
#   make -f mlx/mlx.mk test-mlx   (alone)
#
# mlx/setup.sh installs what is missing (Debian's cmake, clang, libclang-dev;
# the wheel) and patches a copy of mlx-sys under target/mlx/; the patch reaches
# cargo only through the opt-in mlx/cargo-config.toml, so a plain `cargo build`
# never needs any of it. See mlx/README.md.

MLX_LANE_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

MLX_CARGO ?= $(or $(CARGO),cargo)
# Extra cargo arguments (e.g. --release, -j1) and arguments for the test binaries.
MLX_CARGO_ARGS ?=
MLX_TEST_ARGS ?=
# The lane's tests: the library's own with the feature (the MLX backend's unit tests), every
# tests/mlx_*.rs, and make bench-gpu's harness (gpu/bench.rs), which only builds here (it
# needs a GPU to run).
MLX_TESTS ?= --lib $(patsubst %.rs,--test %,$(notdir $(wildcard $(MLX_LANE_ROOT)/tests/mlx_*.rs))) --example bench_gpu

.PHONY: test-mlx mlx-setup

mlx-setup:
	bash $(MLX_LANE_ROOT)/mlx/setup.sh

# With the patch in effect cargo records the path copy of mlx-sys in
# Cargo.lock; a cargo call without it (offline, no download; this platform's
# crates only, as a fresh machine has no others) puts the registry's entry
# back, whether the tests passed or not.
test-mlx: mlx-setup
	cd $(MLX_LANE_ROOT) && status=0; \
	$(MLX_CARGO) test --features mlx --config mlx/cargo-config.toml $(MLX_CARGO_ARGS) \
	    $(MLX_TESTS) -- $(MLX_TEST_ARGS) || status=$$?; \
	$(MLX_CARGO) metadata --offline --format-version 1 \
	    --filter-platform "$$(rustc -vV | sed -n 's/^host: //p')" >/dev/null; \
	exit $$status
