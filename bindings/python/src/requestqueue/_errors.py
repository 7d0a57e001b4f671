"""The exception hierarchy, mapped from the library's result codes and request outcomes.

::

    RequestQueueError
    ├── LibraryNotFoundError (also ImportError)   the shared library or its header was not found
    ├── BodyRestartedError                        a streamed body started over (retry)
    ├── APIError                                  an API call returned an rq_result error code
    │   ├── InvalidArgumentError (also ValueError)
    │   │   ├── NullArgumentError
    │   │   ├── InvalidURLError
    │   │   ├── UnsupportedSchemeError
    │   │   ├── InvalidMethodError
    │   │   └── InvalidHeaderError
    │   ├── InvalidHandleError
    │   ├── AlreadyAddedError
    │   ├── RequestFrozenError
    │   ├── NotActiveError
    │   ├── InvalidStateError
    │   ├── WrongDeliveryError
    │   ├── QueueClosedError
    │   ├── WaitTimeoutError (also TimeoutError)
    │   ├── WouldDeadlockError (also RuntimeError)
    │   ├── OutOfMemoryError (also MemoryError)
    │   └── SystemResourceError (also OSError)
    └── RequestError                              a request completed without success (rq_outcome)
        ├── RequestCancelled
        ├── HTTPStatusError                       status >= 400; carries the response
        ├── ResponseTooLargeError                 the body exceeded max_response_size
        ├── OutputFileError (also OSError)        the output file could not be opened or written
        └── NetworkError
            ├── RequestTimeoutError (also TimeoutError)
            ├── HostNotFoundError
            ├── ConnectError (also ConnectionError)
            ├── ConnectionLostError (also ConnectionError)
            ├── TLSError
            ├── TooManyRedirectsError
            ├── BadResponseError
            ├── BadRedirectError
            └── TransportError
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:
    from ._request import Request
    from ._types import Outcome, Response

__all__ = [
    "RequestQueueError",
    "LibraryNotFoundError",
    "BodyRestartedError",
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
    "ResponseTooLargeError",
    "OutputFileError",
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


class RequestQueueError(Exception):
    """Base class of every exception raised by this package."""


class LibraryNotFoundError(RequestQueueError, ImportError):
    """librequestqueue (or its header) could not be loaded; the message lists every place tried."""


class BodyRestartedError(RequestQueueError):
    """Raised by :meth:`Request.iter_bytes` / :meth:`Request.aiter_bytes` when a retried attempt
    starts the body over after part of an earlier attempt's body was yielded. Discard what was
    read (``request`` is the request) and call ``iter_bytes()`` / ``aiter_bytes()`` again: it
    goes on with the new attempt's body, from its first byte."""

    def __init__(self, message: str, request: "Request") -> None:
        super().__init__(message)
        self.request = request


# --------------------------------------------------------------------------------------------------
# Result codes of API calls (rq_result)
# --------------------------------------------------------------------------------------------------


class APIError(RequestQueueError):
    """An API call failed. ``code`` is the library's ``rq_result`` value."""

    code: int = -1

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgumentError(APIError, ValueError):
    """A number or enum value is out of its documented range (RQ_ERR_INVALID_ARGUMENT)."""

    code = 3


class NullArgumentError(InvalidArgumentError):
    """A required argument was missing (RQ_ERR_NULL_ARGUMENT)."""

    code = 1


class InvalidURLError(InvalidArgumentError):
    """The URL is malformed (RQ_ERR_INVALID_URL)."""

    code = 4


class UnsupportedSchemeError(InvalidArgumentError):
    """The URL's scheme is not http or https (RQ_ERR_UNSUPPORTED_SCHEME)."""

    code = 5


class InvalidMethodError(InvalidArgumentError):
    """The method is not an HTTP token (RQ_ERR_INVALID_METHOD)."""

    code = 6


class InvalidHeaderError(InvalidArgumentError):
    """A header name or value is not allowed (RQ_ERR_INVALID_HEADER)."""

    code = 7


class InvalidHandleError(APIError):
    """The library no longer knows the handle (RQ_ERR_INVALID_HANDLE)."""

    code = 2


class AlreadyAddedError(APIError):
    """The request was already added to a queue; a request is single-use (RQ_ERR_ALREADY_ADDED)."""

    code = 8


class RequestFrozenError(APIError):
    """The request can no longer be changed (RQ_ERR_REQUEST_FROZEN)."""

    code = 9


class NotActiveError(APIError):
    """The request is not waiting or running (RQ_ERR_NOT_ACTIVE)."""

    code = 10


class InvalidStateError(APIError):
    """The call is not allowed in the object's current state (RQ_ERR_INVALID_STATE)."""

    code = 11


class WrongDeliveryError(APIError):
    """The call needs the other delivery mode (RQ_ERR_WRONG_DELIVERY)."""

    code = 12


class QueueClosedError(APIError):
    """The queue was closed and accepts no more requests (RQ_ERR_QUEUE_CLOSED)."""

    code = 13


class WaitTimeoutError(APIError, TimeoutError):
    """A wait ended at its time limit (RQ_ERR_TIMED_OUT)."""

    code = 14


class WouldDeadlockError(APIError, RuntimeError):
    """The call would wait for the callback it is called from (RQ_ERR_WOULD_DEADLOCK)."""

    code = 15


