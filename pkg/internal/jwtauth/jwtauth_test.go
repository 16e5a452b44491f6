package jwtauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/internal/jwtauth"
)

// issuer is an OpenID provider on a local listener: a discovery document
// and a key set with an RSA and an EC key.
type issuer struct {
	srv       *httptest.Server
	rsa       *rsa.PrivateKey
	ec        *ecdsa.PrivateKey
	keyReads  atomic.Int64
	keysReply atomic.Int64 // HTTP status of the key set (0: 200)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{rsa: rk, ec: ek}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		is.keyReads.Add(1)
		if st := is.keysReply.Load(); st != 0 {
			w.WriteHeader(int(st))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{
			{"kty": "RSA", "kid": "r1", "use": "sig", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
			{"kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(ek.X.FillBytes(make([]byte, 32))), "y": b64(ek.Y.FillBytes(make([]byte, 32)))},
		}})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// sign makes a token with header alg and kid and the claims.
func (is *issuer) sign(t *testing.T, alg, kid string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	in := b64(h) + "." + b64(c)
	d := sha256.Sum256([]byte(in))
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		sig, err = rsa.SignPKCS1v15(rand.Reader, is.rsa, crypto.SHA256, d[:])
	case "ES256":
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, is.ec, d[:])
		if err == nil {
			sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		}
	default:
		sig = []byte("x")
	}
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + b64(sig)
}

func TestVerify(t *testing.T) {
	is := newIssuer(t)
	now := time.Unix(1_800_000_000, 0)
	v := jwtauth.New(is.srv.URL, []string{"app", "other"}, jwtauth.WithClock(func() time.Time { return now }))
	good := func() map[string]any {
		return map[string]any{"iss": is.srv.URL, "aud": "app", "sub": "u1", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	}
	with := func(k string, val any) map[string]any {
		c := good()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		token string
		ok    bool
	}{
		{"RS256", is.sign(t, "RS256", "r1", good()), true},
		{"ES256", is.sign(t, "ES256", "e1", good()), true},
		{"audience in a list", is.sign(t, "RS256", "r1", with("aud", []any{"x", "other"})), true},
		{"Cognito access token: client_id, no aud", is.sign(t, "RS256", "r1", with("aud", nil)), false},
		{"wrong issuer", is.sign(t, "RS256", "r1", with("iss", "https://evil.example")), false},
		{"wrong audience", is.sign(t, "RS256", "r1", with("aud", "nope")), false},
		{"expired", is.sign(t, "RS256", "r1", with("exp", now.Add(-2*time.Minute).Unix())), false},
		{"no exp", is.sign(t, "RS256", "r1", with("exp", nil)), false},
		{"not yet valid", is.sign(t, "RS256", "r1", with("nbf", now.Add(10*time.Minute).Unix())), false},
		{"alg none", is.sign(t, "none", "r1", good()), false},
		{"HS256", is.sign(t, "HS256", "r1", good()), false},
		{"RSA key named with ES256", is.sign(t, "ES256", "r1", good()), false},
		{"unknown key", is.sign(t, "RS256", "r9", good()), false},
		{"tampered claims", is.sign(t, "RS256", "r1", good())[:10] + "x" + is.sign(t, "RS256", "r1", good())[11:], false},
		{"not a JWT", "abc.def", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims, err := v.Verify(t.Context(), tc.token)
			if tc.ok && (err != nil || claims.Subject() != "u1") {
				t.Fatalf("Verify = %v, %v; want the token accepted", claims, err)
			}
			if !tc.ok && !errors.Is(err, jwtauth.ErrInvalid) {
				t.Fatalf("Verify = %v, %v; want an error wrapping ErrInvalid", claims, err)
			}
		})
	}
	cognito := with("aud", nil)
	cognito["client_id"] = "app"
	if _, err := v.Verify(t.Context(), is.sign(t, "RS256", "r1", cognito)); err != nil {
		t.Errorf("a Cognito access token (client_id app, no aud): %v", err)
	}
	if n := is.keyReads.Load(); n > 2 {
		t.Errorf("the key set was read %d times; want it cached (once, and once more for the unknown key at most)", n)
	}
}

func TestMiddleware(t *testing.T) {
	is := newIssuer(t)
	v := jwtauth.New(is.srv.URL, []string{"app"})
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		func(r *http.Request) bool { return r.URL.Path == "/public" })
	srv := httptest.NewServer(h)
	defer srv.Close()
	tok := is.sign(t, "RS256", "r1", map[string]any{"iss": is.srv.URL, "aud": "app", "exp": time.Now().Add(time.Hour).Unix()})
	bad := is.sign(t, "RS256", "r1", map[string]any{"iss": is.srv.URL, "aud": "app", "exp": time.Now().Add(-time.Hour).Unix()})
	for _, tc := range []struct {
		path, auth string
		keys       int
		want       int
	}{
		{"/x", "Bearer " + tok, 0, http.StatusNoContent},
		{"/x", "", 0, http.StatusUnauthorized},
		{"/x", "Bearer " + bad, 0, http.StatusUnauthorized},
		{"/x", "Basic dTpw", 0, http.StatusUnauthorized},
		{"/public", "", 0, http.StatusNoContent},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %q: %d; want %d", tc.path, tc.auth, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusUnauthorized && resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("401 as %q; want application/problem+json", resp.Header.Get("Content-Type"))
		}
	}
	// The issuer's keys cannot be read: 503, not 401.
	is.keysReply.Store(http.StatusInternalServerError)
	v2 := jwtauth.New(is.srv.URL, []string{"app"})
	srv2 := httptest.NewServer(v2.Middleware(http.NotFoundHandler(), nil))
	defer srv2.Close()
	req, _ := http.NewRequest("GET", srv2.URL+"/x", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("with the key set unreadable: %d; want 503", resp.StatusCode)
	}
}
