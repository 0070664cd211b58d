#!/bin/sh
# Regenerate configure and the Makefile.in files from a git checkout.
# Vendors the autoconf-archive and pkg.m4 macros into m4/.
set -e
cd "$(dirname "$0")"
ACLOCAL="aclocal --install" autoreconf -fi
