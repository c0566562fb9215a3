package httpapi

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
)

// A NUL anywhere in a body is refused by decode, whatever the Go shape of the field it would
// land in: a top-level field, a field of an embedded unexported struct (the address change's
// body), a nested struct, a pointer to one, a slice of them, a map's key or value, a member
// kept raw; a clean body of the same shape decodes.
func TestDecodeRefusesNULInEveryField(t *testing.T) {
	type inner struct {
		Note string `json:"note"`
	}
	type body struct {
		BuyerID string `json:"buyer_id"`
		addressJSON
		Nested  inner             `json:"nested"`
		Ptr     *inner            `json:"ptr"`
		Items   []inner           `json:"items"`
		Tags    []string          `json:"tags"`
		Labels  map[string]string `json:"labels"`
		Raw     json.RawMessage   `json:"raw"`
		Untyped any               `json:"untyped"`
	}
	const clean = `{"buyer_id":"b","name":"n","phone":"p","detail":"d","nested":{"note":"x"},"ptr":{"note":"x"},` +
		`"items":[{"note":"x"}],"tags":["x"],"labels":{"k":"v"},"raw":{"deep":["x"]},"untyped":{"a":["x"]}}`
	var ok body
	if err := decode(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(clean)), &ok); err != nil {
		t.Fatalf("the clean body: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"a top-level field", `"buyer_id":"b"`, `"buyer_id":"b\u0000"`},
		{"a field of an embedded struct", `"detail":"d"`, `"detail":"\u0000d"`},
		{"a nested struct's field", `"nested":{"note":"x"}`, `"nested":{"note":"x\u0000"}`},
		{"a pointed-to struct's field", `"ptr":{"note":"x"}`, `"ptr":{"note":"x\u0000"}`},
		{"a field of a struct in a slice", `"items":[{"note":"x"}]`, `"items":[{"note":"x\u0000"}]`},
		{"a string in a slice", `"tags":["x"]`, `"tags":["x\u0000"]`},
		{"a map's key", `"labels":{"k"`, `"labels":{"k\u0000"`},
		{"a map's value", `"k":"v"`, `"k":"v\u0000"`},
		{"a raw member, deep", `"raw":{"deep":["x"]}`, `"raw":{"deep":["x\u0000"]}`},
		{"an untyped member", `"untyped":{"a":["x"]}`, `"untyped":{"a":["\u0000"]}`},
		{"the name of an unknown field", `"buyer_id":"b",`, `"buyer_id":"b","zz\u0000":1,`},
	} {
		name := tc.name
		if !strings.Contains(clean, tc.from) {
			t.Fatalf("%s: %s is not in the clean body", name, tc.from)
		}
		raw := strings.Replace(clean, tc.from, tc.to, 1)
		var got body
		err := decode(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(raw)), &got)
		var e *orderpay.Error
		if !errors.As(err, &e) || e.Code != orderpay.EINVALID || !strings.Contains(e.Message, "NUL") {
			t.Errorf("%s (%s): %v, want EINVALID for the NUL", name, raw, err)
		}
	}
}

// Every request body the API reads goes through decode, so the NUL check above covers every
// body type a handler declares, now and later: in this package's code, a request's Body is
// read only by decode (and by the channel notification handler, which logs what it gets
// escaped and verifies it), and nothing but decode parses JSON from a request.
func TestEveryRequestBodyIsReadByDecode(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	decodes := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "decode" {
						decodes++
					}
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
						if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "json" &&
							(sel.Sel.Name == "Unmarshal" || sel.Sel.Name == "NewDecoder") &&
							fn.Name.Name != "decode" && fn.Name.Name != "bodyHoldsNUL" {
							t.Errorf("%s: %s parses JSON with json.%s; request bodies go through decode",
								fset.Position(n.Pos()), fn.Name.Name, sel.Sel.Name)
						}
					}
				case *ast.SelectorExpr:
					if n.Sel.Name == "Body" && readsRequest(fn, n.X) && fn.Name.Name != "decode" && fn.Name.Name != "notify" {
						t.Errorf("%s: %s reads a request's Body itself; request bodies go through decode",
							fset.Position(n.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	if decodes < 20 {
		t.Fatalf("found %d calls of decode; the scan is not reading the handlers", decodes)
	}
}

// readsRequest reports whether x names one of fn's *http.Request parameters.
func readsRequest(fn *ast.FuncDecl, x ast.Expr) bool {
	id, ok := x.(*ast.Ident)
	if !ok {
		return false
	}
	for _, p := range fn.Type.Params.List {
		star, ok := p.Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if sel, ok := star.X.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Request" {
			continue
		}
		for _, n := range p.Names {
			if n.Name == id.Name {
				return true
			}
		}
	}
	return false
}
