package http

import (
	"embed"
	"fmt"
	"html"
	"io/fs"
	"mime"
	stdhttp "net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/geoevent/geoevent/core"
)

// The map page: GET / is a page that shows the entities on a map, with
// Leaflet 1.9.4 (http/static/leaflet, its licence beside it) and the
// page's own script, embedded so that building needs no npm and the page
// no network. Its files are served under /map/. The page calls the API of
// the same origin, so it needs no CORS: the queries, GET /fences, and the
// streams GET /feed (fence events) and GET /feed/positions (moves in the
// view; where the server answers 404 the page polls a radius query
// instead). Base-map tiles are optional (Config.MapTiles); without them
// the map has a plain background and a graticule.

//go:embed static
var staticFiles embed.FS

// mapPrefix is the path under which the page's files are served.
const mapPrefix = "/map/"

// staticFile is an embedded file ready to serve.
type staticFile struct {
	body  []byte
	ctype string
}

// staticByPath maps /map/... paths to the embedded files (map.html is
// served at / instead, with the tile URL filled in).
var staticByPath = sync.OnceValue(func() map[string]*staticFile {
	files := map[string]*staticFile{}
	fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFiles.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "text/plain; charset=utf-8" // LICENSE
		}
		files[mapPrefix+strings.TrimPrefix(p, "static/")] = &staticFile{body: b, ctype: ctype}
		return nil
	})
	return files
})

// CheckMapTiles reports whether u can be the map page's base-map tiles:
// an http or https URL template such as
// https://tile.openstreetmap.org/{z}/{x}/{y}.png, with {z}, {x} and {y}
// (and optionally {s}, a subdomain). "" is no tiles.
func CheckMapTiles(u string) error {
	if u == "" {
		return nil
	}
	for _, p := range []string{"{z}", "{x}", "{y}"} {
		if !strings.Contains(u, p) {
			return fmt.Errorf("map tiles URL %q lacks %s: give a template such as https://tile.openstreetmap.org/{z}/{x}/{y}.png", u, p)
		}
	}
	parsed, err := url.Parse(strings.NewReplacer("{s}", "a", "{z}", "0", "{x}", "0", "{y}", "0", "{r}", "").Replace(u))
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return fmt.Errorf("map tiles URL %q is not an http:// or https:// URL template with a host", u)
	}
	return nil
}

// tileSource is the Content-Security-Policy source of a tiles URL: its
// scheme and host, a {s} subdomain as a wildcard.
func tileSource(tiles string) string {
	if CheckMapTiles(tiles) != nil || tiles == "" {
		return ""
	}
	u, _ := url.Parse(strings.NewReplacer("{s}", "subdomain", "{z}", "0", "{x}", "0", "{y}", "0", "{r}", "").Replace(tiles))
	host := u.Host
	if strings.Contains(tiles, "{s}.") {
		host = strings.Replace(host, "subdomain.", "*.", 1)
	}
	return " " + u.Scheme + "://" + host
}

// serveMap answers a request for the map page or one of its files, and
// reports whether the path was one of them.
func (g *Gateway) serveMap(c *call) bool {
	p := c.r.URL.Path
	var f *staticFile
	page := p == "/"
	if page {
		f = g.mapPage()
	} else if strings.HasPrefix(p, mapPrefix) && p != mapPrefix+"map.html" {
		f = staticByPath()[p]
	}
	if f == nil {
		return false
	}
	if c.r.Method != "GET" && c.r.Method != "HEAD" {
		c.w.Header().Set("Allow", "GET, HEAD")
		g.serve(c, func(c *call) *failure {
			c.form = lenientForm(c.r)
			return &failure{info: core.UnknownOperation, status: stdhttp.StatusMethodNotAllowed,
				msg: fmt.Sprintf("%s %s: the map page's files take GET and HEAD", c.r.Method, p)}
		})
		return true
	}
	h := c.w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	if page {
		// The page runs only its own scripts and reads only this API;
		// images are its own, data: URLs and the tiles.
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"+
			tileSource(g.cfg.MapTiles)+"; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	}
	if strings.HasPrefix(p, mapPrefix+"leaflet/") {
		h.Set("Cache-Control", "public, max-age=86400") // a fixed release
	} else {
		h.Set("Cache-Control", "no-cache") // the page's own: a new build serves new ones
	}
	h.Set("Content-Length", strconv.Itoa(len(f.body)))
	c.w.WriteHeader(stdhttp.StatusOK)
	if c.r.Method != "HEAD" {
		c.w.Write(f.body)
	}
	return true
}

// mapPage is map.html with this gateway's tile URL in its meta tag
// (escaped: the page reads it as text).
func (g *Gateway) mapPage() *staticFile {
	src := staticByPath()[mapPrefix+"map.html"]
	body := strings.Replace(string(src.body), "{{TILES}}", html.EscapeString(g.cfg.MapTiles), 1)
	return &staticFile{body: []byte(body), ctype: src.ctype}
}
