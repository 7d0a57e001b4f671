"""Run by scripts/test-release with the Python of a venv where only the wheel (or the sdist) is
installed:  python check.py BASE_URL VENV
Prints the versions the installed package reports, where its library was loaded from, and what a
request to the fixture server fetched."""

import importlib.metadata
import sys

import requestqueue as rq

base, venv = sys.argv[1], sys.argv[2]
print("versions", rq.__version__, rq.library_version(), importlib.metadata.version("requestqueue"))
print("library", rq.LIBRARY_PATH)
print("licence", importlib.metadata.metadata("requestqueue")["License-Expression"])
with rq.Queue() as queue:
    response = queue.fetch(base + "/bytes?n=42")
print("fetched", len(response.body), "bytes")
