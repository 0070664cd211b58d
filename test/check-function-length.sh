#!/bin/sh
# No function of src/ longer than 80 lines, from its first line to its
# closing brace (load_driver, a flat table of the driver's entry points,
# excepted).  Prints TAP.
top=${srcdir:-.}
echo "1..1"
long=$(for f in "$top"/src/*.c; do
    awk -v file="${f##*/}" '
        /^[A-Za-z].*\(/ && !/;[ \t]*$/ { name = $0; start = NR }
        /^}/ && name != "" {
            if (NR - start > 80 && name !~ /load_driver/) {
                sub(/\(.*/, "", name); n = split(name, w, /[ *]+/)
                printf " %s:%s (%d lines)", file, w[n], NR - start
            }
            name = ""
        }' "$f"
done)
if [ -z "$long" ]; then
    echo "ok 1 - no function of src/ is over 80 lines"
else
    echo "not ok 1 - functions over 80 lines:$long"
fi
