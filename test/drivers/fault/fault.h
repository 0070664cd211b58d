/* The fault-injecting driver: a driver library for CUCAPTURE_DRIVER that
 * forwards every call to another driver (the simulator or the real one)
 * and makes chosen calls fail.  Test-only, never installed.
 *
 * Environment:
 *   CUDAFAULT_DRIVER   the driver to forward to (default libcuda.so.1)
 *   CUDAFAULT_RULES    "rule[,rule...]", each rule "NAME:N:CODE": the N-th
 *                      call (from 1) of entry point NAME, in any variant,
 *                      or of any entry point when NAME is "*", returns
 *                      CODE (a number or a CUDA_ERROR_* name) instead of
 *                      reaching the driver.
 *   CUDAFAULT_SLOW_MS  every call that took longer than this many
 *                      milliseconds is reported on stderr with the stack
 *                      that made it (a call that waited for the GPU).
 *
 * Test hooks, resolved with dlsym on the library's handle:
 *   cudafault_set_rules(rules)   replace the rules and zero the counters;
 *                                returns 0, or -1 for a malformed rule
 *   cudafault_calls(name)        calls of NAME so far, in every variant
 *                                asked for ("*": of all)
 *   cudafault_injected()         how many calls were made to fail
 *   cudafault_last_injected()    the entry point of the last one, or NULL
 */
#ifndef CUDAFAULT_H
#define CUDAFAULT_H

typedef int (*cudafault_set_rules_fn)(const char *rules);
typedef long (*cudafault_calls_fn)(const char *name);
typedef long (*cudafault_injected_fn)(void);
typedef const char *(*cudafault_last_injected_fn)(void);

#endif
