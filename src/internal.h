/* What every file of the library needs: the public API and how errors are
 * made and named.  The rest is declared in the header of the .c file that
 * defines it (streams.h for streams.c, ...; builder-internal.h for
 * builder.c); fork.c, conditional.c and embed.c define only public
 * functions.  Never installed. */
#ifndef CUCAPTURE_INTERNAL_H
#define CUCAPTURE_INTERNAL_H

#include "cucapture.h"
#include "error-names.h"
#include "error.h"

#endif /* CUCAPTURE_INTERNAL_H */
