"""10 MiB uploads from Python: N POSTs of one immutable bytes body, one at a time, with the
requestqueue binding or with pycurl (CURLOPT_POSTFIELDS on an easy handle: libcurl reads the
buffer in place). Prints one line: client, N, user and system CPU seconds, peak RSS (KiB) during
the uploads and that peak minus the RSS before the first upload (the body already made).

    py_upload.py rq|rq-dedup|pycurl URL N [SIZE]

rq: a Queue with duplicates="allow" (as bench/run's clients); rq-dedup: the default duplicate
detection (CANCEL_EARLIER), which hashes and compares each body (see bench/README.md).

URL is a location that reads the whole body before answering (bench/driver.py NGINX_CONF's
/upload). A small script for bench/README.md's figures, not one of bench/run's clients.
"""
import os
import resource
import sys


def status_kib(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main():
    client, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 10 * 1024 * 1024
    headers = {"Content-Type": "application/octet-stream"}
    if client in ("rq", "rq-dedup"):
        import requestqueue as rq
        queue = rq.Queue(max_concurrent=1, **({"duplicates": "allow"} if client == "rq" else {}))

        def send(body):
            response = queue.fetch(url, method="POST", body=body, headers=headers)
            return response.status
    else:
        import pycurl
        from io import BytesIO
        handle = pycurl.Curl()
        handle.setopt(pycurl.URL, url)
        handle.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in headers.items()])

        def send(body):
            sink = BytesIO()
            handle.setopt(pycurl.WRITEDATA, sink)
            handle.setopt(pycurl.POSTFIELDSIZE_LARGE, len(body))
            handle.setopt(pycurl.POSTFIELDS, body)  # (pycurl keeps a reference; libcurl reads it in place)
            handle.perform()
            return handle.getinfo(pycurl.RESPONSE_CODE)

    body = os.urandom(size)
    send(b"warm")  # (connection and imports, before the baseline)
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS (VmHWM) starts again from the current RSS
    base = status_kib("VmRSS")
    start = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        status = send(body)
        if status != 200:
            sys.exit(f"status {status}")
    end = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{client} n={n} user={end.ru_utime - start.ru_utime:.3f} sys={end.ru_stime - start.ru_stime:.3f} "
          f"peak_rss_kib={status_kib('VmHWM')} above_base_kib={status_kib('VmHWM') - base}")


main()
