// Package jwtauth checks bearer JSON Web Tokens as an API Gateway HTTP
// API's JWT authorizer does, for the servers API Gateway does not front
// (a Lambda function URL with AuthType NONE): the token is signed with a
// key of the issuer's JSON Web Key Set (found through its OpenID
// discovery document), its iss is the issuer, its aud (or, without one,
// its client_id, as in Amazon Cognito access tokens) is one of the
// accepted audiences, and it has not expired.
//
// Signatures RS256, RS384, RS512, ES256, ES384 and ES512 are accepted;
// "none" and the HMAC algorithms are not. Keys are cached for an hour,
// and fetched again (at most once a minute) when a token names a key
// that is not cached.
package jwtauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrInvalid is wrapped by the errors about tokens that are not accepted.
var ErrInvalid = errors.New("jwtauth: token not accepted")

// ErrKeys is wrapped by the errors about the issuer's keys that could not
// be read: the token may be fine, the check could not be made.
var ErrKeys = errors.New("jwtauth: the issuer's keys cannot be read")

// Skew is the clock difference tolerated on exp, nbf and iat.
const Skew = time.Minute

const (
	keysTTL      = time.Hour
	refetchDelay = time.Minute
	maxDocument  = 1 << 20
)

// Verifier checks tokens of one issuer. Create it with New; it is safe
// for concurrent use.
type Verifier struct {
	issuer    string
	audiences []string
	client    *http.Client
	now       func() time.Time

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time // when keys were read; zero: never
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithHTTPClient sets the client that reads the discovery document and
// the key set (default: one with a 10-second timeout).
func WithHTTPClient(c *http.Client) Option { return func(v *Verifier) { v.client = c } }

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// New returns a Verifier of the tokens of issuer (its URL, as the tokens'
// iss claim has it) for audiences.
func New(issuer string, audiences []string, opts ...Option) *Verifier {
	v := &Verifier{issuer: issuer, audiences: audiences, client: &http.Client{Timeout: 10 * time.Second}, now: time.Now}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Claims are a token's claims.
type Claims map[string]any

// Subject is the token's sub claim.
func (c Claims) Subject() string { s, _ := c["sub"].(string); return s }

// Verify checks token (without "Bearer ") and returns its claims. Its
// error wraps ErrInvalid for a token that is not accepted, ErrKeys when
// the issuer's keys cannot be read.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not a signed JWT (three dot-separated parts)", ErrInvalid)
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodePart(parts[0], &hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrInvalid, err)
	}
	hash, ok := algHash(hdr.Alg)
	if !ok {
		return nil, fmt.Errorf("%w: algorithm %q is not accepted", ErrInvalid, hdr.Alg)
	}
	var claims Claims
	if err := decodePart(parts[1], &claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", ErrInvalid, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %w", ErrInvalid, err)
	}
	key, err := v.key(ctx, hdr.Kid)
	if err != nil {
		return nil, err
	}
	h := hash.New()
	h.Write([]byte(parts[0] + "." + parts[1]))
	if err := verifySig(key, hdr.Alg, hash, h.Sum(nil), sig); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := v.checkClaims(claims); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return claims, nil
}

func decodePart(s string, out any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func algHash(alg string) (crypto.Hash, bool) {
	switch alg {
	case "RS256", "ES256":
		return crypto.SHA256, true
	case "RS384", "ES384":
		return crypto.SHA384, true
	case "RS512", "ES512":
		return crypto.SHA512, true
	}
	return 0, false
}

func verifySig(key crypto.PublicKey, alg string, hash crypto.Hash, digest, sig []byte) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if alg[0] != 'R' {
			return fmt.Errorf("algorithm %s with an RSA key", alg)
		}
		if err := rsa.VerifyPKCS1v15(k, hash, digest, sig); err != nil {
			return errors.New("bad signature")
		}
		return nil
	case *ecdsa.PublicKey:
		size := (k.Curve.Params().BitSize + 7) / 8
		if alg[0] != 'E' || len(sig) != 2*size {
			return fmt.Errorf("algorithm %s or signature length %d does not fit the key's curve", alg, len(sig))
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, digest, r, s) {
			return errors.New("bad signature")
		}
		return nil
	}
	return fmt.Errorf("key of type %T", key)
}

