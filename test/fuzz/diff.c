/* The differential run: the API fuzzer's corpus and pseudo-random inputs,
 * faults off, on one driver, printing one line per input with every
 * return code.  fuzz-diff.sh runs it on the simulator and on the GPU and
 * compares the two.
 *     fuzz-diff sim|gpu CORPUS-DIR RANDOM-INPUTS SEED */
#define _GNU_SOURCE 1   /* dladdr, for the crash report */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash-report.h"
#include "fuzz.h"

static void run(const char *name, const unsigned char *data, size_t size)
{
    fuzz_one(data, size);
    printf("%s: %s\n", name, fuzz_transcript());
}

int main(int argc, char **argv)
{
    struct dirent **names;
    unsigned long randoms, seed, i;
    const char *only;
    int n, k, rc;

    if (argc != 5 || (strcmp(argv[1], "sim") && strcmp(argv[1], "gpu"))) {
        fprintf(stderr, "usage: fuzz-diff sim|gpu CORPUS-DIR RANDOM-INPUTS SEED\n");
        return 2;
    }
    if ((rc = fuzz_setup_differential(strcmp(argv[1], "sim") == 0)) != 0) {
        fprintf(stderr, "fuzz-diff: the %s driver cannot be used here\n", argv[1]);
        return rc == 77 ? 77 : 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    crash_report_install();   /* a crash prints its frames into the transcript */
    n = scandir(argv[2], &names, NULL, alphasort);
    for (k = 0; k < n; k++) {
        char path[4096];
        unsigned char buf[4096];
        size_t len;
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", argv[2], names[k]->d_name);
        if (names[k]->d_name[0] != '.' && (f = fopen(path, "rb"))) {
            len = fread(buf, 1, sizeof buf, f);
            fclose(f);
            run(names[k]->d_name, buf, len);
        }
        free(names[k]);
    }
    if (n > 0)
        free(names);
    randoms = strtoul(argv[3], NULL, 10);
    only = getenv("FUZZ_DIFF_ONLY");   /* the one random input to run, to reproduce a divergence */
    seed = strtoul(argv[4], NULL, 10);
    srand((unsigned)seed);
    for (i = 0; i < randoms; i++) {
        unsigned char buf[256];
        size_t len = 16 + (size_t)(rand() % 240), j;
        char name[64];
        for (j = 0; j < len; j++)
            buf[j] = (unsigned char)rand();
        snprintf(name, sizeof name, "random-%lu-%lu", seed, i);
        if (!only || strtoul(only, NULL, 10) == i)
            run(name, buf, len);
    }
    return 0;
}
