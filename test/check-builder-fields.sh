#!/bin/sh
# Which files of src/ read or write struct cucap_builder's fields: each
# is compiled with the struct left incomplete (CUCAP_BUILDER_OPAQUE), and
# a file that then fails to compile touches its fields.  Only the
# builder's own files below may (at most three); split, join, the
# conditional, embed, complete and parameter-block calls go through
# builder-object.h's and builder-internal.h's functions.  Prints TAP and
# the count.
allowed='builder-object.c builder.c'
top=${srcdir:-.}
build=${top_builddir:-.}
echo "1..1"
touching=
count=0
for f in "$top"/src/*.c; do
    name=${f##*/}
    if ! ${CC:-cc} -std=c11 -fsyntax-only -D_GNU_SOURCE -DCUCAP_BUILDER_OPAQUE -I"$build" -I"$top/include" \
         -I"$top/src" ${CUDA_CFLAGS:-} "$f" >/dev/null 2>&1; then
        touching="$touching $name"
        count=$((count + 1))
    fi
done
outside=
for name in $touching; do
    case " $allowed " in *" $name "*) ;; *) outside="$outside $name" ;; esac
done
echo "# $count files read or write the builder's fields:$touching"
if [ -z "$outside" ] && [ "$count" -le 3 ]; then
    echo "ok 1 - at most 3 files touch the builder's fields ($count:$touching)"
else
    echo "not ok 1 - $count files touch the builder's fields, outside the allowed ones:$outside"
fi
