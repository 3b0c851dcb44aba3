# The Linux client of prefork.c: N connections one after another, each sends a message and
# expects it echoed. usage: prefork_client.py HOST PORT N TAG
import socket, sys
host, port, n, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ok = 0
for i in range(n):
    msg = ("%s message %d of %d from linux" % (tag, i, n)).encode()
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = s.recv(256)
            if not d:
                break
            got += d
        s.close()
    except OSError as e:
        print("connection", i, "failed:", e)
        continue
    if got == msg:
        ok += 1
    else:
        print("connection", i, "echoed", got)
print("ok", ok, "of", n)
sys.exit(0 if ok == n else 1)
