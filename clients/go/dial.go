package leasequeue

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// b64token is RFC 6750 §2.1: what may follow "Bearer " in an Authorization header.
var b64token = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	token   string
	tls     *tls.Config
	options []grpc.DialOption
}

// WithToken sends "authorization: Bearer <token>" on every call, for a server
// with authentication on. The token is never logged nor put in an error.
func WithToken(token string) DialOption {
	return func(c *dialConfig) { c.token = token }
}

// WithTLSConfig sets the TLS configuration of an https:// target (a private
// CA, client certificates); default: the system's roots.
func WithTLSConfig(cfg *tls.Config) DialOption {
	return func(c *dialConfig) { c.tls = cfg }
}

// WithGRPCOptions adds grpc dial options (interceptors, a custom dialer).
func WithGRPCOptions(opts ...grpc.DialOption) DialOption {
	return func(c *dialConfig) { c.options = append(c.options, opts...) }
}

// ParseTarget splits a target (http://host:port: cleartext HTTP/2,
// https://host:port: TLS, or host:port: cleartext) into host:port and
// whether it uses TLS.
func ParseTarget(target string) (hostPort string, useTLS bool, err error) {
	if target == "" {
		return "", false, errors.New("target: give http://host:port, https://host:port or host:port")
	}
	if !strings.Contains(target, "://") {
		return target, false, nil
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("target: %q is not http://host:port, https://host:port or host:port", target)
	}
	return u.Host, u.Scheme == "https", nil
}

// CheckToken refuses a token that cannot be sent as a bearer token, giving
// its length, never its text.
func CheckToken(token string) error {
	if !b64token.MatchString(token) {
		return fmt.Errorf("token: (%d characters) is not a bearer token: use the token `leasequeue hash-token` printed, "+
			"without \"Bearer \", quotes or a trailing newline", len(token))
	}
	return nil
}

// Dial opens a connection to a LeaseQueue server with the settings a worker
// wants: HTTP/2 pings while a call is open (a connection that died silently
// breaks the Work stream within half a minute), and redials from 0.5 s
// backing off to 5 s (so a restarted server gets outcomes while their leases
// still hold). It does not wait for the server: calls fail with Unavailable
// until it is there.
func Dial(target string, opts ...DialOption) (*grpc.ClientConn, error) {
	var cfg dialConfig
	for _, o := range opts {
		o(&cfg)
	}
	host, useTLS, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	if cfg.tls != nil && !useTLS {
		return nil, errors.New("WithTLSConfig: only with an https:// target")
	}
	redial := backoff.DefaultConfig
	redial.BaseDelay, redial.MaxDelay = 500*time.Millisecond, 5*time.Second
	options := []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: redial, MinConnectTimeout: 20 * time.Second}),
	}
	if useTLS {
		tlsConfig := cfg.tls
		if tlsConfig == nil {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		options = append(options, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	} else {
		// grpc-go 1.33 predates credentials/insecure: WithInsecure is h2c.
		options = append(options, grpc.WithInsecure())
	}
	if cfg.token != "" {
		if err := CheckToken(cfg.token); err != nil {
			return nil, err
		}
		options = append(options, grpc.WithPerRPCCredentials(bearerToken{header: "Bearer " + cfg.token, tls: useTLS}))
	}
	return grpc.Dial(host, append(options, cfg.options...)...)
}

// bearerToken implements credentials.PerRPCCredentials.
type bearerToken struct {
	header string
	tls    bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity is true with TLS, so grpc never sends the token on
// a connection without it; false only for a cleartext target, where the
// token travels in clear: keep such a server on a private network.
func (b bearerToken) RequireTransportSecurity() bool { return b.tls }

// String keeps the token out of anything that prints the credentials.
func (b bearerToken) String() string { return "bearerToken(<redacted>)" }
