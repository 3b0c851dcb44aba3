# The Linux client of threads.c: N concurrent connections, each sends a line and expects it
# back upper-cased. usage: threads_client.py HOST PORT N
import socket, sys, threading
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ok = [0]
lk = threading.Lock()
def one(i):
    s = socket.create_connection((host, port), timeout=10)
    line = ("hello %d from linux\n" % i).encode()
    s.sendall(line)
    got = b""
    while not got.endswith(b"\n"):
        d = s.recv(256)
        if not d: break
        got += d
    if got == line.upper():
        with lk: ok[0] += 1
    s.close()
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print("ok", ok[0], "of", n)
sys.exit(0 if ok[0] == n else 1)
