# A Linux client of memcached: CLIENTS concurrent connections, each sets KEYS keys with
# distinct values and reads every one back (get and a multi-get), then checks a delete and a
# miss. Retries the first connect for up to 10 s (the server may still be starting).
# usage: memcached_client.py HOST PORT CLIENTS KEYS
import socket
import sys
import threading
import time

host, port, clients, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def connect():
    deadline = time.time() + 10
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def line(f):
    r = f.readline()
    if not r:
        raise EOFError("memcached closed the connection")
    return r


def one(c, errors):
    try:
        s = connect()
        f = s.makefile("rwb")
        vals = {}
        for i in range(keys):
            k = b"c%dk%d" % (c, i)
            v = (b"value-%d-%d-" % (c, i)) * (1 + i % 50)
            vals[k] = v
            f.write(b"set %s %d 0 %d\r\n%s\r\n" % (k, i, len(v), v))
            f.flush()
            r = line(f)
            assert r == b"STORED\r\n", r
        for i, (k, v) in enumerate(vals.items()):
            f.write(b"get %s\r\n" % k)
            f.flush()
            h = line(f)
            assert h == b"VALUE %s %d %d\r\n" % (k, i, len(v)), h
            got = f.read(len(v) + 2)
            assert got == v + b"\r\n", (k, got[:40])
            assert line(f) == b"END\r\n"
        some = list(vals)[:10]
        f.write(b"get " + b" ".join(some) + b"\r\n")
        f.flush()
        for k in some:
            h = line(f).split()
            assert h[0] == b"VALUE" and h[1] == k, h
            got = f.read(int(h[3]) + 2)
            assert got[:-2] == vals[k]
        assert line(f) == b"END\r\n"
        f.write(b"delete %s\r\nget %s\r\n" % (some[0], some[0]))
        f.flush()
        assert line(f) == b"DELETED\r\n"
        assert line(f) == b"END\r\n"
        s.close()
    except Exception as e:  # reported by the main thread
        errors.append("client %d: %r" % (c, e))


errors = []
ts = [threading.Thread(target=one, args=(c, errors)) for c in range(clients)]
for t in ts:
    t.start()
for t in ts:
    t.join()
if errors:
    print("\n".join(errors))
    sys.exit(1)
print("ok %d clients x %d keys" % (clients, keys))
