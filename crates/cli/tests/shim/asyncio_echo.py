#!/usr/bin/env python3
"""An asyncio TCP echo server (the event loop over epoll, streams with drain), as Python
services are written, for crates/cli/tests/preload.rs; it serves for SECONDS, then exits 0.

usage: asyncio_echo.py PORT SECONDS
"""
import asyncio
import sys


async def handle(r, w):
    while True:
        d = await r.read(65536)
        if not d:
            break
        w.write(d)
        await w.drain()
    w.close()


async def main():
    srv = await asyncio.start_server(handle, host="0.0.0.0", port=int(sys.argv[1]))
    print("serving", flush=True)
    async with srv:
        try:
            await asyncio.wait_for(srv.serve_forever(), timeout=float(sys.argv[2]))
        except asyncio.TimeoutError:
            pass
    print("done", flush=True)


asyncio.run(main())
