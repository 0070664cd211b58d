#!/bin/sh
# The C++ examples, as TAP: examples/forkjoin-cpp on the simulated driver
# and on the GPU; examples/saxpy (CUDA C++, <<<>>> kernels on builder
# streams, built when configure found nvcc) on the GPU.  The GPU runs skip
# without a GPU, and fail then under CUCAPTURE_REQUIRE_GPU=1.
echo "1..3"
if [ ! -x ./examples/forkjoin-cpp ]; then
    echo "ok 1 - examples/forkjoin-cpp on the simulated driver # SKIP no C++ compiler at configure time"
    echo "ok 2 - examples/forkjoin-cpp on the GPU # SKIP no C++ compiler at configure time"
else
    if out=$(CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" ./examples/forkjoin-cpp 2>&1); then
        echo "ok 1 - examples/forkjoin-cpp on the simulated driver: $out"
    else
        echo "not ok 1 - examples/forkjoin-cpp on the simulated driver: $out"
    fi
    out=$(env -u CUCAPTURE_DRIVER ./examples/forkjoin-cpp 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "ok 2 - examples/forkjoin-cpp on the GPU: $out"
    elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then echo "ok 2 - examples/forkjoin-cpp on the GPU # SKIP $out"
    else echo "not ok 2 - examples/forkjoin-cpp on the GPU: exit $rc: $out"; fi
fi
if [ ! -x ./examples/saxpy ]; then
    if [ "${CUCAPTURE_REQUIRE_GPU:-}" = 1 ]; then
        echo "not ok 3 - examples/saxpy was not built (no nvcc at configure time, or a sanitizer build)"
    else
        echo "ok 3 - examples/saxpy (CUDA C++) # SKIP not built: configure found no nvcc, or the build uses sanitizers"
    fi
    exit 0
fi
out=$(env -u CUCAPTURE_DRIVER ./examples/saxpy 2>&1); rc=$?
if [ $rc -eq 0 ]; then echo "ok 3 - examples/saxpy on the GPU: $out"
elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then echo "ok 3 - examples/saxpy on the GPU # SKIP $out"
else echo "not ok 3 - examples/saxpy on the GPU: exit $rc: $out"; fi
