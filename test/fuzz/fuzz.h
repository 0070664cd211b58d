/* The stateful API fuzzer: one input is one sequence of public API calls
 * and direct driver calls over a small set of live objects, with driver
 * faults injected along the way (see fuzz-api.c). */
#ifndef CUCAPTURE_FUZZ_H
#define CUCAPTURE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Set the process up (driver, context): 0 on success. */
int fuzz_setup(void);
/* Differential mode: no fault layer, faults off, every return code of an
 * input recorded; on the simulator (CUCAPTURE_TEST_SIM) or the real
 * driver.  0 on success, 77 when the real driver is not usable here. */
int fuzz_setup_differential(int on_simulator);
/* The last input's return codes, space-separated (differential mode). */
const char *fuzz_transcript(void);
/* Run one input; aborts (a finding) when an invariant breaks. */
void fuzz_one(const uint8_t *data, size_t size);

#endif
