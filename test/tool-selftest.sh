#!/bin/sh
# `cucapture selftest` as TAP: one line per scenario on the simulated
# driver, then the choice of driver as a user meets it (the simulated one
# where libcuda.so.1 cannot be loaded or sees no device, the GPU otherwise)
# and --require-gpu.
exe=./tools/cucapture
out=$(env -u CUCAPTURE_REQUIRE_GPU CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" "$exe" selftest 2>&1); rc=$?
n=$(printf '%s\n' "$out" | grep -c -E '^(PASS|FAIL|SKIP) ')
echo "1..$((n + 5))"
printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | awk '{ kind = $1; $1 = ""
    if (kind == "PASS") print "ok " NR " -" $0
    else if (kind == "SKIP") print "ok " NR " -" $0 " # SKIP"
    else print "not ok " NR " -" $0 }'
if [ "$rc" -eq 0 ]; then echo "ok $((n + 1)) - cucapture selftest exits 0"; else echo "not ok $((n + 1)) - cucapture selftest exits $rc"; fi
unmarked=$(printf '%s\n' "$out" | grep -v -c 'simulated driver')
if [ "$unmarked" -eq 0 ]; then echo "ok $((n + 2)) - every line on the simulated driver says so"
else echo "not ok $((n + 2)) - $unmarked lines on the simulated driver do not say so"; fi

# as a user runs it: no CUCAPTURE_DRIVER
out=$(env -u CUCAPTURE_DRIVER -u CUCAPTURE_REQUIRE_GPU CUCAPTURE_SIMULATED_DRIVER="$CUCAPTURE_TEST_SIM" "$exe" selftest 2>&1); rc=$?
if printf '%s\n' "$out" | head -n 1 | grep -q 'no usable GPU here'; then
    bad=$(printf '%s\n' "$out" | grep -E '^(PASS|FAIL|[0-9]+ passed)' | grep -v -c '\[simulated driver, not a GPU\]')
    if [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ]; then echo "ok $((n + 3)) - without a usable GPU (no driver, or one without a device): falls back to the simulated driver, marks every line, exits 0"
    else echo "not ok $((n + 3)) - without a usable GPU: exit $rc, $bad unmarked lines"; fi
    env -u CUCAPTURE_DRIVER "$exe" selftest --require-gpu >/dev/null 2>&1; rc=$?
    if [ "$rc" -eq 77 ]; then echo "ok $((n + 4)) - --require-gpu without a usable GPU exits 77"
    else echo "not ok $((n + 4)) - --require-gpu without a usable GPU exits $rc"; fi
else
    marked=$(printf '%s\n' "$out" | grep -c 'simulated driver')
    if [ "$rc" -eq 0 ] && [ "$marked" -eq 0 ]; then echo "ok $((n + 3)) - with a driver: runs on it, exits 0"
    else echo "not ok $((n + 3)) - with a driver: exit $rc, $marked lines name the simulator"; fi
    env -u CUCAPTURE_DRIVER "$exe" selftest --require-gpu >/dev/null 2>&1; rc=$?
    if [ "$rc" -eq 0 ]; then echo "ok $((n + 4)) - --require-gpu with a driver exits 0"
    else echo "not ok $((n + 4)) - --require-gpu with a driver exits $rc"; fi
fi

# two simulated devices: the multi-device scenario runs and passes
out=$(env -u CUCAPTURE_REQUIRE_GPU CUDASIM_DEVICES=2 CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" "$exe" selftest 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^PASS one capture forked across two devices'; then
    echo "ok $((n + 5)) - with two devices the cross-device scenario passes"
else
    echo "not ok $((n + 5)) - with two devices: exit $rc"; printf '%s\n' "$out" | sed 's/^/# /'
fi
