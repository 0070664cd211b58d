#!/bin/sh
# The differential run (test/fuzz/README): the fuzzer's corpus and
# FUZZ_DIFF_INPUTS pseudo-random inputs, faults off, on the real driver
# and on the simulator; every return code must agree.  Skips without a GPU
# (fails then under CUCAPTURE_REQUIRE_GPU=1).  Prints TAP.
inputs=${FUZZ_DIFF_INPUTS:-2000}
seed=${FUZZ_DIFF_SEED:-7}
corpus="${srcdir:-.}/test/fuzz/corpus"
echo "TAP version 13"
echo "1..1"
timeout 300 ./test/fuzz/fuzz-diff gpu "$corpus" "$inputs" "$seed" > test/fuzz/diff-gpu.txt 2> test/fuzz/diff-gpu.err
rc=$?
if [ $rc -eq 77 ]; then
    if [ "${CUCAPTURE_REQUIRE_GPU:-}" = 1 ]; then
        echo "not ok 1 - differential run: CUCAPTURE_REQUIRE_GPU=1 but no usable GPU"
        exit 0
    fi
    echo "ok 1 - differential run # SKIP no usable CUDA GPU"
    exit 0
fi
if [ $rc -ne 0 ]; then
    echo "not ok 1 - differential run: the GPU run ended with status $rc after $(wc -l < test/fuzz/diff-gpu.txt) inputs"
    sed 's/^/# /' test/fuzz/diff-gpu.err | tail -5
    exit 0
fi
./test/fuzz/fuzz-diff sim "$corpus" "$inputs" "$seed" > test/fuzz/diff-sim.txt 2> test/fuzz/diff-sim.err || {
    echo "not ok 1 - differential run: the simulator run failed"; exit 0; }
total=$(wc -l < test/fuzz/diff-gpu.txt)
diverged=$(diff test/fuzz/diff-sim.txt test/fuzz/diff-gpu.txt | grep -c '^>')
if [ "$diverged" -eq 0 ]; then
    echo "ok 1 - differential run: $total inputs, the same return codes on the GPU and the simulator, 0 crashes"
else
    echo "not ok 1 - differential run: $diverged of $total inputs diverge (simulator < >GPU):"
    diff test/fuzz/diff-sim.txt test/fuzz/diff-gpu.txt | head -20 | sed 's/^/# /'
fi
