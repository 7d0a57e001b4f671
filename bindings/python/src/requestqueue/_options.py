"""The keyword arguments of :class:`Request` as ``TypedDict`` s, so that ``Queue.add(url, **options)``
and ``fetch`` are checked by a type checker (``mypy --strict`` reports a misspelt or mistyped
option) while they stay plain keyword arguments at run time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional, Tuple, TypedDict, Union

from ._encoding import DataInput, FilesInput, ParamsInput
from ._types import HeadersInput, Outcome, Priority

if TYPE_CHECKING:
    from ._convert import PathInput
    from ._request import AuthCallback, BodyCallback, BodyInput, CompleteCallback, ProgressCallback

__all__ = ["RequestOptions", "TransportOptions"]


class TransportOptions(TypedDict, total=False):
    """Options of :class:`Request` that a transport of ``requestqueue.httpx`` applies to each of its
    requests (see :class:`requestqueue.Request`); every one is a :class:`RequestOptions` too."""

    retry: bool
    retry_delay: Optional[float]
    retry_outcomes: Optional[Iterable[Union[Outcome, int]]]
    max_attempts: Optional[int]
    retry_backoff: Optional[float]
    retry_max_delay: Optional[float]
    retry_jitter: Optional[float]
    retry_statuses: Optional[Iterable[int]]
    retry_non_idempotent: bool
    priority: Union[Priority, int, str]
    tag: Optional[str]
    max_response_size: Optional[int]
    ca_file: Optional["PathInput"]
    # Transport settings (decode_content is not one: httpx decodes bodies itself).
    user_agent: Optional[str]
    proxy: Optional[str]
    no_proxy: Optional[Union[str, Iterable[str]]]
    proxy_ca_file: Optional["PathInput"]
    client_cert: Optional["PathInput"]
    client_key: Optional["PathInput"]
    key_password: Optional[str]
    pinned_public_key: Optional[str]
    ca_dir: Optional["PathInput"]
    tls_min_version: Optional[str]
    unix_socket: Optional["PathInput"]
    resolve: Optional[Union[str, Iterable[str]]]
    interface: Optional[str]
    ip_version: Optional[int]
    tcp_keepalive: Optional[int]
    max_recv_speed: Optional[int]
    max_send_speed: Optional[int]
    http_version: Optional[str]
    cookies: Optional[bool]


class RequestOptions(TransportOptions, total=False):
    """Every keyword argument of :class:`Request` (all optional): see its documentation. (Those of
    :class:`TransportOptions`, and the others.)"""

    method: str
    headers: Optional[HeadersInput]
    body: Optional["BodyInput"]
    json: Any
    params: Optional[ParamsInput]
    data: Optional[DataInput]
    files: Optional[FilesInput]
    timeout: Optional[float]
    connect_timeout: Optional[float]
    idle_timeout: Optional[float]
    header_timeout: Optional[float]
    low_speed_limit: Optional[Tuple[float, float]]
    auth: Optional[Tuple[str, str]]
    max_redirects: Optional[int]
    decode_content: Optional[bool]
    unsafe_no_tls_verify: Optional[bool]
    stream: bool
    output_file: Optional["PathInput"]
    resume: bool
    on_complete: Optional["CompleteCallback"]
    on_upload_progress: Optional["ProgressCallback"]
    on_download_progress: Optional["ProgressCallback"]
    on_auth: Optional["AuthCallback"]
    on_body: Optional["BodyCallback"]
