#!/bin/sh
# The layers of src/ (README, "Architecture"), checked on the objects just
# built: every file has a layer, no file calls a file of a higher layer,
# and no files call each other round in a loop.  Prints TAP.
layers='
teardown 5
builder 4
fork 4
conditional 4
embed 4
builder-memory 4
fork-links 4
kept-forks 4
pool 4
live-pointers 4
ptr-set 4
graph 3
params 3
body 3
hierarchy 3
streams 2
context-hold 2
relaxed-scope 2
spares 2
owner-lock 2
driver 1
error 1
error-names 1
'
dir=src/.libs
ls "$dir"/libcucapture_internal_la-*.o >/dev/null 2>&1 || dir=src
echo "1..3"
if ! command -v nm >/dev/null 2>&1; then
    for i in 1 2 3; do echo "ok $i # SKIP nm (binutils) is not installed"; done
    exit 0
fi
for o in "$dir"/libcucapture_internal_la-*.o; do
    f=${o##*/libcucapture_internal_la-}
    nm "$o" | sed "s|^|${f%.o} |"
done | awk -v layers="$layers" '
    BEGIN {
        n = split(layers, l, "\n")
        for (i = 1; i <= n; i++) if (split(l[i], p, " ") == 2) layer[p[1]] = p[2]
    }
    { files[$1] = 1 }
    NF == 4 && $3 ~ /^[TDBR]$/ { def[$4] = $1 }
    NF == 3 && $2 == "U" { uses[$1, $3] = 1 }
    END {
        for (f in files) if (!(f in layer)) unplaced = unplaced " " f ".c"
        for (k in uses) {
            split(k, p, SUBSEP)
            if ((p[2] in def) && def[p[2]] != p[1]) edge[p[1], def[p[2]]] = 1
        }
        for (k in edge) {
            split(k, p, SUBSEP)
            reach[p[1], p[2]] = 1
            if (layer[p[2]] > layer[p[1]]) up = up " " p[1] ".c->" p[2] ".c"
        }
        for (m in files) for (a in files) if ((a, m) in reach) for (b in files) if ((m, b) in reach) reach[a, b] = 1
        for (f in files) if ((f, f) in reach) loop = loop " " f ".c"
        print (unplaced == "" ? "ok 1 - every file of src/ has a layer" : "not ok 1 - files without a layer in test/check-layers.sh:" unplaced)
        print (up == "" ? "ok 2 - no file calls a file of a higher layer" : "not ok 2 - calls going up:" up)
        print (loop == "" ? "ok 3 - no files call each other in a loop" : "not ok 3 - files in a loop:" loop)
    }'
