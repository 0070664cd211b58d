/* What the library asks of the compiler where it can.  Internal. */
#ifndef CUCAP_I_COMPILER_H
#define CUCAP_I_COMPILER_H

#if defined(__GNUC__)
#  define CUCAP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
/* A function called only on a failure: the paths that reach it are laid
 * out apart from the ones every capture runs. */
#  define CUCAP_COLD __attribute__((cold))
#else
#  define CUCAP_PRINTF(fmt, args)
#  define CUCAP_COLD
#endif

#endif /* CUCAP_I_COMPILER_H */
