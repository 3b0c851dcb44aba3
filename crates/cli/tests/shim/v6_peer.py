# The Linux peer of v6_shim.py (kernel stack, the other namespace): a dual-stack TCP listener
# on [::]:PORT whose connections are control connections. Each line is a command:
#   tcp HOST PORT   connect to HOST:PORT, send "hi", read to EOF; answer "ok DATA"
#   udp HOST PORT   send "ping" from a fresh socket to HOST:PORT, wait for one reply;
#                   answer "ok DATA FROM-ADDRESS"
#   echo            answer "ok" (a bare round trip)
# Failures answer "err WHY". Every wait is bounded (5 s); the peer exits after 120 s.
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def command(line):
    words = line.split()
    if words == ["echo"]:
        return "ok"
    kind, host, port = words
    port = int(port)
    if kind == "tcp":
        c = socket.socket(family(host), socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect((host, port))
        c.sendall(b"hi")
        c.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            d = c.recv(4096)
            if not d:
                break
            data += d
        c.close()
        return "ok " + data.decode()
    if kind == "udp":
        u = socket.socket(family(host), socket.SOCK_DGRAM)
        u.settimeout(5)
        u.sendto(b"ping", (host, port))
        data, frm = u.recvfrom(4096)
        u.close()
        return "ok %s %s" % (data.decode(), frm[0])
    return "err unknown command"


def serve(conn):
    f = conn.makefile("rw")
    for line in f:
        try:
            answer = command(line)
        except Exception as e:  # the shim side reports it
            answer = "err %r" % (e,)
        f.write(answer + "\n")
        f.flush()
    conn.close()


l = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
l.bind(("::", PORT))
l.listen(16)
l.settimeout(1)
print("peer listening", flush=True)
end = time.time() + 120
while time.time() < end:
    try:
        conn, _ = l.accept()
    except socket.timeout:
        continue
    conn.settimeout(30)
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
