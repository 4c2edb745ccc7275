package http

import (
	"fmt"
	stdhttp "net/http"
	"net/url"
	"strings"
)

// Cross-origin requests (CORS). A browser lets a page call another origin
// -- and read the answer -- only when the server says the page's origin
// may: for a request with a JSON body (not a "simple" request) it first
// asks with a preflight (OPTIONS with Access-Control-Request-Method). The
// gateway allows the origins of Config.CORSOrigins and no others by
// default. For an allowed origin every answer carries
// Access-Control-Allow-Origin (the origin) and Vary: Origin, and a
// preflight to an API path is 204 with the path's methods; for any other
// origin answers carry no CORS header and a preflight is 403. The
// "simple" cross-site POST a browser sends without asking (form or
// text/plain bodies) is refused by the Content-Type check (415) whatever
// the origin, so it writes nothing.

// corsMaxAge is how long (seconds) a browser may keep a preflight's answer.
const corsMaxAge = "600"

var (
	varyOrigin       = []string{"Origin"}
	corsAllowHeaders = []string{"Content-Type"}
	corsMaxAgeHeader = []string{corsMaxAge}
)

// corsPolicy is the set of allowed origins.
type corsPolicy struct {
	any     bool            // "*"
	origins map[string]bool // lowercase scheme://host[:port]
}

// CheckCORSOrigin reports whether origin is a valid entry of
// Config.CORSOrigins: "*", or scheme://host[:port] with no path (a
// trailing "/" aside), query or user.
func CheckCORSOrigin(origin string) error {
	_, err := normalizeOrigin(origin)
	return err
}

func normalizeOrigin(o string) (string, error) {
	if o == "*" {
		return o, nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, " \t,") {
		return "", fmt.Errorf("CORS origin %q: want scheme://host[:port], as a browser sends it (http://localhost:3000), or *", o)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

func newCORSPolicy(origins []string) (corsPolicy, error) {
	p := corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		n, err := normalizeOrigin(strings.TrimSpace(o))
		if err != nil {
			return corsPolicy{}, fmt.Errorf("http: Config.CORSOrigins: %w", err)
		}
		if n == "*" {
			p.any = true
		} else {
			p.origins[n] = true
		}
	}
	return p, nil
}

// allows reports whether a request's Origin header is allowed.
func (p *corsPolicy) allows(origin string) bool {
	if p.any {
		return true
	}
	if len(p.origins) == 0 {
		return false
	}
	return p.origins[strings.ToLower(origin)]
}

// answerPreflight answers a preflight from an allowed origin for e's path:
// 204 with the path's methods (the request's method aside: the browser
// checks it against them), the one request header the API needs
// (Content-Type) and how long to keep the answer. c's CORS headers are set.
func (g *Gateway) answerPreflight(c *call, e *endpoint) {
	h := c.w.Header()
	h["Access-Control-Allow-Methods"] = []string{e.allow}
	h["Access-Control-Allow-Headers"] = corsAllowHeaders
	h["Access-Control-Max-Age"] = corsMaxAgeHeader
	c.w.WriteHeader(stdhttp.StatusNoContent)
}
