#!/bin/sh
# torch2-ddp-auto.sh - tests/torch/ddp-auto.sh (CCSHIM_COALESCE=auto on real
# DDP: the source report's sizes, several buckets, static_graph, 4 ranks with
# gradient_as_bucket_view, find_unused_parameters) on torch 2.13 instead of
# Debian's torch 1.13.
. "$top_srcdir/tests/realstack/torch2.sh"
torch2_run ddp-auto.sh
