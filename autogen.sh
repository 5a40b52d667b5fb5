#!/bin/sh
# autogen.sh - regenerates the build system (needs autoconf, automake, libtool).
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf -fi
cp -f "$(automake --print-libdir)/tap-driver.sh" build-aux/tap-driver.sh
