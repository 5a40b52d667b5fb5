#!/bin/sh
# private-files.sh - another local user plants links at the names ccshim
# writes (desync reports, flight dumps, the log) in a trace directory anyone
# can write: the job's files go to a subdirectory of its own (0700), its
# files are 0600, and nothing is ever written through a planted link.
# Needs root (it creates the unprivileged user it attacks with).
. "$top_srcdir/tests/tap.sh"
ccs_have_mpi || tap_skip_all "MPI not available (no mpirun or libccshim-mpi.so)"
SCENARIO="$top_builddir/tests/desync/desync_scenario"
[ -x "$SCENARIO" ] || tap_skip_all "desync_scenario not built"
[ "$(id -u)" = 0 ] || tap_skip_all "needs root, to create the attacking user"
command -v runuser > /dev/null 2>&1 || tap_skip_all "runuser not installed (util-linux)"
ATT=ccshim-attacker
id "$ATT" > /dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$ATT" ||
    tap_skip_all "cannot create the user $ATT"
tap_plan 9

chmod 711 "$CCS_TMP" # the attacker may pass through, not list
S=$CCS_TMP/shared
mkdir "$S" && chmod 777 "$S" # world-writable, not sticky: no kernel protection of links
V=$CCS_TMP/victim
echo "the job's user's own file" > "$V"
sum0=$(md5sum < "$V")
as_attacker() { runuser -u "$ATT" -- "$@"; }
# The names are predictable: the job's id and the rank.
for r in 0 1; do
    as_attacker ln -s "$V" "$S/ccshim-desync-files-r$r.txt"
    as_attacker ln -s "$V" "$S/ccshim-flight-files-r$r.flight"
    as_attacker ln -s "$V" "$S/log-$r.txt"
done

# A MISMATCH under warn: every rank writes its report and flight dump.
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$S" CCSHIM_JOB_ID=files CCSHIM_LOG="$S/log-%r.txt" SETTLE_MS=600 \
    "$CCSHIM_RUN" --mpi -- "$SCENARIO" op > "$CCS_TMP/out" 2> "$CCS_TMP/err"
rc=$?
tap_eq "the job runs (exit 0)" 0 "$rc"
tap_eq "nothing was written through the planted links: the file they point at is unchanged" "$sum0" "$(md5sum < "$V")"
P=$S/ccshim-0-files
tap_eq "the job's files are in its own subdirectory, mode 700, owned by the job's user" "700 0" \
    "$(stat -c '%a %u' "$P" 2>/dev/null)"
tap_eq "... each rank's report and flight dump there, mode 600" "600 600 600 600" \
    "$(for f in ccshim-desync-files-r0.txt ccshim-desync-files-r1.txt ccshim-flight-files-r0.flight ccshim-flight-files-r1.flight; do
           stat -c %a "$P/$f" 2>/dev/null || echo missing; done | paste -sd ' ' -)"
tap_check "... the reports hold the verdict" grep -q '^ccshim MISMATCH comm=' "$P/ccshim-desync-files-r0.txt"
tap_eq "a planted log link is refused: one warning per rank, the log goes to stderr" 2 \
    "$(grep -c "CCSHIM_LOG='$S/log-%r.txt': cannot open '$S/log-[01].txt'" "$CCS_TMP/err")"

# The attacker takes the job's subdirectory name first: refused, tracing
# off with one warning per rank, the job unharmed.
rm -rf "$P"
as_attacker mkdir -m 777 "$P"
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$S" CCSHIM_JOB_ID=files SETTLE_MS=300 \
    "$CCSHIM_RUN" --mpi -- "$SCENARIO" op > "$CCS_TMP/out2" 2> "$CCS_TMP/err2"
rc=$?
tap_eq "a subdirectory another user made: exit 0, one warning per rank, nothing written in it" "0 2 0" \
    "$rc $(grep -c "is writable by other users and its subdirectory '$P' is not this user's own" "$CCS_TMP/err2") $(ls -A "$P" | wc -l)"
tap_eq "... and the planted links' target is still unchanged" "$sum0" "$(md5sum < "$V")"

# A trace directory of the job's user alone is used as it is.
mkdir -m 700 "$CCS_TMP/own"
ccs_mpirun 60 2 env CCSHIM_TRACE_DIR="$CCS_TMP/own" CCSHIM_JOB_ID=files SETTLE_MS=300 \
    "$CCSHIM_RUN" --mpi -- "$SCENARIO" op > "$CCS_TMP/out3" 2>&1
tap_eq "a private trace directory: the reports in it directly, mode 600" "600 600" \
    "$(stat -c %a "$CCS_TMP/own/ccshim-desync-files-r0.txt" "$CCS_TMP/own/ccshim-desync-files-r1.txt" 2>/dev/null | paste -sd ' ' -)"
tap_done
