#!/bin/sh
# bench/update-loop (CUDA C++, built when configure found nvcc), as TAP: a
# short run on the GPU that checks the three loops' results (library,
# library with one builder reset, hand-written) and prints both ratios.  The times are
# printed, never asserted.  Without a GPU it says SKIP, and fails then
# under CUCAPTURE_REQUIRE_GPU=1.
echo "1..1"
if [ ! -x ./bench/update-loop ]; then
    if [ "${CUCAPTURE_REQUIRE_GPU:-}" = 1 ]; then
        echo "not ok 1 - bench/update-loop was not built (no nvcc at configure time, or a sanitizer build)"
    else
        echo "ok 1 - bench/update-loop # SKIP not built: configure found no nvcc, or the build uses sanitizers"
    fi
    exit 0
fi
out=$(env -u CUCAPTURE_DRIVER ./bench/update-loop 50 1 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q 'hand-written [0-9.]* us per iteration, ratio' && printf '%s\n' "$out" | grep -q 'one builder reset [0-9.]* us, ratio [0-9.]*$'; then
    echo "ok 1 - bench/update-loop 50 1 on the GPU: $(printf '%s' "$out" | tr '\n' ' ')"
elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then echo "ok 1 - bench/update-loop # SKIP $out"
else echo "not ok 1 - bench/update-loop: exit $rc: $out"; fi
