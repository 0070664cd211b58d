#!/bin/sh
# The library suites that do not depend on a driver version (the pool and
# builder suites' simulator halves) and the tool's selftest, on the
# simulated driver reporting each supported CUDA version: one build serves
# them all.  (test-driver-range checks what differs by version; the
# conformance program checks the measured CUDA 13.0 facts.)  TAP.
versions="12030 12040 12080 13000"
n=0
echo "1..$(( $(echo $versions | wc -w) * 3 ))"
for v in $versions; do
    for check in "test/test-pool --filter pool_sim/*" "test/test-builder --filter builder_sim/*" \
                 "tools/cucapture selftest"; do
        n=$((n + 1))
        set -- $check
        prog=$1; shift
        if [ "$prog" = tools/cucapture ]; then
            # on the simulated driver on purpose, GPU host or not
            out=$(CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" CUCAPTURE_REQUIRE_GPU= CUDASIM_DRIVER_VERSION=$v CRITERION_OUTPUTS= ./$prog "$@" 2>&1)
        else
            out=$(CUDASIM_DRIVER_VERSION=$v CRITERION_OUTPUTS= ./$prog "$@" 2>&1)
        fi
        rc=$?
        if [ $rc -eq 0 ]; then
            echo "ok $n - $prog $* at CUDA $((v / 1000)).$((v % 1000 / 10))"
        else
            echo "not ok $n - $prog $* at CUDA $((v / 1000)).$((v % 1000 / 10)) (exit $rc)"
            printf '%s\n' "$out" | grep -E 'FAIL|fail|Assertion' | head -5 | sed 's/^/# /'
        fi
    done
done
