#!/bin/sh
# `cucapture selftest` on the simulated driver, as TAP: one line per scenario.
exe=./tools/cucapture
out=$(CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" "$exe" selftest 2>&1); rc=$?
n=$(printf '%s\n' "$out" | grep -c -E '^(PASS|FAIL) ')
echo "1..$((n + 1))"
printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | awk '{ status = ($1 == "PASS") ? "ok" : "not ok"; $1 = ""; print status " " NR " -" $0 }'
if [ "$rc" -eq 0 ]; then echo "ok $((n + 1)) - cucapture selftest exits 0"; else echo "not ok $((n + 1)) - cucapture selftest exits $rc"; fi
