#!/usr/bin/env python3
"""socketserver.ForkingTCPServer: an echo server that forks a child per connection (the
child serves it, the parent closes its copy at once), as Python's standard library writes
it, for crates/cli/tests/preload.rs; it serves for SECONDS, then exits 0. Each child prints
"child PID served N" when its client has closed.

usage: forking_echo.py PORT SECONDS
"""
import os
import socketserver
import sys
import threading


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        n = 0
        while True:
            d = self.request.recv(65536)
            if not d:
                break
            self.request.sendall(d)
            n += len(d)
        # One write(2): the children share the pipe, and lines must not mix.
        os.write(1, f"child {os.getpid()} served {n}\n".encode())


class Server(socketserver.ForkingTCPServer):
    allow_reuse_address = True


def main():
    port, seconds = int(sys.argv[1]), float(sys.argv[2])
    with Server(("0.0.0.0", port), Echo) as srv:
        threading.Timer(seconds, srv.shutdown).start()
        print("serving", flush=True)
        srv.serve_forever(poll_interval=0.1)
    print("done", flush=True)


main()
