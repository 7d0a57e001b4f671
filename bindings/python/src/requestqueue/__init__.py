"""requestqueue: queues of concurrent asynchronous HTTP requests, on libcurl.

Python binding of librequestqueue (cffi, ABI mode). Synchronous::

    import requestqueue as rq

    with rq.Queue(max_concurrent=4) as queue:
        requests = [queue.add(url) for url in urls]
        queue.wait()
        for request in requests:
            print(request.result().status)

asyncio::

    async with rq.AsyncQueue(max_concurrent=4) as queue:
        responses = await asyncio.gather(*(queue.fetch(url) for url in urls))
"""

from __future__ import annotations

from ._core import AsyncQueue, AuthChallenge, Queue, Request
from ._errors import (
    OUTCOME_ERRORS,
    RESULT_ERRORS,
    AlreadyAddedError,
    APIError,
    BadRedirectError,
    BadResponseError,
    ConnectError,
    ConnectionLostError,
    HostNotFoundError,
    HTTPStatusError,
    InvalidArgumentError,
    InvalidHandleError,
    InvalidHeaderError,
    InvalidMethodError,
    InvalidStateError,
    InvalidURLError,
    LibraryNotFoundError,
    NetworkError,
    NotActiveError,
    NullArgumentError,
    OutOfMemoryError,
    QueueClosedError,
    RequestCancelled,
    RequestError,
    RequestFrozenError,
    RequestQueueError,
    RequestTimeoutError,
    SystemResourceError,
    TLSError,
    TooManyRedirectsError,
    TransportError,
    UnsupportedSchemeError,
    WaitTimeoutError,
    WouldDeadlockError,
    WrongDeliveryError,
)
from ._native import HEADER_PATH, LIBRARY_PATH, ffi, lib
from ._types import Duplicates, Headers, Order, Outcome, Progress, Response, State

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded librequestqueue, such as "0.1.0"."""
    return str(ffi.string(lib.rq_version_string()).decode("ascii"))


__all__ = [
    "Queue",
    "AsyncQueue",
    "Request",
    "Response",
    "Headers",
    "Progress",
    "AuthChallenge",
    "Outcome",
    "State",
    "Order",
    "Duplicates",
    "library_version",
    "LIBRARY_PATH",
    "HEADER_PATH",
    "RequestQueueError",
    "LibraryNotFoundError",
    "APIError",
    "InvalidArgumentError",
    "NullArgumentError",
    "InvalidURLError",
    "UnsupportedSchemeError",
    "InvalidMethodError",
    "InvalidHeaderError",
    "InvalidHandleError",
    "AlreadyAddedError",
    "RequestFrozenError",
    "NotActiveError",
    "InvalidStateError",
    "WrongDeliveryError",
    "QueueClosedError",
    "WaitTimeoutError",
    "WouldDeadlockError",
    "OutOfMemoryError",
    "SystemResourceError",
    "RequestError",
    "RequestCancelled",
    "HTTPStatusError",
    "NetworkError",
    "RequestTimeoutError",
    "HostNotFoundError",
    "ConnectError",
    "ConnectionLostError",
    "TLSError",
    "TooManyRedirectsError",
    "BadResponseError",
    "BadRedirectError",
    "TransportError",
    "RESULT_ERRORS",
    "OUTCOME_ERRORS",
]
