#!/bin/sh
. "$top_srcdir/tests/tap.sh"
tap_skip_all "not written yet"
