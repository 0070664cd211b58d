/* What the library asks of the compiler where it can.  Internal. */
#ifndef CUCAP_I_COMPILER_H
#define CUCAP_I_COMPILER_H

#if defined(__GNUC__)
#  define CUCAP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#  define CUCAP_PRINTF(fmt, args)
#endif

#endif /* CUCAP_I_COMPILER_H */
