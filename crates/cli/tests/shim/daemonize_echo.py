#!/usr/bin/env python3
"""A server that daemonizes as `daemon on` servers do (nginx, the classic double fork):
the process listens, forks and exits at once; its child starts a new session and forks
WORKERS workers (grandchildren of the first process), which accept on the inherited
listener and echo each connection, one at a time; the master only waits for them. Every
process exits by itself after SECONDS. Prints "master PID" and "worker K PID ready", and
"worker K served N" per connection; for crates/cli/tests/preload.rs.

usage: daemonize_echo.py PORT WORKERS SECONDS
"""
import os
import select
import socket
import sys
import time

port, workers, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + seconds
lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("0.0.0.0", port))
lst.listen(128)
if os.fork() > 0:
    os._exit(0)  # the parent leaves at once; its child is the daemon
os.setsid()
say = lambda text: os.write(1, (text + "\n").encode())  # one write(2): lines never mix
say(f"master {os.getpid()}")


def serve(k):
    say(f"worker {k} {os.getpid()} ready")
    while time.monotonic() < end:
        r, _, _ = select.select([lst], [], [], 0.1)
        if not r:
            continue
        try:
            c, _ = lst.accept()
        except BlockingIOError:
            continue
        n = 0
        c.settimeout(max(end - time.monotonic(), 0.1))
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
                n += len(d)
        finally:
            c.close()
        say(f"worker {k} served {n}")
    os._exit(0)


lst.setblocking(False)
kids = []
for k in range(workers):
    pid = os.fork()
    if pid == 0:
        serve(k)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
say("master done")
