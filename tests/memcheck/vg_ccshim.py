#!/usr/bin/env python3
"""vg_ccshim.py - which of valgrind memcheck's reports are ccshim's.

    vg_ccshim.py --src DIR [--list] FILE.xml...

Reads valgrind's XML reports (--xml=yes) of processes that ran under ccshim
and sorts every error (leaks included) into one of:

  ccshim     a frame of ccshim (an object named libccshim*, or a source file
             under DIR, the tree's src/) is on the stack and the innermost
             one is ccshim's own code: ccshim allocated, read, wrote or
             passed the memory, or made the MPI call that did;
  forwarded  the innermost ccshim frame is a wrapper forwarding the job's
             own call, unchanged, to the real MPI function it calls (the
             frame just inside it is in an MPI library): the report is the
             MPI library's (Open MPI's leaks in MPI_Init, for instance);
  other      no ccshim frame at all (Open MPI, PMIx, hwloc, the program).

Prints one summary line, "errors E: ccshim C, forwarded F, other O,
suppressed S" (S from valgrind's own count of suppressed errors), then every
ccshim error with its stack (and with --list every error, one line each).
Exits 1 when any error is ccshim's or a file is not a complete report, 0
otherwise.  The suppression file beside it (openmpi.supp) only makes the
reports shorter: nothing it hides can be ccshim's (see its comments).
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

# The functions through which ccshim forwards a job's own call to the real
# MPI: the exported entries (MPI_x, PMPI_x), the per-call wrappers (w_x) and
# the all-reduce's forwarding helper.  Anything else of ccshim that calls
# into MPI does so with arguments of its own.
FORWARDING = re.compile(r"^(P?MPI_[A-Z]\w*|w_[A-Z]\w*|real_allreduce)$")
MPI_OBJECT = re.compile(
    r"(^|/)(libmpi|libopen-pal|libopen-rte|libpmix|libhwloc|libevent|libucp|libucs|libuct|libfabric|"
    r"libmca_common|mca_)[^/]*\.so")


def frames(err):
    out = []
    stack = err.find("stack")
    if stack is None:
        return out
    for f in stack.findall("frame"):
        out.append({k: (f.findtext(k) or "") for k in ("ip", "obj", "fn", "dir", "file", "line")})
    return out


def is_ccshim(fr, src):
    if os.path.basename(fr["obj"]).startswith("libccshim"):
        return True
    d = fr["dir"]
    return bool(d) and (d == src or d.startswith(src + os.sep))


def classify(fs, src):
    idx = [i for i, fr in enumerate(fs) if is_ccshim(fr, src)]
    if not idx:
        return "other"
    i = idx[0]
    if FORWARDING.match(fs[i]["fn"]) and i > 0 and MPI_OBJECT.search(fs[i - 1]["obj"]):
        return "forwarded"
    return "ccshim"


def describe(err):
    what = err.findtext("xwhat/text") or err.findtext("what") or err.findtext("kind") or "?"
    return "%s: %s" % (err.findtext("kind") or "?", what)


def fmt_frame(fr):
    where = "%s:%s" % (fr["file"], fr["line"]) if fr["file"] else os.path.basename(fr["obj"])
    return "    %s (%s)" % (fr["fn"] or "???", where)


def main(argv):
    src, listing, files = None, False, []
    i = 0
    while i < len(argv):
        if argv[i] == "--src" and i + 1 < len(argv):
            src = os.path.realpath(argv[i + 1])
            i += 2
        elif argv[i] == "--list":
            listing = True
            i += 1
        else:
            files.append(argv[i])
            i += 1
    if not src or not files:
        sys.stderr.write("usage: vg_ccshim.py --src DIR [--list] FILE.xml...\n")
        return 2
    counts = {"ccshim": 0, "forwarded": 0, "other": 0}
    suppressed, bad, mine = 0, 0, []
    for path in files:
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as e:
            print("%s: not a complete valgrind XML report (%s)" % (path, e))
            bad += 1
            continue
        if root.find("status/state") is None or root.findall("status")[-1].findtext("state") != "FINISHED":
            print("%s: the process did not finish under valgrind" % path)
            bad += 1
        for s in root.findall("suppcounts/pair"):
            suppressed += int(s.findtext("count") or 0)
        for err in root.findall("error"):
            fs = frames(err)
            c = classify(fs, src)
            counts[c] += 1
            if c == "ccshim":
                mine.append((path, err, fs))
            if listing:
                top = next((fr for fr in fs if fr["fn"] not in ("malloc", "calloc", "realloc")), fs[0] if fs else None)
                print("%-9s %s | %s" % (c, describe(err)[:90], fmt_frame(top).strip() if top else "-"))
    total = sum(counts.values())
    print("errors %d: ccshim %d, forwarded %d, other %d, suppressed %d"
          % (total, counts["ccshim"], counts["forwarded"], counts["other"], suppressed))
    for path, err, fs in mine:
        print("ccshim's error in %s: %s" % (path, describe(err)))
        for fr in fs:
            print(fmt_frame(fr))
    return 1 if mine or bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
