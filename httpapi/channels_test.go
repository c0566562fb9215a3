package httpapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"orderpay"
)

// jsonNames are the JSON names of a struct type's fields.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		names = append(names, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	slices.Sort(names)
	return names
}

// The document's ChannelDescription, what GET /admin/channels gives for each channel, names
// exactly the fields of orderpay.ChannelDescription, and its platform certificates those of
// orderpay.PlatformCertificates: a field added to one and not the other fails here.
func TestOpenAPIChannelDescriptionIsTheServedShape(t *testing.T) {
	t.Parallel()
	type object struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var doc struct {
		Paths      map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]object `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc.Paths["/admin/channels"]), `"$ref": "#/components/schemas/ChannelDescription"`) {
		t.Fatalf("GET /admin/channels does not refer to ChannelDescription: %s", doc.Paths["/admin/channels"])
	}
	names := func(o object) []string {
		var out []string
		for k := range o.Properties {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	d := doc.Components.Schemas["ChannelDescription"]
	if got, want := names(d), jsonNames(reflect.TypeFor[orderpay.ChannelDescription]()); !slices.Equal(got, want) {
		t.Fatalf("ChannelDescription documents %v; the served shape has %v", got, want)
	}
	var pc object
	if err := json.Unmarshal(d.Properties["platform_certificates"], &pc); err != nil {
		t.Fatal(err)
	}
	if got, want := names(pc), jsonNames(reflect.TypeFor[orderpay.PlatformCertificates]()); !slices.Equal(got, want) {
		t.Fatalf("platform_certificates documents %v; the served shape has %v", got, want)
	}
}
