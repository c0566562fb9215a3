package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

type openAPIOperation struct {
	// Tags is a list in OpenAPI 3: a bare string fails to decode here.
	Tags       []string `json:"tags"`
	Parameters []struct {
		Name string `json:"name"`
		In   string `json:"in"`
	} `json:"parameters"`
	Responses map[string]json.RawMessage `json:"responses"`
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// pagePatterns are the routes pageRoutes registers: the buyer's pages and the operations
// console, HTML for browsers, not API for clients, so the document leaves them out. The set
// is read from pageRoutes itself on a fresh mux, so a page added there is exempt without a
// second list here, and nothing registered anywhere else can be.
func pagePatterns() map[string]bool {
	m := newRouteMux()
	(&Server{}).pageRoutes(m)
	pages := map[string]bool{}
	for _, p := range m.patterns {
		pages[p] = true
	}
	return pages
}

// The OpenAPI document and the real routes agree both ways: every route the server
// registers is documented with its method, and every documented path and method is
// served by that very route (the mux, asked for a concrete URL, picks it). A route added
// on any branch without its documentation fails here.
func TestOpenAPIDocumentsEveryRouteAndNothingElse(t *testing.T) {
	t.Parallel()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	// Every optional part on, so that every route is registered.
	s := &Server{Logger: slog.New(slog.DiscardHandler)}
	mux := newRouteMux()
	s.register(mux)
	if !slices.Equal(mux.patterns, s.Routes()) {
		t.Fatal("Routes() is not the list register makes")
	}

	pages := pagePatterns()
	if len(pages) == 0 {
		t.Fatal("pageRoutes registers nothing: the page exemption is broken")
	}
	// The exemption covers only pages: a GET outside the API's prefixes, with a method.
	for p := range pages {
		method, path, _ := strings.Cut(p, " ")
		if method != http.MethodGet || strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/admin/") || strings.HasPrefix(path, "/notify/") {
			t.Errorf("pageRoutes registers %q, which is not a page: register API routes elsewhere, and document them", p)
		}
	}

	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			route := strings.ToUpper(method) + " " + path
			documented[route] = true
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Errorf("%s: %v", route, err)
				continue
			}
			if len(op.Tags) == 0 {
				t.Errorf("%s has no tag", route)
			}
			if len(op.Responses) == 0 {
				t.Errorf("%s documents no response", route)
			}
			// Each {param} of the path is declared as a path parameter, and no other.
			want := []string{}
			for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
				want = append(want, m[1])
			}
			got := []string{}
			for _, p := range op.Parameters {
				if p.In == "path" {
					got = append(got, p.Name)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Errorf("%s: path parameters %v, want %v", route, got, want)
			}
			// The mux serves a concrete URL of this path and method with this route.
			req := httptest.NewRequest(strings.ToUpper(method), pathParam.ReplaceAllString(path, "x1"), nil)
			if _, pattern := mux.mux.Handler(req); pattern != route {
				t.Errorf("documented %s, but the server matches that request to %q", route, pattern)
			}
		}
	}
	registered := map[string]bool{}
	for _, pattern := range mux.patterns {
		if pages[pattern] {
			continue
		}
		if !strings.Contains(pattern, " ") {
			// A pattern without a method answers every method.
			t.Errorf("route %q has no method; register one route per method", pattern)
			continue
		}
		registered[pattern] = true
		if !documented[pattern] {
			t.Errorf("route %s is not in httpapi/openapi.json", pattern)
		}
	}
	for route := range documented {
		switch {
		case pages[route]:
			t.Errorf("openapi.json documents %s, a page of pageRoutes, not API", route)
		case !registered[route]:
			t.Errorf("openapi.json documents %s, which the server does not register", route)
		}
	}
	if len(registered) < 20 {
		t.Fatalf("only %d routes found: the walk is broken", len(registered))
	}
}

// Every $ref in the document points at a schema it defines.
func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`"\$ref":\s*"([^"]+)"`).FindAllSubmatch(openAPI, -1)
	if len(refs) == 0 {
		t.Fatal("no $ref at all")
	}
	for _, m := range refs {
		name, ok := strings.CutPrefix(string(m[1]), "#/components/schemas/")
		if _, defined := doc.Components.Schemas[name]; !ok || !defined {
			t.Errorf("$ref %s does not resolve", m[1])
		}
	}
}

// GET /openapi.json serves the document, without the admin token.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	h := (&Server{Logger: slog.New(slog.DiscardHandler)}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") || !bytes.Equal(body, openAPI) {
		t.Fatalf("GET /openapi.json: %d %s, %d bytes", rec.Code, rec.Header().Get("Content-Type"), len(body))
	}
}
