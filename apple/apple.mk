# The `check-apple` lane: type-checks the runtime crate (and the CLI) for Apple
# silicon, aarch64-apple-darwin, and for aarch64-unknown-linux-gnu, on this
# Linux x86-64 machine, which has neither those targets' std nor a macOS SDK.
# `cargo check` needs neither a linker nor an SDK; std comes from source
# (-Zbuild-std) with Debian's rustc-web toolchain, and mlx-sys (feature `mlx`)
# is patched into a check-only mode that only runs bindgen.
#
#   make check-apple                 (from the top Makefile, which includes this)
#   make -f apple/apple.mk check-apple
#   make check-apple APPLE_PACKAGES="kernelgen other-crate"
#
# apple/setup.sh installs what is missing and prepares target/apple/; the
# configuration reaches cargo only through apple/check.sh (--config
# apple/cargo-config.toml), so a plain `cargo build` never needs any of it.
# Everything is built in target/apple: the normal target/debug is untouched,
# and std is built once per target there. See apple/README.md.

APPLE_LANE_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

# Packages checked with their default features, with `--features mlx`, and for
# aarch64 Linux (one cargo call per step, so their features unify).
APPLE_PACKAGES ?= kernelgen
# Packages checked for Apple silicon with their default features only: the
# generator users run on their Macs (the CLI, the proc-macros' logic).
APPLE_CLI_PACKAGES ?= kernelgen-cli kernelgen-macros-core
# Crates of a user's, outside the workspace, depending on kernelgen by path:
# checked for Apple silicon with the MLX backend (each has a feature `mlx`).
APPLE_DOWNSTREAM ?= examples/downstream examples/softcap_argmax
# The feature set of the second step (the MLX backend and the proc-macros).
APPLE_MLX_FEATURES ?= mlx,macros
APPLE_DARWIN_TARGET ?= aarch64-apple-darwin
APPLE_LINUX_TARGET ?= aarch64-unknown-linux-gnu
# Extra cargo arguments for every step (e.g. -j1, --all-targets, -q).
APPLE_CARGO_ARGS ?=

APPLE_CHECK = cd $(APPLE_LANE_ROOT) && bash apple/check.sh $(APPLE_CARGO_ARGS)
apple_packages = $(addprefix -p ,$(1))

.PHONY: check-apple apple-setup check-apple-targets check-apple-darwin check-apple-mlx \
    check-apple-linux check-apple-cli check-apple-downstream check-apple-canary

## Type-check APPLE_PACKAGES for aarch64-apple-darwin and aarch64-unknown-linux-gnu
## (default features), then for aarch64-apple-darwin with --features mlx, then
## APPLE_CLI_PACKAGES for aarch64-apple-darwin, then the downstream crate with `mlx`.
check-apple: check-apple-targets check-apple-mlx check-apple-cli check-apple-downstream check-apple-canary

# Both targets in one cargo call: cargo then builds their two std's side by
# side (each one is mostly a single long `core`), which on a cold run takes
# about half the time of two calls. Diagnostics do not name their target; to
# see one target alone, make check-apple-darwin or check-apple-linux.
check-apple-targets: apple-setup
	$(APPLE_CHECK) --target $(APPLE_DARWIN_TARGET) --target $(APPLE_LINUX_TARGET) \
	    $(call apple_packages,$(APPLE_PACKAGES))

apple-setup:
	bash $(APPLE_LANE_ROOT)/apple/setup.sh

check-apple-darwin: apple-setup
	$(APPLE_CHECK) --target $(APPLE_DARWIN_TARGET) $(call apple_packages,$(APPLE_PACKAGES))

check-apple-mlx: apple-setup
	$(APPLE_CHECK) --target $(APPLE_DARWIN_TARGET) $(call apple_packages,$(APPLE_PACKAGES)) \
	    --features $(APPLE_MLX_FEATURES)

check-apple-linux: apple-setup
	$(APPLE_CHECK) --target $(APPLE_LINUX_TARGET) $(call apple_packages,$(APPLE_PACKAGES))

# The CLI with the feature `mlx` too: `kernelgen verify --backend mlx` runs on a Mac's own GPU.
check-apple-cli: apple-setup
	$(APPLE_CHECK) --target $(APPLE_DARWIN_TARGET) $(call apple_packages,$(APPLE_CLI_PACKAGES))
	$(APPLE_CHECK) --target $(APPLE_DARWIN_TARGET) -p kernelgen-cli --features kernelgen-cli/mlx

check-apple-downstream: apple-setup
	cd $(APPLE_LANE_ROOT) && status=0; for crate in $(APPLE_DOWNSTREAM); do \
	    bash apple/check.sh $(APPLE_CARGO_ARGS) --manifest-path $$crate/Cargo.toml \
	        --target $(APPLE_DARWIN_TARGET) --features mlx || status=$$?; \
	done; exit $$status

# The lane must fail on x86-64-only code: apple/canary type-checks only on x86-64.
check-apple-canary: apple-setup
	cd $(APPLE_LANE_ROOT) && if bash apple/check.sh $(APPLE_CARGO_ARGS) --manifest-path apple/canary/Cargo.toml \
	    --target $(APPLE_DARWIN_TARGET) 2>target/apple/canary.log; then \
	    echo "check-apple-canary: apple/canary type-checked for $(APPLE_DARWIN_TARGET): the lane checks nothing"; exit 1; \
	else grep -q "is_x86_feature_detected" target/apple/canary.log && \
	    echo "check-apple-canary: x86-64-only code rejected for $(APPLE_DARWIN_TARGET), as it must be"; fi
