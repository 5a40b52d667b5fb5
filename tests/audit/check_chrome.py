#!/usr/bin/env python3
"""check_chrome.py - checks a --chrome-trace file has what Perfetto and
chrome://tracing need: a JSON object with a traceEvents list whose events
carry name, ph, pid and tid, numeric ts (and dur >= 0 for complete events).
Prints: calls steps marks tracks (counts) on success, exits 1 with the
reason otherwise."""
import json
import sys


def fail(msg):
    print("check_chrome: " + msg, file=sys.stderr)
    sys.exit(1)


def main(path):
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents list")
    calls = steps = marks = 0
    tracks = set()
    for i, e in enumerate(doc["traceEvents"]):
        for k in ("name", "ph", "pid"):
            if k not in e:
                fail("event %d lacks %s: %r" % (i, k, e))
        ph = e["ph"]
        if ph == "M":
            if e["name"] == "thread_name":
                tracks.add(e["tid"])
            continue
        if "tid" not in e or not isinstance(e.get("ts"), (int, float)):
            fail("event %d lacks tid or numeric ts: %r" % (i, e))
        if ph == "X":
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                fail("complete event %d has no dur >= 0: %r" % (i, e))
            if e.get("cat") == "step":
                steps += 1
            else:
                calls += 1
        elif ph == "i":
            marks += 1
        else:
            fail("unexpected phase %r in event %d" % (ph, i))
    print(calls, steps, marks, len(tracks))


if __name__ == "__main__":
    main(sys.argv[1])
