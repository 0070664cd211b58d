#!/bin/sh
# The layers of src/ (README, "Architecture"), checked on the objects just
# built and on the sources' includes: every file has a layer, no file
# calls or includes a file of a higher layer, no files call each other
# round in a loop, and the layers are no more than nine.  A header counts
# with the .c file of its name (builder-internal.h with builder.c,
# pool-internal.h with pool.c); one without a .c has a layer of its own.
# Prints TAP.
layers='
split 9
graph-set 9
eager-run 9
join 9
conditional 9
embed 9
teardown 9
builder 8
builder-complete 8
builder-params 9
builder-callback 9
graph 7
pool 7
body 7
capture 6
graph-owner 6
hand-back 6
reaper 1
stream-cache 5
params 5
staging 5
graph-memory 5
builder-object 6
relaxed-scope 5
context-hold 4
node-names 4
device-table 2
node-signature 4
deferred-destroy 5
driver 3
live-pointers 3
error 2
ptr-set 2
error-names 1
free-list 1
graph-set-keys 1
capture-registry 1
compiler 1
driver-entries 1
'
top=${srcdir:-.}
dir=src/.libs
ls "$dir"/libcucapture_internal_la-*.o >/dev/null 2>&1 || dir=src
echo "1..6"
if ! command -v nm >/dev/null 2>&1; then
    for i in 1 2 3; do echo "ok $i # SKIP nm (binutils) is not installed"; done
else
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
fi
# includes, read from the sources
for f in "$top"/src/*.c "$top"/src/*.h; do
    stem=${f##*/}; stem=${stem%.*}; stem=${stem%-internal}
    sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f" | sed "s|^|$stem |"
done | awk -v layers="$layers" '
    BEGIN {
        n = split(layers, l, "\n")
        for (i = 1; i <= n; i++) if (split(l[i], p, " ") == 2) { layer[p[1]] = p[2]; if (p[2] > most) most = p[2] }
    }
    {
        inc = $2; sub(/-internal$/, "", inc); sub(/^cucapture\/.*/, "cucapture", inc)
        if (inc == "config" || inc == "cucapture" || inc == $1) next
        if (!($1 in layer)) unplaced[$1 ".h/.c"] = 1
        else if (!(inc in layer)) unplaced[inc ".h"] = 1
        else if (layer[inc] > layer[$1]) up = up " " $1 "->" inc ".h"
    }
    END {
        for (u in unplaced) without = without " " u
        print (without == "" && up == "" ? "ok 4 - no file includes a header of a higher layer" \
                                         : "not ok 4 - includes going up:" up (without == "" ? "" : "; without a layer:" without))
        print (most <= 9 ? "ok 5 - src/ has at most nine layers (" most ")" : "not ok 5 - src/ has " most " layers, more than nine")
    }'
# the longest chain of includes (a .c and its .h one file), and no loop
for f in "$top"/src/*.c "$top"/src/*.h; do
    stem=${f##*/}; stem=${stem%.*}
    sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f" | sed "s|^|$stem |"
done | awk '
    function chain(f,    k, p, best, c) {
        if (f in memo) return memo[f]
        if (f in visiting) { looped = looped " " f; return 0 }
        visiting[f] = 1
        best = 1; via[f] = ""
        for (k in edge) {
            split(k, p, SUBSEP)
            if (p[1] == f && (c = chain(p[2]) + 1) > best) { best = c; via[f] = p[2] }
        }
        delete visiting[f]
        return memo[f] = best
    }
    $2 != "config" && $2 !~ /^cucapture/ && $2 != $1 { edge[$1, $2] = 1; files[$1] = 1; files[$2] = 1 }
    END {
        for (f in files) if (chain(f) > most) { most = memo[f]; from = f }
        for (path = from; via[from] != ""; from = via[from]) path = path " -> " via[from]
        if (looped != "")
            print "not ok 6 - includes in a loop:" looped
        else
            print (most <= 9 ? "ok 6 - the longest chain of includes has " most " files: " path \
                             : "not ok 6 - the longest chain of includes has " most " files, more than nine: " path)
    }'
