#!/usr/bin/env python3
"""Cycles of idle keep-alive connections against a store, and the store's memory after each.

Each cycle opens CONNECTIONS connections to the store (at most 500 connecting at a time), sends
one `GET /` on each and reads its answer, leaves them all open and idle for a second, closes
them, waits two seconds, and prints the store process's resident memory (VmRSS) and open
descriptors, read from /proc. A store that caps its connections serves those past the cap
once earlier ones close, so a cycle lasts until every connection has had its answer.

    troupe-store serve --store troupe --port 8080 &
    python3 scripts/store_idle_connections.py --port 8080 --pid $! --cycles 6 --connections 5000

Traffic goes to 127.0.0.1 only. The client needs about CONNECTIONS descriptors (ulimit -n).
"""
import argparse
import asyncio
import os


def resident_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


async def one_request(port, gate):
    async with gate:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: store\r\n\r\n")
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        return writer


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pid", type=int, required=True, help="the store's process id")
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--connections", type=int, default=5000)
    args = parser.parse_args()
    pid = args.pid
    print(f"start: {resident_mb(pid)} MB, {descriptors(pid)} descriptors", flush=True)
    for cycle in range(1, args.cycles + 1):
        gate = asyncio.Semaphore(500)
        results = await asyncio.gather(
            *(one_request(args.port, gate) for _ in range(args.connections)),
            return_exceptions=True,
        )
        writers = [r for r in results if not isinstance(r, BaseException)]
        open_mb, open_fds = resident_mb(pid), descriptors(pid)
        await asyncio.sleep(1)
        for writer in writers:
            writer.close()
        await asyncio.sleep(2)
        print(
            f"cycle {cycle}: {len(writers)} answered; at the end, {open_mb} MB and "
            f"{open_fds} descriptors; after closing, {resident_mb(pid)} MB and "
            f"{descriptors(pid)} descriptors",
            flush=True,
        )


asyncio.run(main())
