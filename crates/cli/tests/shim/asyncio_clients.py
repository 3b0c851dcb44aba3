#!/usr/bin/env python3
"""COUNT asyncio clients at once (the kernel stack), each sending 256 KiB of random bytes
to HOST:PORT while reading the echo back; prints "equal N of COUNT" (exit 0 either way; a
connection error ends it with a traceback).

usage: asyncio_clients.py HOST PORT COUNT
"""
import asyncio
import os
import sys


async def one(host, port):
    r, w = await asyncio.open_connection(host, port)
    data = os.urandom(256 * 1024)
    w.write(data)
    await w.drain()
    got = bytearray()
    while len(got) < len(data):
        c = await asyncio.wait_for(r.read(65536), timeout=20)
        if not c:
            break
        got.extend(c)
    w.close()
    return bytes(got) == data


async def main():
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    res = await asyncio.gather(*[one(host, port) for _ in range(count)])
    print("equal", sum(res), "of", len(res), flush=True)


asyncio.run(main())
