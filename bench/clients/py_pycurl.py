"""pycurl's CurlMulti with K easy handles, each reused for the next request as soon as its transfer
ends (the pattern of pycurl's own retriever-multi example). Small bodies are collected into a
BytesIO per handle; large ones go to a write function that counts and discards.

    py_pycurl.py small|large URL N K
"""
import io
import sys

import pycurl

from benchlib import Timer, parse_args

kind, url, n, k = parse_args("pycurl.CurlMulti")
counts = {"done": 0, "ok": 0, "bytes": 0}

timer = Timer()
multi = pycurl.CurlMulti()
handles = []
for _ in range(k):
    c = pycurl.Curl()
    c.setopt(pycurl.URL, url)
    if kind == "small":
        c.buffer = io.BytesIO()
        c.setopt(pycurl.WRITEDATA, c.buffer)
    else:
        c.received = 0

        def discard(chunk, c=c):
            c.received += len(chunk)

        c.setopt(pycurl.WRITEFUNCTION, discard)
    handles.append(c)

started = 0
for c in handles:
    multi.add_handle(c)
    started += 1


def finished(c, good):
    global started
    if kind == "small":
        body = c.buffer.getvalue()
        c.buffer.seek(0)
        c.buffer.truncate()
        size = len(body)
    else:
        size, c.received = c.received, 0
    counts["done"] += 1
    counts["bytes"] += size
    if good and c.getinfo(pycurl.RESPONSE_CODE) == 200:
        counts["ok"] += 1
    multi.remove_handle(c)
    if started < n:
        multi.add_handle(c)
        started += 1


while counts["done"] < n:
    while True:
        ret, _ = multi.perform()
        if ret != pycurl.E_CALL_MULTI_PERFORM:
            break
    while True:
        queued, ok_list, err_list = multi.info_read()
        for c in ok_list:
            finished(c, True)
        for c, errno, message in err_list:
            if counts["ok"] == 0:
                sys.stderr.write(f"request failed: {errno} {message}\n")
            finished(c, False)
        if queued == 0:
            break
    if counts["done"] < n:
        multi.select(1.0)

ok = timer.report(counts["done"], counts["ok"], counts["bytes"], kind == "large")
for c in handles:
    c.close()
multi.close()
sys.exit(0 if ok else 1)
