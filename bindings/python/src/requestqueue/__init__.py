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

from typing import TYPE_CHECKING, Any, List, Union

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._async_queue import STREAM_BUFFER_LIMIT, AsyncQueue
    from ._options import RequestOptions

from ._queues import Queue
from ._request import AuthChallenge, Request
from . import _errors
from ._transport import Cookie
from ._errors import (
    OUTCOME_ERRORS,
    RESULT_ERRORS,
    AlreadyAddedError,
    APIError,
    BadRedirectError,
    BodyRestartedError,
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
    OutputFileError,
    QueueClosedError,
    RequestCancelled,
    RequestError,
    RequestFrozenError,
    RequestQueueError,
    RequestTimeoutError,
    ResponseTooLargeError,
    SystemResourceError,
    TLSError,
    TooManyRedirectsError,
    TransportError,
    UnsupportedSchemeError,
    WaitTimeoutError,
    WouldDeadlockError,
    WrongDeliveryError,
)
from ._native import HEADER, HEADER_PATH, LIBRARY_PATH, ffi, lib
from ._types import (
    Duplicates,
    Headers,
    Metrics,
    Order,
    Outcome,
    Priority,
    Progress,
    QueueStats,
    RateLimit,
    Response,
    State,
)

# The package is versioned with the header it carries (include/requestqueue.h, where the version is
# written once for every package).
__version__ = str(HEADER.defines["RQ_VERSION_STRING"])


def fetch(request: Union[Request, str], /, **kwargs: Unpack[RequestOptions]) -> Response:
    """One request, on a queue of its own, waited for (as ``requests.get``; Ruby's
    ``RequestQueue.request``): returns its Response or raises its error (HTTPStatusError for a
    status >= 400, with the response). For more than one request, use a Queue: it runs them
    concurrently and keeps connections open between them."""
    with Queue() as queue:
        return queue.fetch(request, **kwargs)


def __getattr__(name: str) -> Any:
    """AsyncQueue and STREAM_BUFFER_LIMIT, from the module that imports asyncio: imported on first
    use, so that a program that does not use asyncio does not import it (about 60 ms)."""
    if name in ("AsyncQueue", "STREAM_BUFFER_LIMIT"):
        from . import _async_queue

        value = getattr(_async_queue, name)
        globals()[name] = value  # (found directly from now on)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | {"AsyncQueue", "STREAM_BUFFER_LIMIT"})


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
    "Priority",
    "Metrics",
    "QueueStats",
    "RateLimit",
    "Cookie",
    "STREAM_BUFFER_LIMIT",
    "fetch",
    "library_version",
    "LIBRARY_PATH",
    "HEADER_PATH",
    *_errors.__all__,
]
