"""Connections: the target's form, TLS, and the bearer token on every call.

A target is `http://host:port` (cleartext HTTP/2), `https://host:port` (TLS)
or `host:port` (cleartext). With a token, every call carries
`authorization: Bearer <token>` (SECURITY.md, "Authentication"). The
token is never logged nor put in an error: messages give its length.
"""

from __future__ import annotations

import collections
import re
from typing import Any, Optional, Sequence, Tuple
from urllib.parse import urlsplit

import grpc

# RFC 6750 §2.1 b64token: what may follow "Bearer " in an Authorization header.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")

# HTTP/2 pings while a call is open, so a connection that died silently breaks
# the Work stream within half a minute; redials from 0.5 s backing off to 5 s,
# so a restarted server gets outcomes while their leases still hold.
CHANNEL_OPTIONS: Sequence[Tuple[str, Any]] = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 5_000),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
)


def parse_target(target: str) -> Tuple[str, bool]:
    """(host:port, tls) of a target; TypeError or ValueError naming `target` otherwise."""
    if not isinstance(target, str):
        raise TypeError(f"target: must be a string (http://host:port, https://host:port or host:port), got {type(target).__name__}")
    if target == "":
        raise ValueError("target: give http://host:port, https://host:port or host:port")
    if "://" not in target:
        return target, False
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(f"target: {target!r} is not http://host:port, https://host:port or host:port")
    return parts.netloc, parts.scheme == "https"


def check_token(token: Optional[str]) -> Optional[str]:
    """The token, or None; ValueError (giving its length, never its text) when it cannot be a bearer token."""
    if token is None:
        return None
    if not isinstance(token, str):
        raise TypeError(f"token: must be a string, got {type(token).__name__}")
    if not _B64TOKEN.fullmatch(token):
        raise ValueError(
            f"token: ({len(token)} characters) is not a bearer token: use the token `leasequeue hash-token` printed, "
            "without 'Bearer ', quotes or a trailing newline"
        )
    return token


def sent_in_clear(host: str, tls: bool) -> bool:
    """True when a token would cross a network unencrypted (no TLS, not loopback)."""
    return not tls and host.rsplit(":", 1)[0] not in _LOOPBACK


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class _BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the authorization metadata to every call, whatever its kind."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def __repr__(self) -> str:
        return "_BearerToken(<redacted>)"

    def _details(self, d: Any) -> Any:
        metadata = [m for m in (d.metadata or ()) if m[0] != "authorization"] + [self._header]
        return _CallDetails(
            d.method, d.timeout, metadata, d.credentials, getattr(d, "wait_for_ready", None), getattr(d, "compression", None)
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(details), request_iterator)


def open_channel(target: str, token: Optional[str], root_certificates: Optional[bytes] = None) -> Tuple[grpc.Channel, grpc.Channel]:
    """(the raw channel, to close; the channel to make stubs on, which carries the token)."""
    host, tls = parse_target(target)
    token = check_token(token)
    if root_certificates is not None and not tls:
        raise ValueError("root_certificates: only with an https:// target")
    if tls:
        channel = grpc.secure_channel(host, grpc.ssl_channel_credentials(root_certificates), options=CHANNEL_OPTIONS)
    else:
        channel = grpc.insecure_channel(host, options=CHANNEL_OPTIONS)
    if token is None:
        return channel, channel
    return channel, grpc.intercept_channel(channel, _BearerToken(token))
