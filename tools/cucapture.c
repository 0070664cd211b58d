/* cucapture: the library's main job from a shell.
 *   cucapture info       library, driver, devices and their default pools
 *   cucapture selftest   the capture scenarios users hit, one line each
 *   cucapture bench      the library against hand-written driver code */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

static void usage(FILE *to)
{
    fprintf(to,
            "Usage: cucapture COMMAND\n"
            "\n"
            "Commands:\n"
            "  info       print the library and driver versions, and each device with its\n"
            "             default memory pool's release threshold and what it supports\n"
            "  selftest   run the stream-capture scenarios of the test suite on this\n"
            "             machine's driver, one PASS or FAIL line each\n"
            "  bench      time the library against hand-written driver code, side by side\n"
            "\n"
            "Options:\n"
            "  -h, --help     show this help and exit\n"
            "  -V, --version  show the version and exit\n"
            "\n"
            "Environment:\n"
            "  CUCAPTURE_DRIVER  the driver library to load instead of libcuda.so.1\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("cucapture (libcucapture) %s\n", cucap_version_string());
        return 0;
    }
    if (!strcmp(argv[1], "info") && argc == 2)
        return tool_info();
    if (!strcmp(argv[1], "selftest") && argc == 2)
        return tool_selftest();
    if (!strcmp(argv[1], "bench"))
        return tool_bench(argc - 1, argv + 1);
    fprintf(stderr, "cucapture: unknown command or extra arguments: '%s'\nTry 'cucapture --help'.\n", argv[1]);
    return 2;
}
