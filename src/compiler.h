/* What the library asks of the compiler where it can.  Internal.
 *
 * CUCAP_I_HOT marks the functions a program runs for every capture,
 * update, launch or stream-ordered allocation.  GCC and Clang put them in
 * .text.hot, which the linkers place together: the calls a loop makes
 * between long driver calls then touch a few pages and lines of code,
 * not ones spread over the library.  CUCAP_I_COLD marks the functions
 * that report failures, so that the paths leading to them move out of
 * the hot functions' lines. */
#ifndef CUCAP_I_COMPILER_H
#define CUCAP_I_COMPILER_H

#if defined(__GNUC__) && defined(CUCAP_AB_NO_HOT_COLD)   /* A/B: none */
#  define CUCAP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#  define CUCAP_I_HOT
#  define CUCAP_I_COLD
#elif defined(__GNUC__)
#  define CUCAP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#  define CUCAP_I_HOT __attribute__((hot))
#  define CUCAP_I_COLD __attribute__((cold))
#else
#  define CUCAP_PRINTF(fmt, args)
#  define CUCAP_I_HOT
#  define CUCAP_I_COLD
#endif

#endif /* CUCAP_I_COMPILER_H */
