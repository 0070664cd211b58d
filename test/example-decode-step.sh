#!/bin/sh
# The decode step (CUDA C++ and cuBLAS, built when configure accepted nvcc
# and found cuBLAS), as TAP: examples/decode-step replays a transformer's
# decode step with per-launch positions and checks it against eager
# launches bit for bit; bench/decode-step, a short run of every mode, checks
# the same; examples/batch-decode runs the step over a changing batch
# through a graph set (a budget of 64 MiB, so graphs are retired) and
# checks it the same way.  Without a GPU they say SKIP, and fail then under
# CUCAPTURE_REQUIRE_GPU=1.
echo "1..3"
n=0
for prog in "examples/decode-step 512 4 24" "bench/decode-step 4 1 256x4" "examples/batch-decode 256 2 48 64"; do
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
