#!/bin/sh
# The layers of src/ (README, "Architecture"), checked on the objects just
# built: every file has a layer, no file calls a file of a higher layer,
# and no files call each other round in a loop.  Prints TAP.
layers='
teardown 10
fork 10
conditional 10
embed 10
builder 9
body 8
kept-forks 8
graph 7
pool 7
builder-memory 7
fork-links 7
capture-registry 6
hierarchy 5
stream-cache 4
params 4
context-hold 3
relaxed-scope 2
live-pointers 2
builder-object 2
driver 1
error 1
error-names 1
free-list 1
ptr-set 1
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
