# tests/desync/netns.sh - sourced by the two-host tests (after tap.sh): two
# network namespaces joined by a veth pair stand for two machines.
#
#   th_setup || tap_skip_all "$TH_WHY"   # makes hosts hA (TH_ADDR_A), hB (TH_ADDR_B)
#   ccs_run_timeout 40 "$TH_EXEC" hA CMD ARGS...   # CMD in hA's namespace, hostname hA
#
# Each namespace has its own loopback and the veth end only: the addresses
# (10.231.77.1 and .2, a /30 of the test's own) exist inside these two
# namespaces and nowhere else, so concurrent runs cannot collide.  Each
# process gets its own UTS namespace with the host's name (`unshare --uts`),
# so ccshim's host identity differs between the two "machines" as it does
# on two real nodes; /dev/shm is shared, as it is not on two nodes, but the
# shared-memory segments are per host identity.  Everything is removed at
# exit: the process groups (tap.sh), any process left in a namespace, the
# namespaces and with them the veth pair.
TH_NS_A="ccs$$a"
TH_NS_B="ccs$$b"
TH_ADDR_A=10.231.77.1
TH_ADDR_B=10.231.77.2
TH_NET=10.231.77.0/30
TH_WHY=""
TH_MADE=0

th_cleanup() {
    local ns p
    ccs_kill_all
    for ns in "$TH_NS_A" "$TH_NS_B"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    if [ "$CCS_KEEP" = 1 ]; then echo "# kept $CCS_TMP"; else rm -rf "$CCS_TMP"; fi
}

# th_setup: 0 when both namespaces are up and reach each other; else 1
# with the reason in TH_WHY.
th_setup() {
    command -v ip >/dev/null 2>&1 || { TH_WHY="no ip(8) (iproute2) to make network namespaces"; return 1; }
    command -v unshare >/dev/null 2>&1 || { TH_WHY="no unshare(1) to give each host its own name"; return 1; }
    [ "$(id -u)" -eq 0 ] || { TH_WHY="network namespaces need root (running as uid $(id -u))"; return 1; }
    trap th_cleanup EXIT
    if ! ip netns add "$TH_NS_A" 2>"$CCS_TMP/netns.err" || ! ip netns add "$TH_NS_B" 2>>"$CCS_TMP/netns.err"; then
        TH_WHY="cannot make network namespaces: $(head -1 "$CCS_TMP/netns.err")"
        return 1
    fi
    if ! { ip link add "${TH_NS_A}v" type veth peer name "${TH_NS_B}v" &&
        ip link set "${TH_NS_A}v" netns "$TH_NS_A" && ip link set "${TH_NS_B}v" netns "$TH_NS_B" &&
        ip -n "$TH_NS_A" addr add "$TH_ADDR_A/30" dev "${TH_NS_A}v" &&
        ip -n "$TH_NS_B" addr add "$TH_ADDR_B/30" dev "${TH_NS_B}v" &&
        ip -n "$TH_NS_A" link set lo up && ip -n "$TH_NS_B" link set lo up &&
        ip -n "$TH_NS_A" link set "${TH_NS_A}v" up && ip -n "$TH_NS_B" link set "${TH_NS_B}v" up; } \
        2>"$CCS_TMP/netns.err"; then
        TH_WHY="cannot join the namespaces by a veth pair: $(head -1 "$CCS_TMP/netns.err")"
        return 1
    fi
    if ! ip netns exec "$TH_NS_A" unshare --uts sh -c 'hostname hA' 2>"$CCS_TMP/netns.err"; then
        TH_WHY="cannot set a host name in a UTS namespace: $(head -1 "$CCS_TMP/netns.err")"
        return 1
    fi
    TH_MADE=1
    return 0
}

# Runs a command as if on a host: also Open MPI's launch agent
# (--mca plm_rsh_agent "$TH_EXEC"), with the namespaces' names exported.
TH_EXEC="$top_srcdir/tests/desync/netns-exec.sh"
export TH_NS_A TH_NS_B
