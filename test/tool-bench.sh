#!/bin/sh
# `cucapture bench --quick` on the simulated driver, as TAP: it runs every
# row (each after checking that the library's graph and the raw code's
# have the same shape), says that it ran on the simulator, and exits 0.
# The times themselves are not checked: no timing is asserted anywhere.
out=$(env -u CUCAPTURE_REQUIRE_GPU CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" ./tools/cucapture bench --quick 2>&1); rc=$?
echo "1..9"
if [ "$rc" -eq 0 ]; then echo "ok 1 - cucapture bench --quick exits 0"; else echo "not ok 1 - exits $rc"; printf '%s\n' "$out" | sed 's/^/# /'; fi
rows=$(printf '%s\n' "$out" | grep -c -E '^\| [a-z].*\| +[0-9.]+ \| +[0-9.]+ \| +[0-9.]+ \| .*\[.*\] \|$')
if [ "$rows" -eq 22 ]; then echo "ok 2 - 22 timed rows with their spread"; else echo "not ok 2 - $rows timed rows"; fi
if printf '%s\n' "$out" | grep -q 'not timed'; then echo "not ok 3 - a row was not timed"; else echo "ok 3 - every row's graphs have the same shape"; fi
if printf '%s\n' "$out" | head -n 1 | grep -q 'simulated driver, not a GPU'; then echo "ok 4 - the header says the simulated driver ran"
else echo "not ok 4 - the header does not name the simulated driver"; fi
# two simulated devices: the cross-device row is timed too
out=$(env -u CUCAPTURE_REQUIRE_GPU CUDASIM_DEVICES=2 CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" ./tools/cucapture bench --quick 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q -E '^\| fork/join cycle across two devices, per cycle +\| +[0-9.]+ \|'; then
    echo "ok 5 - with two devices the cross-device row is timed"
else
    echo "not ok 5 - with two devices: exit $rc"; printf '%s\n' "$out" | sed 's/^/# /'
fi
# --steps: the capture phase step by step, 7 library calls and 6 raw steps,
# then an update loop iteration, 9 library calls and 8 raw steps, with a
# builder per capture, with one builder reset, and with kept forks too
out=$(env -u CUCAPTURE_REQUIRE_GPU CUCAPTURE_DRIVER="$CUCAPTURE_TEST_SIM" ./tools/cucapture bench --quick --steps 2>&1); rc=$?
steps=$(printf '%s\n' "$out" | grep -c -E '^\| (lib|raw) .*\| +[0-9.]+ \| +[0-9.]+ \|$')
loop=$(printf '%s\n' "$out" | sed -n '/update loop iteration/,$p' | grep -c -E '^\| (lib|raw) .*\| +[0-9.]+ \| +[0-9.]+ \|$')
if [ "$rc" -eq 0 ] && [ "$steps" -eq 64 ] && [ "$loop" -eq 51 ]; then
    echo "ok 6 - --steps prints 13 capture steps for K=2 and K=64, 17 update loop steps for K=2 and K=8, three times"
else echo "not ok 6 - --steps: exit $rc, $steps steps, $loop of the update loop"; printf '%s\n' "$out" | tail -16 | sed 's/^/# /'; fi
# --steps ends with the kept-fork loop cut short after each phase, each
# side timed whole: 3 cuts for K=2 and K=8, with their spread
cut=$(printf '%s\n' "$out" | grep -c -E '^\| kept-fork loop, K=[28], (the whole iteration|up to the update|up to the end) +\| +[0-9.]+ \| +[0-9.]+ \| +[0-9.]+ \| .*\[.*\] \|$')
if [ "$cut" -eq 6 ]; then echo "ok 7 - --steps times the kept-fork loop cut short: 6 rows"
else echo "not ok 7 - --steps: $cut rows of the loop cut short"; printf '%s\n' "$out" | tail -12 | sed 's/^/# /'; fi
# and then the hand-written loop against a copy of itself: the bench's floor
if printf '%s\n' "$out" | grep -q -E '^\| hand-written K=2 loop, a copy against itself +\| +[0-9.]+ \| +[0-9.]+ \| +[0-9.]+ \| .*\[.*\] \|$'; then
    echo "ok 8 - --steps times the hand-written loop against a copy of itself"
else echo "not ok 8 - --steps has no floor row"; printf '%s\n' "$out" | tail -4 | sed 's/^/# /'; fi
# and the same with the copy's own executable graph: what sharing one takes away
if printf '%s\n' "$out" | grep -q -E '^\| the same, the copy with its own executable graph +\| +[0-9.]+ \| +[0-9.]+ \| +[0-9.]+ \| .*\[.*\] \|$'; then
    echo "ok 9 - --steps times the copy with an executable graph of its own"
else echo "not ok 9 - --steps has no row for the copy's own executable graph"; printf '%s\n' "$out" | tail -4 | sed 's/^/# /'; fi
