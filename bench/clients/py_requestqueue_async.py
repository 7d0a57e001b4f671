"""The Python binding's AsyncQueue under asyncio (the same event loop aiohttp uses): N requests
added at once with max_concurrent=K and duplicates="allow", then `await queue.wait()`; completions
run in the event loop's thread (the queue's descriptor is on the loop). Small bodies arrive whole in
the completion; large ones go to an on_body callback when the binding has one.

    py_requestqueue_async.py small|large URL N K
"""
import asyncio
import inspect
import sys

from benchlib import Timer, parse_args

import requestqueue as rq

kind, url, n, k = parse_args("requestqueue.AsyncQueue")
counts = {"done": 0, "ok": 0, "bytes": 0}
# Large bodies go to an on_body callback that counts and drops each piece, when the binding has it.
stream = kind == "large" and "on_body" in inspect.signature(rq.Request.__init__).parameters
options = {"on_body": lambda request, data, offset: counts.__setitem__("bytes", counts["bytes"] + len(data))} \
    if stream else {}


def on_complete(request):
    response = request.response
    counts["done"] += 1
    counts["bytes"] += len(response.body)
    if response.outcome == rq.Outcome.OK and response.status == 200:
        counts["ok"] += 1
    elif counts["ok"] == 0:
        sys.stderr.write(f"request failed: {response.outcome.name} {response.message}\n")


async def main():
    timer = Timer()
    async with rq.AsyncQueue(max_concurrent=k, duplicates="allow") as queue:
        for _ in range(n):
            queue.add(url, on_complete=on_complete, **options)
        await queue.wait()
        return timer.report(counts["done"], counts["ok"], counts["bytes"], stream)


sys.exit(0 if asyncio.run(main()) else 1)
