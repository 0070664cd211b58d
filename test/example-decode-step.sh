#!/bin/sh
# The decode step (CUDA C++ and cuBLAS, built when configure accepted nvcc
# and found cuBLAS), as TAP: examples/decode-step replays a transformer's
# decode step with per-launch positions and checks it against eager
# launches bit for bit; bench/decode-step, a short run of every mode, checks
# the same.  Without a GPU they say SKIP, and fail then under
# CUCAPTURE_REQUIRE_GPU=1.
echo "1..2"
n=0
for prog in "examples/decode-step 512 4 24" "bench/decode-step 4 1 256x4"; do
    n=$((n + 1))
    exe=${prog%% *}
    if [ ! -x "./$exe" ]; then
        if [ "${CUCAPTURE_REQUIRE_GPU:-}" = 1 ]; then
            echo "not ok $n - $exe was not built (see configure's summary: nvcc, cuBLAS)"
        else
            echo "ok $n - $exe # SKIP not built: configure accepted no nvcc or found no cuBLAS, or the build uses sanitizers"
        fi
        continue
    fi
    out=$(env -u CUCAPTURE_DRIVER ./$prog 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "ok $n - $prog on the GPU: $(printf '%s' "$out" | tail -n 1)"
    elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then echo "ok $n - $prog # SKIP $out"
    else echo "not ok $n - $prog: exit $rc: $(printf '%s' "$out" | tail -n 5 | tr '\n' ' ')"; fi
done
