#!/bin/sh
# The differential run at scale (test/fuzz/README): SEEDS pseudo-random
# streams of INPUTS inputs each, run side by side on the GPU (one process
# per seed) and on the simulator, transcripts compared per seed.  Run from
# a built tree; the corpus runs once, with the first seed.
#     fuzz-diff-scale.sh SEEDS INPUTS FIRST-SEED [SECONDS]
# Prints one line per seed and a summary; divergent lines go to
# $FUZZ_DIFF_OUT (default test/fuzz/scale).  Exit 1 on any divergence or
# crash, 77 without a GPU.
seeds=${1:?seeds} inputs=${2:?inputs} first=${3:?first seed} limit=${4:-300}
out=${FUZZ_DIFF_OUT:-test/fuzz/scale}
corpus="${srcdir:-.}/test/fuzz/corpus"
empty=$(mktemp -d)
mkdir -p "$out"
export CUCAPTURE_TEST_SIM="${CUCAPTURE_TEST_SIM:-$(pwd)/sim/.libs/libcudasim.so}"
i=0
while [ $i -lt "$seeds" ]; do
    seed=$((first + i)); dir=$empty; [ $i -eq 0 ] && dir=$corpus
    ( timeout "$limit" ./test/fuzz/fuzz-diff gpu "$dir" "$inputs" $seed > "$out/gpu-$seed.txt" 2> "$out/gpu-$seed.err"
      echo $? > "$out/gpu-$seed.rc"
      timeout "$limit" ./test/fuzz/fuzz-diff sim "$dir" "$inputs" $seed > "$out/sim-$seed.txt" 2> "$out/sim-$seed.err"
      echo $? > "$out/sim-$seed.rc" ) &
    i=$((i + 1))
done
wait
rmdir "$empty"
total=0 diverged=0 bad=0 i=0
while [ $i -lt "$seeds" ]; do
    seed=$((first + i)); i=$((i + 1))
    grc=$(cat "$out/gpu-$seed.rc") src=$(cat "$out/sim-$seed.rc")
    [ "$grc" = 77 ] && { echo "SKIP: no usable GPU"; exit 77; }
    n=$(wc -l < "$out/gpu-$seed.txt")
    d=$(diff "$out/sim-$seed.txt" "$out/gpu-$seed.txt" | grep -c '^>')
    diff "$out/sim-$seed.txt" "$out/gpu-$seed.txt" > "$out/diff-$seed.txt"
    echo "seed $seed: $n inputs on the GPU (status $grc), simulator status $src, $d diverged"
    total=$((total + n)); diverged=$((diverged + d))
    { [ "$grc" = 0 ] && [ "$src" = 0 ]; } || bad=$((bad + 1))
done
echo "differential at scale: $total inputs in $seeds seeds from $first, $diverged diverged, $bad runs ended badly"
[ $diverged -eq 0 ] && [ $bad -eq 0 ]
