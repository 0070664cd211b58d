#!/bin/sh
# examples/nccl-allreduce, as TAP: both shapes (one builder per device on
# threads of their own; one capture spanning every device) on the GPUs.
# NCCL cannot run on the simulated driver.  Without NCCL at configure time
# it says SKIP and why; without a GPU it says SKIP, and fails then under
# CUCAPTURE_REQUIRE_GPU=1.
echo "1..2"
n=0
for shape in threads one-graph; do
    n=$((n + 1))
    if [ ! -x ./examples/nccl-allreduce ]; then
        echo "ok $n - examples/nccl-allreduce $shape # SKIP not built: configure found no NCCL (nccl.h and libnccl.so.2)"
        continue
    fi
    out=$(env -u CUCAPTURE_DRIVER ./examples/nccl-allreduce $shape 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "ok $n - examples/nccl-allreduce $shape on the GPU: $out"
    elif [ $rc -eq 77 ] && [ "${CUCAPTURE_REQUIRE_GPU:-}" != 1 ]; then echo "ok $n - examples/nccl-allreduce $shape # SKIP $out"
    else echo "not ok $n - examples/nccl-allreduce $shape: exit $rc: $out"; fi
done
