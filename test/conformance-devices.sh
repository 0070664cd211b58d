#!/bin/sh
# The conformance program on the simulated driver with two devices: the
# rows of "One capture across two devices" run there too (with one device
# they are left out on both sides).  Its TAP is this test's.
exec env CUDASIM_DEVICES=2 ./test/conformance-sim
