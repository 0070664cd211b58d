#!/bin/sh
# examples/forkjoin on the simulated driver, as TAP.
echo "1..1"
if out=$(CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" ./examples/forkjoin 2>&1); then
    echo "ok 1 - examples/forkjoin: $out"
else
    echo "not ok 1 - examples/forkjoin failed: $out"
fi
