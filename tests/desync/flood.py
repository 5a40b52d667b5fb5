#!/usr/bin/env python3
"""flood.py PORT IDLE BIG SECONDS [keep] - what an unauthenticated peer may
try on the desync coordinator at 127.0.0.1:PORT: IDLE connections that never
say a word, BIG connections announcing a 4 MiB HELLO and streaming it, all
held for SECONDS.  Prints how many connections the coordinator closed.
With "keep": IDLE connections kept open for SECONDS, each one the
coordinator closes opened again at once (the backlog stays full); prints
how many were opened."""
import select
import socket
import struct
import sys
import time

port, idle, big, secs = (int(a) for a in sys.argv[1:5])
MAGIC, VERSION, HELLO = 0x44534343, 3, 1


def keep():
    def opened():
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        return s

    socks = [opened() for _ in range(idle)]
    total = len(socks)
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select(socks, [], [], 0.05)
        for s in r:
            try:
                gone = s.recv(1) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                s.close()
                socks[socks.index(s)] = opened()
                total += 1
    for s in socks:
        s.close()
    print("opened=%d" % total)


if len(sys.argv) > 5 and sys.argv[5] == "keep":
    keep()
    sys.exit(0)
socks = []
for _ in range(idle):
    try:
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        pass
bigs = []
for _ in range(big):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(struct.pack("<IHHI", MAGIC, VERSION, HELLO, 4 << 20))
        bigs.append(s)
    except OSError:
        pass
chunk = b"\0" * 65536
end = time.time() + secs
while time.time() < end:
    for s in bigs:
        try:
            s.setblocking(False)
            s.send(chunk)
        except OSError:
            pass
    time.sleep(0.05)
closed = 0
for s in socks + bigs:
    try:
        s.setblocking(False)
        if s.recv(1) == b"":
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
    s.close()
print("connections=%d closed=%d" % (len(socks) + len(bigs), closed))
