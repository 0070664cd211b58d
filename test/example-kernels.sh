#!/bin/sh
# examples/kernels, as TAP: on the simulated driver it must say it needs a
# GPU (exit 77); on the real driver it must run and check its results
# (skipped without a GPU, failed then under CUCAPTURE_REQUIRE_GPU=1).
echo "1..2"
out=$(CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" ./examples/kernels 2>&1); rc=$?
if [ $rc -eq 77 ] && printf '%s' "$out" | grep -q "needs a GPU"; then
    echo "ok 1 - examples/kernels on the simulated driver says it needs a GPU: $out"
else
    echo "not ok 1 - examples/kernels on the simulated driver: exit $rc: $out"
fi
out=$(env -u CUCAPTURE_DRIVER ./examples/kernels 2>&1); rc=$?
if [ $rc -eq 0 ]; then
    echo "ok 2 - examples/kernels on the GPU: $out"
elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then
    echo "ok 2 - examples/kernels on the GPU # SKIP $out"
else
    echo "not ok 2 - examples/kernels on the GPU: exit $rc: $out"
fi
