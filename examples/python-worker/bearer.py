"""LEASEQUEUE_TOKEN as `authorization: Bearer <token>` metadata on every call.

A server started with LEASEQUEUE_AUTH_FILE refuses calls without a token it
knows (UNAUTHENTICATED) and tokens without the RPC's role or queue
(PERMISSION_DENIED). `with_token(channel)` wraps a grpc channel in a client
interceptor that adds the header to every call made through it: unary
(Submit, Acknowledge) and streaming (Work) alike.

The token is read from the environment only (never from the command line,
where `ps` would show it) and is never printed: errors about it give its
length, not its text. Send it over TLS (https://) unless the network between
worker and server is private.
"""

import collections
import os
import re
import sys

import grpc

# RFC 6750 §2.1 b64token: what may follow "Bearer " in an Authorization header.
B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


def token_from_env():
    """LEASEQUEUE_TOKEN, or None when unset or empty; exits when it cannot be a bearer token."""
    token = os.environ.get("LEASEQUEUE_TOKEN", "")
    if token == "":
        return None
    if not B64TOKEN.fullmatch(token):
        sys.exit(
            f"LEASEQUEUE_TOKEN ({len(token)} characters) is not a bearer token: use the token "
            "`leasequeue hash-token` printed, without 'Bearer ', quotes or a trailing newline"
        )
    return token


def sent_in_clear(host, tls):
    """True when a token would cross a network unencrypted (no TLS, not loopback)."""
    return not tls and host.rsplit(":", 1)[0] not in LOOPBACK


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the authorization metadata to every call, whatever its kind."""

    def __init__(self, token):
        self._header = ("authorization", f"Bearer {token}")

    def __repr__(self):
        return "BearerToken(<redacted>)"

    def _details(self, d):
        metadata = [m for m in (d.metadata or ()) if m[0] != "authorization"] + [self._header]
        return _CallDetails(
            d.method, d.timeout, metadata, d.credentials, getattr(d, "wait_for_ready", None), getattr(d, "compression", None)
        )

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


def with_token(channel, token):
    """The channel to make stubs on: `channel` itself without a token, else one that sends it on every call."""
    return channel if token is None else grpc.intercept_channel(channel, BearerToken(token))
