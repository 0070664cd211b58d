/* The API fuzzer without libFuzzer, for make check (fuzz-smoke): replays
 * every file of the corpus, then runs a bounded campaign of pseudo-random
 * inputs from a fixed seed.  Prints TAP.
 *     fuzz-replay CORPUS-DIR [RANDOM-INPUTS [SEED]] */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static int replay_dir(const char *dir)
{
    struct dirent **names;
    int n, i, count = 0;

    n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return -1;
    for (i = 0; i < n; i++) {
        char path[4096];
        unsigned char buf[4096];
        size_t len;
        FILE *f;
        if (names[i]->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            if ((f = fopen(path, "rb"))) {
                len = fread(buf, 1, sizeof buf, f);
                fclose(f);
                fuzz_one(buf, len);
                count++;
            }
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    unsigned long randoms = argc > 2 ? strtoul(argv[2], NULL, 10) : 0, seed = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
    unsigned long i;
    int replayed;

    printf("TAP version 13\n1..2\n");
    if (argc < 2 || fuzz_setup() != 0) {
        printf("Bail out! usage: fuzz-replay CORPUS-DIR [RANDOM-INPUTS [SEED]], with the simulated and fault drivers\n");
        return 1;
    }
    replayed = replay_dir(argv[1]);
    printf("%s 1 - replayed %d corpus inputs with every invariant holding\n", replayed > 0 ? "ok" : "not ok",
           replayed);
    fflush(stdout);
    srand((unsigned)seed);
    for (i = 0; i < randoms; i++) {
        unsigned char buf[256];
        size_t len = 16 + (size_t)(rand() % 240), j;
        for (j = 0; j < len; j++)
            buf[j] = (unsigned char)rand();
        if (getenv("FUZZ_SAVE_INPUT")) {   /* keep the input that is about to run, to reproduce a finding */
            FILE *f = fopen(getenv("FUZZ_SAVE_INPUT"), "wb");
            if (f) {
                fwrite(buf, 1, len, f);
                fclose(f);
            }
        }
        fuzz_one(buf, len);
    }
    printf("ok 2 - %lu random inputs (seed %lu) with every invariant holding\n", randoms, seed);
    return 0;
}
