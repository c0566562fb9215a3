package httpapi

import (
	_ "embed"
	"net/http"
)

// routeMux is the API's http.ServeMux with a record of every pattern registered on it.
// Routes can be added only through it (the ServeMux itself is not reachable from a route
// function), so the record is the complete list, and the OpenAPI test compares the
// document with it: a route added without its documentation fails that test.
type routeMux struct {
	mux      *http.ServeMux
	patterns []string
	// guard, if set, wraps every route's handler: it returns h, or h behind a check the
	// route of pattern needs (Server.sameSiteWrites).
	guard func(pattern string, h http.Handler) http.Handler
}

func newRouteMux() *routeMux { return &routeMux{mux: http.NewServeMux()} }

// HandleFunc registers h for pattern ("METHOD /path/{param}").
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Handle registers h for pattern.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	if m.guard != nil {
		h = m.guard(pattern, h)
	}
	m.mux.Handle(pattern, h)
}

// Routes lists the patterns the API serves, as registered (the catch-all 404 aside).
func (s *Server) Routes() []string {
	m := newRouteMux()
	s.register(m)
	return m.patterns
}

// openAPI is the OpenAPI 3 document of the whole API, written by hand.
//
//go:embed openapi.json
var openAPI []byte

// serveOpenAPI is GET /openapi.json.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPI)
}
