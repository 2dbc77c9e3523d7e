package main

// LEASEQUEUE_TOKEN as per-RPC credentials: `authorization: Bearer <token>`
// on every call (Work, Acknowledge), for a server started with
// LEASEQUEUE_AUTH_FILE. The token is read from the environment only and is
// never logged: errors about it give its length, not its text.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// b64token is RFC 6750 §2.1: what may follow "Bearer " in an Authorization header.
var b64token = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

// tokenFromEnv returns LEASEQUEUE_TOKEN ("" when unset), or an error when it
// cannot be a bearer token.
func tokenFromEnv() (string, error) {
	token := os.Getenv("LEASEQUEUE_TOKEN")
	if token != "" && !b64token.MatchString(token) {
		return "", fmt.Errorf("LEASEQUEUE_TOKEN (%d characters) is not a bearer token: use the token `leasequeue hash-token` printed, "+
			"without \"Bearer \", quotes or a trailing newline", len(token))
	}
	return token, nil
}

// bearerToken implements credentials.PerRPCCredentials.
type bearerToken struct {
	header string // "Bearer <token>"
	tls    bool   // the connection uses TLS
}

func newBearerToken(token string, tls bool) bearerToken {
	return bearerToken{header: "Bearer " + token, tls: tls}
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity is true with TLS, so grpc never sends the token
// on a connection without it; false only for http:// (h2c), where the
// token travels in clear text: keep such a server on a private network.
func (b bearerToken) RequireTransportSecurity() bool {
	return b.tls
}

// String keeps the token out of anything that prints the credentials.
func (b bearerToken) String() string {
	return "bearerToken(<redacted>)"
}

// sentInClear is true when the token would cross a network unencrypted
// (no TLS, and not a loopback address).
func sentInClear(target string, tls bool) bool {
	if tls {
		return false
	}
	host := target
	if i := strings.LastIndex(target, ":"); i >= 0 {
		host = target[:i]
	}
	switch host {
	case "localhost", "127.0.0.1", "::1", "[::1]":
		return false
	}
	return true
}
