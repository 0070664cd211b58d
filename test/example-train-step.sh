#!/bin/sh
# The training step (CUDA C++, built when configure accepted nvcc), as TAP:
# examples/train-step trains a small MLP with AdamW for 30 steps eagerly
# and again captured whole and replayed, its batch and scalars in the
# parameter block, and compares losses and weights bit for bit: with
# values of 1 KiB (straight from the caller's memory) and of 260 KiB
# (through the library's pinned buffers).  Without a GPU it says SKIP, and
# fails then under CUCAPTURE_REQUIRE_GPU=1.
echo "1..2"
n=0
for args in "8 32 2 30" "256 256 3 30"; do
    n=$((n + 1))
    if [ ! -x ./examples/train-step ]; then
        if [ "${CUCAPTURE_REQUIRE_GPU:-}" = 1 ]; then
            echo "not ok $n - examples/train-step was not built (see configure's summary: nvcc)"
        else
            echo "ok $n - examples/train-step # SKIP not built: configure accepted no nvcc, or the build uses sanitizers"
        fi
        continue
    fi
    out=$(env -u CUCAPTURE_DRIVER ./examples/train-step $args 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "ok $n - train-step $args on the GPU: $(printf '%s' "$out" | tail -n 1)"
    elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then echo "ok $n - train-step $args # SKIP $out"
    else echo "not ok $n - train-step $args: exit $rc: $(printf '%s' "$out" | tail -n 5 | tr '\n' ' ')"; fi
done
