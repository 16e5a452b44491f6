package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// Push configs remember the protocol version of the method that set them
// (A2A 0.3 tasks/pushNotificationConfig/set, or a 0.3 message/send with
// a pushNotificationConfig; A2A 1.0 otherwise), and each notification
// goes out in that version's format: 1.0 POSTs a StreamResponse with
// the A2A-Notification-Token header; 0.3 (spec 0.3 §9.5) POSTs the Task
// object with the X-A2A-Notification-Token header.

// pushVersionKey is the member of a stored config's JSON that records
// the version it was set in ("0.3"; absent for 1.0). The stores keep a
// config's JSON as it is, so every store keeps the version with it.
const pushVersionKey = "superstepA2AVersion"

// legacyCall marks the context of a request made with a 0.3 method.
type legacyCall struct{}

// withLegacy returns ctx marked as the context of a 0.3 call.
func withLegacy(ctx context.Context) context.Context {
	return context.WithValue(ctx, legacyCall{}, true)
}

// isLegacy reports whether ctx is that of a 0.3 call.
func isLegacy(ctx context.Context) bool {
	v, _ := ctx.Value(legacyCall{}).(bool)
	return v
}

// encodePush is the stored JSON of a config set in a 0.3 call (legacy)
// or a 1.0 one.
func encodePush(c *core.PushConfig, legacy bool) (json.RawMessage, error) {
	raw, err := json.Marshal(c)
	if err != nil || !legacy {
		return raw, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	m[pushVersionKey] = json.RawMessage(`"0.3"`)
	return json.Marshal(m)
}

// pushVersion is the version a stored config was set in: "0.3" or "".
func pushVersion(raw json.RawMessage) string {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(v[pushVersionKey], &s)
	return s
}

// legacyTokenHeader carries a 0.3 config's token (spec 0.3 §9.5).
const legacyTokenHeader = "X-A2A-Notification-Token"

// legacySender POSTs 0.3 notifications: the Task object. Like the 1.0
// sender, it refuses loopback, private and link-local addresses unless
// allowed (checking the address of every connection, redirects too),
// follows at most 3 redirects and drops the token on one to another
// host.
type legacySender struct {
	client *http.Client
}

func newLegacySender(timeout time.Duration, allowPrivate bool) *legacySender {
	c := &http.Client{Timeout: timeout}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("stopped after 3 redirects")
		}
		if req.URL.Host != via[len(via)-1].URL.Host {
			req.Header.Del(legacyTokenHeader)
		}
		return nil
	}
	if !allowPrivate {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		d.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil {
				return fmt.Errorf("push receiver %q: not an address", host)
			}
			if a, ok := netipFrom(ip); !ok || blockedAddr(a) {
				return fmt.Errorf("push receiver %s: a loopback, private or link-local address", ip)
			}
			return nil
		}
		c.Transport = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	return &legacySender{client: c}
}

// send POSTs task, in the 0.3 format, to c's URL.
func (l *legacySender) send(ctx context.Context, c *core.PushConfig, task *core.Task) error {
	body, err := json.Marshal(a2av0.FromV1Task(task))
	if err != nil {
		return fmt.Errorf("encode the task: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set(legacyTokenHeader, c.Token)
	}
	if a := c.Auth; a != nil && a.Credentials != "" {
		switch strings.ToLower(a.Scheme) {
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+a.Credentials)
		case "basic":
			req.Header.Set("Authorization", "Basic "+a.Credentials)
		}
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

// netipFrom converts ip.
func netipFrom(ip net.IP) (netip.Addr, bool) {
	return netip.AddrFromSlice(ip)
}
