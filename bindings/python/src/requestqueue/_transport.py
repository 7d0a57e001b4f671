"""Transport settings (content decoding, User-Agent, proxies, TLS, connections, cookies) as keyword
arguments of :class:`Request`, and a queue's ``defaults`` (see ``rq_option`` and
``rq_queue_get_defaults`` in requestqueue.h)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ._convert import (
    _INT64_MAX,
    _INT64_MIN,
    _SIZE_MAX,
    _UINT32_MAX,
    _UINT64_MAX,
    _cint,
    _cstring,
    _header_pairs,
    _number,
    _path,
    _seconds,
    _uint,
)
from ._errors import InvalidArgumentError, InvalidHeaderError
from ._native import check, ffi, lib

__all__ = ["Cookie", "TRANSPORT_OPTIONS", "DEFAULT_OPTIONS", "apply_transport", "apply_defaults", "parse_cookies"]

# name -> (option, kind): "bool", "int", "str", "path"; tls_min_version, http_version, no_proxy
# and resolve are converted first.
_OPTIONS: Dict[str, Any] = {
    "decode_content": ("RQ_OPTION_DECODE_CONTENT", "bool"),
    "user_agent": ("RQ_OPTION_USER_AGENT", "str"),
    "proxy": ("RQ_OPTION_PROXY", "str"),
    "no_proxy": ("RQ_OPTION_NO_PROXY", "str"),
    "proxy_ca_file": ("RQ_OPTION_PROXY_CA_FILE", "path"),
    "client_cert": ("RQ_OPTION_CLIENT_CERT", "path"),
    "client_key": ("RQ_OPTION_CLIENT_KEY", "path"),
    "key_password": ("RQ_OPTION_KEY_PASSWORD", "str"),
    "pinned_public_key": ("RQ_OPTION_PINNED_PUBLIC_KEY", "str"),
    "ca_dir": ("RQ_OPTION_CA_DIRECTORY", "path"),
    "tls_min_version": ("RQ_OPTION_TLS_MIN_VERSION", "int"),
    "unsafe_no_tls_verify": ("RQ_OPTION_UNSAFE_NO_TLS_VERIFY", "bool"),
    "unix_socket": ("RQ_OPTION_UNIX_SOCKET", "path"),
    "resolve": ("RQ_OPTION_RESOLVE", "str"),
    "interface": ("RQ_OPTION_INTERFACE", "str"),
    "ip_version": ("RQ_OPTION_IP_VERSION", "int"),
    "tcp_keepalive": ("RQ_OPTION_TCP_KEEPALIVE", "int"),
    "max_recv_speed": ("RQ_OPTION_MAX_RECV_SPEED", "int"),
    "max_send_speed": ("RQ_OPTION_MAX_SEND_SPEED", "int"),
    "http_version": ("RQ_OPTION_HTTP_VERSION", "int"),
    "cookies": ("RQ_OPTION_COOKIES", "bool"),
}
#: The transport keyword arguments of Request (and keys of a queue's defaults).
TRANSPORT_OPTIONS = tuple(_OPTIONS)
_TLS_VERSIONS = {"1.0": 10, "1.1": 11, "1.2": 12, "1.3": 13}
_HTTP_VERSIONS = {"1.1": 11, "2": 0, "2-prior-knowledge": 20}


def _convert(name: str, value: Any) -> List[Any]:
    """The values to pass for one option (resolve: one per entry)."""
    kind = _OPTIONS[name][1]
    if name == "tls_min_version":
        if value not in _TLS_VERSIONS:
            raise InvalidArgumentError(f"tls_min_version must be one of {', '.join(_TLS_VERSIONS)}, not {value!r}")
        return [_TLS_VERSIONS[value]]
    if name == "http_version":
        if value not in _HTTP_VERSIONS:
            raise InvalidArgumentError(f"http_version must be one of {', '.join(map(repr, _HTTP_VERSIONS))}, "
                                       f"not {value!r}")
        return [_HTTP_VERSIONS[value]]
    if name == "no_proxy" and not isinstance(value, (str, bytes)):
        value = ",".join(value)
    if name == "resolve":
        entries = [value] if isinstance(value, (str, bytes)) else list(value)
        return [_cstring(e, "resolve entry", InvalidArgumentError) for e in entries]
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, not {value!r}")
        return [int(value)]
    if kind == "int":
        return [_cint(value, name, _INT64_MIN, _INT64_MAX)]
    if kind == "path":
        return [_path(value, name)]
    return [_cstring(value, name, InvalidArgumentError)]


def apply_transport(handle: Any, options: Mapping[str, Any]) -> None:
    """Sets every transport option given (not None) on a request handle."""
    for name, value in options.items():
        if value is None:
            continue
        option = getattr(lib, _OPTIONS[name][0])
        for converted in _convert(name, value):
            if isinstance(converted, bytes):
                code = lib.rq_request_set_option_string(handle, option, converted)
            else:
                code = lib.rq_request_set_option_int(handle, option, converted)
            check(code, f"{name}={value!r}")


#: The keys of Queue(defaults=...) besides the transport options.
DEFAULT_OPTIONS = ("headers", "timeout", "connect_timeout", "idle_timeout", "header_timeout", "low_speed_limit",
                   "auth", "retry", "retry_delay", "max_attempts", "max_redirects", "max_response_size",
                   "ca_file") + TRANSPORT_OPTIONS


def apply_defaults(handle: Any, defaults: Mapping[str, Any]) -> None:
    """Configures a queue's defaults request (``rq_queue_get_defaults``) from a mapping of Request
    keyword arguments (those of DEFAULT_OPTIONS)."""
    unknown = [k for k in defaults if k not in DEFAULT_OPTIONS]
    if unknown:
        raise TypeError(f"defaults cannot hold {', '.join(map(repr, unknown))}; "
                        f"allowed: {', '.join(DEFAULT_OPTIONS)}")
    d = dict(defaults)
    for name, value in _header_pairs(d.pop("headers", None)):
        value_arg = ffi.NULL if value is None else _cstring(value, f"value of header {name!r}", InvalidHeaderError)
        check(lib.rq_request_set_header(handle, _cstring(name, "header name", InvalidHeaderError), value_arg),
              f"invalid header {name!r}")
    for key, setter in (("timeout", lib.rq_request_set_timeout),
                        ("connect_timeout", lib.rq_request_set_connect_timeout),
                        ("idle_timeout", lib.rq_request_set_idle_timeout),
                        ("header_timeout", lib.rq_request_set_header_timeout),
                        ("retry_delay", lib.rq_request_set_retry_delay)):
        value = d.pop(key, None)
        if value is not None:
            check(setter(handle, _seconds(value, key)), f"{key}={value!r}")
    low_speed = d.pop("low_speed_limit", None)
    if low_speed is not None:
        if not (isinstance(low_speed, tuple) and len(low_speed) == 2):
            raise TypeError("low_speed_limit must be a (bytes_per_second, seconds) tuple")
        check(lib.rq_request_set_low_speed_limit(handle, _number(low_speed[0], "low_speed_limit bytes_per_second"),
                                                 _seconds(low_speed[1], "low_speed_limit seconds")),
              f"low_speed_limit={low_speed!r}")
    auth = d.pop("auth", None)
    if auth is not None:
        if not (isinstance(auth, tuple) and len(auth) == 2):
            raise TypeError("auth must be a (user, password) tuple")
        check(lib.rq_request_set_credentials(handle, _cstring(auth[0], "user", InvalidArgumentError),
                                             _cstring(auth[1], "password", InvalidArgumentError)), "auth")
    retry = d.pop("retry", None)
    if retry is not None:
        check(lib.rq_request_set_retry(handle, int(bool(retry))), "retry")
    for key, setter, maximum in (("max_attempts", lib.rq_request_set_max_attempts, _UINT32_MAX),
                                 ("max_redirects", lib.rq_request_set_max_redirects, _UINT32_MAX),
                                 ("max_response_size", lib.rq_request_set_max_response_size, _UINT64_MAX)):
        value = d.pop(key, None)
        if value is not None:
            check(setter(handle, _uint(value, key, maximum)), f"{key}={value!r}")
    ca_file = d.pop("ca_file", None)
    if ca_file is not None:
        check(lib.rq_request_set_ca_file(handle, _path(ca_file, "ca_file")), "ca_file")
    apply_transport(handle, d)


def check_queue_settings(defaults: Optional[Mapping[str, Any]], max_connections: int,
                         max_host_connections: int) -> None:
    """Raises for bad queue settings before the queue exists: the defaults are tried on a
    request that is never sent."""
    _uint(max_connections, "max_connections", _SIZE_MAX)
    _uint(max_host_connections, "max_host_connections", _SIZE_MAX)
    if defaults:
        out = ffi.new("rq_request **")
        check(lib.rq_request_new(b"http://defaults.invalid/", out), "defaults")
        try:
            apply_defaults(out[0], defaults)
        finally:
            lib.rq_request_free(out[0])


def apply_queue_settings(queue_ptr: Any, defaults: Optional[Mapping[str, Any]], max_connections: int,
                         max_host_connections: int) -> None:
    if defaults:
        handle = ffi.new("rq_request **")
        check(lib.rq_queue_get_defaults(queue_ptr, handle), "defaults")
        apply_defaults(handle[0], defaults)
    if max_connections or max_host_connections:
        check(lib.rq_queue_set_max_connections(queue_ptr, max_connections, max_host_connections), "max_connections")


@dataclass(frozen=True)
class Cookie:
    """A cookie of a queue's jar (:meth:`Queue.cookies`), as a line of a Netscape cookie file."""

    domain: str
    #: Whether the cookie is sent to subdomains of ``domain`` too.
    include_subdomains: bool
    path: str
    secure: bool
    #: Expiry as a Unix time; 0 for a session cookie.
    expires: int
    name: str
    value: str
    http_only: bool


def parse_cookies(text: str) -> List[Cookie]:
    cookies = []
    for line in text.splitlines():
        http_only = line.startswith("#HttpOnly_")
        if http_only:
            line = line[len("#HttpOnly_"):]
        parts = line.split("\t")
        if len(parts) != 7 or line.startswith("#"):
            continue
        domain, sub, path, secure, expires, name, value = parts
        cookies.append(Cookie(domain, sub == "TRUE", path, secure == "TRUE", int(expires) if expires.isdigit() else 0,
                              name, value, http_only))
    return cookies


def cookie_list(queue_ptr: Any) -> List[Cookie]:
    out = ffi.new("char **")
    check(lib.rq_queue_cookies_list(queue_ptr, out), "cookies")
    try:
        text = ffi.string(out[0]).decode("utf-8", "replace")
    finally:
        lib.rq_string_free(out[0])
    return parse_cookies(text)

