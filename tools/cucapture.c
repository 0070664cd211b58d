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
            "Usage: cucapture COMMAND [--help]\n"
            "\n"
            "Commands:\n"
            "  info       print the library and driver versions, and each device with its\n"
            "             default memory pool's release threshold and what it supports\n"
            "  selftest   run the stream-capture scenarios of the test suite on this\n"
            "             machine's driver, one PASS or FAIL line each\n"
            "  bench      time the library against hand-written driver code, side by side\n"
            "\n"
            "Options:\n"
            "  -h, --help     show this help (or a command's) and exit\n"
            "  -V, --version  show the version and exit\n"
            "\n"
            "Exit status: 0 success, 1 a check failed, 2 usage error, 77 cannot run here\n"
            "(no usable CUDA driver or device).\n"
            "\n"
            "Environment:\n"
            "  CUCAPTURE_DRIVER       the driver library to load instead of libcuda.so.1, or\n"
            "                         'simulated' for the installed simulated driver\n"
            "  CUCAPTURE_REQUIRE_GPU  1: selftest refuses to run without a GPU\n");
}

static const struct command {
    const char *name;
    const char *help;
} commands[] = {
    { "info", "Usage: cucapture info\n"
              "Print the library and driver versions and, for each device, its name, compute\n"
              "capability, default memory pool's release threshold and supported features.\n"
              "Exit status: 0, or 77 without a usable CUDA driver.\n" },
    { "selftest", "Usage: cucapture selftest [--require-gpu]\n"
                  "Run the stream-capture scenarios that break other tools on this machine's\n"
                  "driver, one PASS or FAIL line each, and count them.  Without a CUDA driver\n"
                  "they run on the simulated driver, and every line says so; --require-gpu\n"
                  "(or CUCAPTURE_REQUIRE_GPU=1) makes a missing GPU exit 77 instead.\n"
                  "Exit status: 0 when all pass, 1 when one fails, 77 when it cannot run here.\n" },
    { "bench", "Usage: cucapture bench [--quick] [--steps]\n"
               "Time the library against hand-written driver code doing the same work, side by\n"
               "side, and print medians, the median of the paired ratios and the spread of\n"
               "the paired differences.\n"
               "Rows whose graphs differ in shape are not timed.  --quick: few repetitions\n"
               "(a smoke test).  --steps: then the capture phase of K = 2 and 64 and the\n"
               "update loop step by step, each side's median per call, the loop with\n"
               "kept forks cut short after each phase, and the hand-written loop against a\n"
               "copy of itself (the bench's own floor), sharing its executable graph and\n"
               "with one of its own.\n"
               "Exit status: 0, 1 when a row's graphs differ, 2 for an unknown option, 77\n"
               "without a usable driver.\n" },
};

static int is_help(const char *arg)
{
    return !strcmp(arg, "-h") || !strcmp(arg, "--help");
}

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return TOOL_USAGE;
    }
    if (is_help(argv[1])) {
        usage(stdout);
        return TOOL_OK;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("cucapture (libcucapture) %s\n", cucap_version_string());
        return TOOL_OK;
    }
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name) && argc >= 3 && is_help(argv[2])) {
            fputs(commands[i].help, stdout);
            return TOOL_OK;
        }
    if (!strcmp(argv[1], "info") && argc == 2)
        return tool_info();
    if (!strcmp(argv[1], "selftest") && (argc == 2 || (argc == 3 && !strcmp(argv[2], "--require-gpu")))) {
        const char *required = getenv("CUCAPTURE_REQUIRE_GPU");
        return tool_selftest(argc == 3 || (required && !strcmp(required, "1")));
    }
    if (!strcmp(argv[1], "bench"))
        return tool_bench(argc - 1, argv + 1);
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            fprintf(stderr, "cucapture %s: unexpected argument '%s'\nTry 'cucapture %s --help'.\n", argv[1],
                    argv[2], argv[1]);
            return TOOL_USAGE;
        }
    fprintf(stderr, "cucapture: unknown command '%s'\nTry 'cucapture --help'.\n", argv[1]);
    return TOOL_USAGE;
}