func (v *Verifier) checkClaims(c Claims) error {
	if iss, _ := c["iss"].(string); iss != v.issuer {
		return fmt.Errorf("issuer %q is not %q", iss, v.issuer)
	}
	var aud []string
	switch a := c["aud"].(type) {
	case string:
		aud = []string{a}
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok {
				aud = append(aud, s)
			}
		}
	case nil:
		if id, ok := c["client_id"].(string); ok {
			aud = []string{id}
		}
	}
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.audiences, a) }) {
		return fmt.Errorf("audience %v is not one of %v", aud, v.audiences)
	}
	now := v.now()
	exp, ok := numericDate(c["exp"])
	if !ok {
		return errors.New("no exp claim")
	}
	if !now.Before(exp.Add(Skew)) {
		return errors.New("the token has expired")
	}
	for _, name := range []string{"nbf", "iat"} {
		if t, ok := numericDate(c[name]); ok && now.Add(Skew).Before(t) {
			return fmt.Errorf("%s is in the future", name)
		}
	}
	return nil
}

func numericDate(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// key returns the issuer's key kid, reading the key set when it is not
// cached, or stale.
func (v *Verifier) key(ctx context.Context, kid string) (crypto.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	k, ok := v.keys[kid]
	stale := v.fetched.IsZero() || now.Sub(v.fetched) > keysTTL
	if ok && !stale {
		return k, nil
	}
	if !stale && now.Sub(v.fetched) < refetchDelay {
		return nil, fmt.Errorf("%w: no key %q in the issuer's key set", ErrInvalid, kid)
	}
	keys, err := v.fetchKeys(ctx)
	if err != nil {
		if ok {
			return k, nil // keep using a key the issuer had
		}
		return nil, fmt.Errorf("%w: %w", ErrKeys, err)
	}
	v.keys, v.fetched = keys, now
	if k, ok = keys[kid]; !ok {
		return nil, fmt.Errorf("%w: no key %q in the issuer's key set", ErrInvalid, kid)
	}
	return k, nil
}

func (v *Verifier) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(out); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

func (v *Verifier) fetchKeys(ctx context.Context) (map[string]crypto.PublicKey, error) {
	var disc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, strings.TrimRight(v.issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, err
	}
	if disc.JWKSURI == "" {
		return nil, errors.New("the discovery document has no jwks_uri")
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := v.getJSON(ctx, disc.JWKSURI, &set); err != nil {
		return nil, err
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) > 4 {
				continue
			}
			exp := 0
			for _, b := range e {
				exp = exp<<8 | int(b)
			}
			keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
		case "EC":
			var curve elliptic.Curve
			switch k.Crv {
			case "P-256":
				curve = elliptic.P256()
			case "P-384":
				curve = elliptic.P384()
			case "P-521":
				curve = elliptic.P521()
			default:
				continue
			}
			x, err1 := base64.RawURLEncoding.DecodeString(k.X)
			y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
			if err1 != nil || err2 != nil {
				continue
			}
			// The uncompressed point 0x04 || X || Y, each coordinate
			// left-padded to the curve's size; the parser checks that
			// the point is on the curve.
			size := (curve.Params().BitSize + 7) / 8
			if len(x) > size || len(y) > size {
				continue
			}
			point := make([]byte, 1+2*size)
			point[0] = 4
			copy(point[1+size-len(x):1+size], x)
			copy(point[1+2*size-len(y):], y)
			pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
			if err != nil {
				continue
			}
			keys[k.Kid] = pub
		}
	}
	return keys, nil
}

// Middleware returns next behind the check: a request without a bearer
// token the Verifier accepts gets 401 (503 when the issuer's keys cannot
// be read), as problem+json, unless skip (nil: none) says it needs no
// token.
func (v *Verifier) Middleware(next http.Handler, skip func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip != nil && skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != ""
		status, detail := http.StatusUnauthorized, "send a bearer token of the configured issuer: Authorization: Bearer <JWT>"
		if ok {
			_, err := v.Verify(r.Context(), strings.TrimSpace(tok))
			switch {
			case err == nil:
				next.ServeHTTP(w, r)
				return
			case errors.Is(err, ErrKeys):
				status, detail = http.StatusServiceUnavailable, "the token cannot be checked now (the issuer's keys cannot be read); try again"
			default:
				detail = "the bearer token is not accepted: check its signature key, issuer, audience and expiry"
			}
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer`)
		}
		w.WriteHeader(status)
		body, _ := json.Marshal(map[string]any{"type": "urn:superstep:problem:unauthorized", "title": http.StatusText(status), "status": status, "detail": detail, "instance": r.URL.Path})
		_, _ = w.Write(body)
	})
}
