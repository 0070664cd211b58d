#!/bin/sh
# make fuzz-smoke: the API fuzzer without libFuzzer, on the simulated
# driver: the committed corpus, then a bounded pseudo-random campaign.
exec ./test/fuzz/fuzz-replay "${srcdir:-.}/test/fuzz/corpus" "${FUZZ_SMOKE_INPUTS:-100000}" "${FUZZ_SMOKE_SEED:-1}"
