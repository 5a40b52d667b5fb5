#!/usr/bin/env python3
"""faultproxy.py - a TCP proxy between a host's leader and the desync
coordinator that injects network faults (tests/desync/desync-netfault.sh).

    faultproxy.py LISTEN_PORT TARGET_PORT EVENTS...

Every EVENT is SECONDS:ACTION[:ARG], SECONDS counted from the first
connection the proxy accepts, applied to the connection open at that time:
  reset      closes both sides with a TCP reset (SO_LINGER 0)
  drop       drops the next whole STATUS frame from the leader (the frames
             after it then fail their seal: the coordinator hangs up)
  flip       flips one bit in the payload of the next STATUS frame
  stall:S    forwards nothing either way for S seconds (kernel buffers fill)
  down       resets the connection and stops listening: the leader's
             reconnections are refused from then on (a partition)
The leader reconnects through the proxy after each; every connection is
forwarded.  Prints one line per event applied and, at the end (SIGTERM),
"connections=N".
"""
import os
import select
import signal
import socket
import struct
import sys
import time

HDR = 12  # magic u32, version u16, type u16, length u32
STATUS = 3


def main():
    lport, tport = int(sys.argv[1]), int(sys.argv[2])
    events = []
    for e in sys.argv[3:]:
        parts = e.split(":")
        events.append([float(parts[0]), parts[1], float(parts[2]) if len(parts) > 2 else 0.0])
    events.sort()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", lport))
    ls.listen(64)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    t0 = None
    nconn = 0
    pair = None  # (leader socket, coordinator socket)
    c2s = b""  # leader -> coordinator bytes not yet forwarded (frame parsing)
    pending = None  # "drop" or "flip" waiting for the next STATUS frame
    stall_until = 0.0
    out = {}  # socket -> bytes to send

    def close_pair(rst):
        nonlocal pair, c2s
        if pair:
            for s in pair:
                if rst:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
                out.pop(s, None)
        pair = None
        c2s = b""

    def say(msg):
        print("%.2f %s" % (time.monotonic() - t0, msg), flush=True)

    while not stop:
        now = time.monotonic()
        if t0 is not None:
            while events and now - t0 >= events[0][0] and pair:
                _, act, arg = events.pop(0)
                if act == "reset":
                    say("reset connection %d" % nconn)
                    close_pair(True)
                elif act == "down":
                    say("reset connection %d and stopped listening" % nconn)
                    close_pair(True)
                    ls.close()
                    ls = None
                elif act in ("drop", "flip"):
                    pending = act
                    say("%s the next STATUS frame on connection %d" % (act, nconn))
                elif act == "stall":
                    stall_until = now + arg
                    say("stall connection %d for %.1f s" % (nconn, arg))
        rd = [ls] if ls else []
        wr = []
        if pair and now >= stall_until:
            rd += list(pair)
            wr = [s for s in pair if out.get(s)]
        try:
            r, w, _ = select.select(rd, wr, [], 0.02)
        except InterruptedError:
            continue
        if ls and ls in r:
            a, _ = ls.accept()
            if pair:  # the leader reconnected before we saw the old one close
                close_pair(False)
            t1 = time.monotonic()
            b = socket.create_connection(("127.0.0.1", tport))
            pair = (a, b)
            nconn += 1
            if t0 is None:
                t0 = t1
            took = time.monotonic() - t1
            say("connection %d%s" % (nconn, " (the coordinator took %.1f s to answer)" % took if took > 0.5 else ""))
            continue
        if not pair or now < stall_until:
            continue
        a, b = pair
        broken = False
        for s in w:
            try:
                n = s.send(out[s])
                out[s] = out[s][n:]
            except OSError:
                broken = True
        for s in r:
            if ls and s is ls:
                continue
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                broken = True
                break
            if s is b:
                out[a] = out.get(a, b"") + data
                continue
            c2s += data
            # Whole frames from the leader: forwarded, one dropped or altered.
            while len(c2s) >= HDR:
                _, _, ftype, flen = struct.unpack("<IHHI", c2s[:HDR])
                if len(c2s) < HDR + flen:
                    break
                frame, c2s = c2s[: HDR + flen], c2s[HDR + flen:]
                if pending and ftype == STATUS and flen > 16:
                    if pending == "drop":
                        say("dropped a STATUS frame of %d bytes" % flen)
                        pending = None
                        continue
                    fb = bytearray(frame)
                    fb[HDR + 8] ^= 1
                    frame = bytes(fb)
                    say("flipped a bit of a STATUS frame of %d bytes" % flen)
                    pending = None
                out[b] = out.get(b, b"") + frame
        if broken:
            close_pair(False)
    print("connections=%d" % nconn, flush=True)


if __name__ == "__main__":
    main()
