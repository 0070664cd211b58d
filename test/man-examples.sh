#!/bin/sh
# Every C example of every manual page (a block between .nf and .fi in an
# EXAMPLE or EXAMPLES section that starts with #include) compiles as C11
# (C++17 where it includes cucapture.hpp) with -Werror; one with a main() links against the library built here and
# runs on the simulated driver, exiting 0.  Prints TAP.
srcdir=${srcdir:-.}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0 out=""
for page in "$srcdir"/man/*.[37]; do
    # each example block of the page into its own file, roff escapes undone
    awk -v dir="$work" -v base="$(basename "$page")" '
        /^\.SH / { in_ex = ($0 ~ /^\.SH EXAMPLES?$/); next }
        in_ex && /^\.nf/ { block = 1; k++; file = dir "/" base "-" k ".c"; first = 1; next }
        in_ex && /^\.fi/ { block = 0; next }
        block { if (first && $0 !~ /^#include/) { block = 0; next }
                first = 0; print > file }
    ' "$page"
done
for ex in "$work"/*.c; do
    [ -e "$ex" ] || continue
    sed -i -e 's/\\e/\\/g' -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' -e 's/\\&//g' "$ex"
    n=$((n + 1))
    name=$(basename "$ex" .c)
    compile="$CC -std=c11" link=$CC
    if grep -q 'cucapture.hpp' "$ex"; then   # the C++ page
        compile="$CXX -std=c++17 -x c++" link=$CXX
    fi
    if ! $compile -Wall -Wextra -Werror -I"$srcdir/include" $CUDA_CFLAGS -c "$ex" -o "$work/$name.o" 2> "$work/$name.err"; then
        out="$out
not ok $n - the example of $name compiles
$(sed 's/^/# /' "$work/$name.err")"
        continue
    fi
    if ! grep -q 'int main' "$ex"; then
        out="$out
ok $n - the example of $name compiles"
        continue
    fi
    if $link "$work/$name.o" -o "$work/$name" -L"$top_builddir/.libs" -lcucapture 2> "$work/$name.err" &&
       LD_LIBRARY_PATH=$top_builddir/.libs CUCAPTURE_DRIVER=$CUCAPTURE_TEST_SIM "$work/$name" > "$work/$name.out" 2>&1; then
        out="$out
ok $n - the example of $name compiles and runs on the simulated driver"
    else
        out="$out
not ok $n - the example of $name compiles but does not link or run
$(cat "$work/$name.err" "$work/$name.out" 2>/dev/null | sed 's/^/# /')"
    fi
done
echo "1..$n"
printf '%s\n' "$out" | sed '/^$/d'
