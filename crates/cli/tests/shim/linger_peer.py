# The Linux peer of linger.c: for each of three connections, answers the first line, then
# reads until the end and prints "conn N fin" (end of file) or "conn N reset"; the third is
# left open (the test cuts the link under it). usage: linger_peer.py PORT
import socket, sys, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1])))
srv.listen(8)
print("listening", flush=True)
for n in (1, 2, 3):
    c, _ = srv.accept()
    c.settimeout(30)
    got = b""
    while not got.endswith(b"\n"):
        d = c.recv(64)
        if not d:
            break
        got += d
    c.sendall(b"ok\n")
    if n == 3:
        print("conn 3 open", flush=True)
        time.sleep(60)  # the test kills this peer first
        break
    try:
        while c.recv(64):
            pass
        print("conn", n, "fin", flush=True)
    except ConnectionResetError:
        print("conn", n, "reset", flush=True)
    c.close()
