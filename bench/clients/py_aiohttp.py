"""aiohttp: one ClientSession (TCPConnector limit=K) and K worker tasks that each take the next
request as soon as their previous one completed, so at most K are in flight. Small bodies are read
whole (`await response.read()`); large ones are streamed in 64 KiB chunks and discarded.

    py_aiohttp.py small|large URL N K
"""
import asyncio
import sys

import aiohttp

from benchlib import Timer, parse_args

kind, url, n, k = parse_args("aiohttp.ClientSession")
counts = {"next": 0, "done": 0, "ok": 0, "bytes": 0}


async def worker(session):
    while counts["next"] < n:
        counts["next"] += 1
        try:
            async with session.get(url) as response:
                if kind == "small":
                    size = len(await response.read())
                else:
                    size = 0
                    async for chunk in response.content.iter_chunked(65536):
                        size += len(chunk)
                good = response.status == 200
        except aiohttp.ClientError as error:
            if counts["ok"] == 0:
                sys.stderr.write(f"request failed: {error!r}\n")
            size, good = 0, False
        counts["done"] += 1
        counts["bytes"] += size
        counts["ok"] += good


async def main():
    timer = Timer()
    connector = aiohttp.TCPConnector(limit=k)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session) for _ in range(k)))
        return timer.report(counts["done"], counts["ok"], counts["bytes"], kind == "large")


sys.exit(0 if asyncio.run(main()) else 1)
