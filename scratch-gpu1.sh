#!/usr/bin/env bash
# scratch (not committed): device call 1
set -u
bash gpu/unpack.sh >/dev/null
export ROOT=$PWD BUNDLE=$PWD/target/gpu/bundle PYTHON=python3
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "==== tune expert"
timeout 240 python3 gpu/tune.py run --dir target/gpu/tuneE > $OUT/tuneE.txt 2>&1; echo "tune rc $?"
cat $OUT/tuneE.txt | tail -60
echo "==== test-gpu"
timeout 300 bash gpu/run.sh > $OUT/testgpu.txt 2>&1; echo "test-gpu rc $?"
grep -E "test result|passed|failed|^----" $OUT/testgpu.txt | tail -20