class OutOfMemoryError(APIError, MemoryError):
    """Memory could not be allocated (RQ_ERR_OUT_OF_MEMORY)."""

    code = 16


class SystemResourceError(APIError, OSError):
    """A thread, descriptor or libcurl could not be set up (RQ_ERR_SYSTEM)."""

    code = 17


#: rq_result value -> exception class.
RESULT_ERRORS: Dict[int, Type[APIError]] = {
    cls.code: cls
    for cls in (
        NullArgumentError,
        InvalidHandleError,
        InvalidArgumentError,
        InvalidURLError,
        UnsupportedSchemeError,
        InvalidMethodError,
        InvalidHeaderError,
        AlreadyAddedError,
        RequestFrozenError,
        NotActiveError,
        InvalidStateError,
        WrongDeliveryError,
        QueueClosedError,
        WaitTimeoutError,
        WouldDeadlockError,
        OutOfMemoryError,
        SystemResourceError,
    )
}


# --------------------------------------------------------------------------------------------------
# Outcomes of requests (rq_outcome)
# --------------------------------------------------------------------------------------------------


class RequestError(RequestQueueError):
    """A request completed without success.

    ``request`` is the :class:`~requestqueue.Request`, ``response`` what was received (for an
    :class:`HTTPStatusError` the full response: status, headers, body), ``outcome`` the
    :class:`~requestqueue.Outcome` and ``message`` the library's description.
    """

    outcome_code: int = -1

    def __init__(self, message: str, request: "Request", response: "Response") -> None:
        super().__init__(message)
        self.message = message
        self.request = request
        self.response = response

    @property
    def outcome(self) -> "Outcome":
        return self.response.outcome


class RequestCancelled(RequestError):
    """The request was cancelled: by ``cancel()``, ``cancel_all()``, ``cancel_tag()``, a
    duplicate, an authentication handler, a reader leaving ``iter_bytes()`` early, or because its
    queue was closed (RQ_OUTCOME_CANCELLED)."""

    outcome_code = 1


class HTTPStatusError(RequestError):
    """The server answered with a status >= 400 (RQ_OUTCOME_HTTP_STATUS). ``response`` holds
    status, headers and body."""

    outcome_code = 2

    @property
    def status(self) -> int:
        return self.response.status


class ResponseTooLargeError(RequestError):
    """The response body exceeded the request's ``max_response_size``
    (RQ_OUTCOME_RESPONSE_TOO_LARGE)."""

    outcome_code = 12


class OutputFileError(RequestError, OSError):
    """The request's ``output_file`` could not be opened or written; the message names the file
    and the system's error (RQ_OUTCOME_FILE_ERROR)."""

    outcome_code = 13


class NetworkError(RequestError):
    """The exchange failed below HTTP: time limit, name resolution, connection, TLS, protocol."""


class RequestTimeoutError(NetworkError, TimeoutError):
    """A time limit of the request was reached (RQ_OUTCOME_TIMEOUT)."""

    outcome_code = 3


class HostNotFoundError(NetworkError):
    """The host name could not be resolved (RQ_OUTCOME_CANNOT_RESOLVE_HOST)."""

    outcome_code = 4


class ConnectError(NetworkError, ConnectionError):
    """The connection could not be made: refused, unreachable (RQ_OUTCOME_CANNOT_CONNECT)."""

    outcome_code = 5


class ConnectionLostError(NetworkError, ConnectionError):
    """The connection broke during the exchange: reset, closed early, truncated body
    (RQ_OUTCOME_CONNECTION_LOST)."""

    outcome_code = 6


class TLSError(NetworkError):
    """TLS failed: handshake, certificate verification, ... (RQ_OUTCOME_TLS)."""

    outcome_code = 7


class TooManyRedirectsError(NetworkError):
    """More redirects than allowed (RQ_OUTCOME_TOO_MANY_REDIRECTS)."""

    outcome_code = 8


class BadResponseError(NetworkError):
    """The server's reply was not valid HTTP or broke a rule the library enforces
    (RQ_OUTCOME_BAD_RESPONSE): not HTTP at all (HTTP/0.9, garbage, a status outside 100 to 599),
    invalid chunked framing or Content-Length, a transfer coding not asked for, headers over their
    budget (256 KiB, 10000 lines), a Content-Range that does not continue a resumed file."""

    outcome_code = 9


class BadRedirectError(NetworkError):
    """A redirect pointed to a URL or scheme that is not allowed (RQ_OUTCOME_BAD_REDIRECT)."""

    outcome_code = 10


class TransportError(NetworkError):
    """Any other transport failure; the message says more (RQ_OUTCOME_TRANSPORT)."""

    outcome_code = 11


#: rq_outcome value -> exception class (every outcome but RQ_OUTCOME_OK).
OUTCOME_ERRORS: Dict[int, Type[RequestError]] = {
    cls.outcome_code: cls
    for cls in (
        RequestCancelled,
        HTTPStatusError,
        ResponseTooLargeError,
        OutputFileError,
        RequestTimeoutError,
        HostNotFoundError,
        ConnectError,
        ConnectionLostError,
        TLSError,
        TooManyRedirectsError,
        BadResponseError,
        BadRedirectError,
        TransportError,
    )
}


# Shown as requestqueue.HTTPStatusError etc. in tracebacks (they are exported from the package).
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = "requestqueue"
del _name, _value
