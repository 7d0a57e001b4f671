"""The Python binding (bindings/python), synchronous Queue: N requests added at once to a queue with
max_concurrent=K and duplicates="allow", then queue.wait(), which runs the completions on this thread.
Small bodies arrive whole (bytes) in the completion; large ones go to an on_body callback when the
binding has one. Either way they are counted and dropped.

    py_requestqueue.py small|large URL N K
"""
import inspect
import sys

from benchlib import Timer, parse_args

import requestqueue as rq

kind, url, n, k = parse_args("requestqueue.Queue")
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


timer = Timer()
queue = rq.Queue(max_concurrent=k, duplicates="allow")
for _ in range(n):
    queue.add(url, on_complete=on_complete, **options)
queue.wait()
ok = timer.report(counts["done"], counts["ok"], counts["bytes"], stream)
queue.close()
sys.exit(0 if ok else 1)
