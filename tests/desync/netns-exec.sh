#!/bin/sh
# netns-exec.sh HOST CMD [ARGS...] - runs CMD as if on HOST (hA or hB) of the
# two-host test bed (netns.sh): in that host's network namespace, in a UTS
# namespace of its own named HOST.
# netns-exec.sh --rsh HOST WORDS... - the same as Open MPI's launch agent
# (--mca plm_rsh_agent "netns-exec.sh --rsh"): like ssh, the words are
# joined into one command line for a shell on the "remote" host.
rsh=0
if [ "${1:-}" = --rsh ]; then rsh=1; shift; fi
h=$1
shift
case $h in
hA) ns=${TH_NS_A:?netns-exec.sh: TH_NS_A unset (source netns.sh and call th_setup)} ;;
hB) ns=${TH_NS_B:?netns-exec.sh: TH_NS_B unset (source netns.sh and call th_setup)} ;;
*) echo "netns-exec.sh: unknown host '$h' (expected hA or hB)" >&2; exit 2 ;;
esac
if [ "$rsh" = 1 ]; then
    exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && eval "$1"' "$h" "$*"
fi
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
