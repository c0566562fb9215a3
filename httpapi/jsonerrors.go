package httpapi

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"
)

// jsonProblem says what is wrong with a request body that did not decode into dst, in the
// API's words: the field and the kind of JSON value it takes ("items.qty must be a whole
// number"), or where the body stops being JSON. Go's own messages name Go types (int64,
// struct { … }) and the decoder's state ("invalid character 'o' in literal null"), which
// mean nothing to a client; none of them reaches one.
func jsonProblem(err error, dst any) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var timeErr *time.ParseError
	switch {
	case errors.As(err, &typeErr):
		return typeProblem(typeErr, reflect.TypeOf(dst))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", syntaxErr.Offset) // counted from 1: the byte it stopped at
	case errors.Is(err, io.EOF):
		return "the body is empty: send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is not valid JSON: it ends before its last value does"
	case errors.As(err, &timeErr), strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		return `a time in the body must be a string in RFC 3339, such as "2026-11-24T10:00:00+08:00"`
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "the body has an unknown field " + field
	}
	// A type's own decoder refused its value; its words may be Go's.
	return "a value in the body is not of the kind its field takes"
}

// typeProblem words a value of the wrong kind: the field (its path, as the body spells it)
// and what it must be. A field that holds a list or a map names what each of its elements
// must be.
func typeProblem(e *json.UnmarshalTypeError, dst reflect.Type) string {
	want := kindWords(e.Type, e.Value)
	if e.Field == "" {
		return "the body must be a JSON object"
	}
	field, declared := fieldPath(dst, strings.Split(e.Field, "."))
	if declared != nil {
		for declared.Kind() == reflect.Pointer {
			declared = declared.Elem()
		}
		if declared != e.Type {
			switch declared.Kind() {
			case reflect.Slice, reflect.Array:
				return fmt.Sprintf("each element of %s must be %s", field, want)
			case reflect.Map:
				return fmt.Sprintf("each value in %s must be %s", field, want)
			}
		}
	}
	return fmt.Sprintf("%s must be %s", field, want)
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	textUnmarshalType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// kindWords is the kind of JSON value a Go type takes, in a client's words; value is the
// decoder's account of what came ("string", "number 1.5"), which tells a whole number too
// large for its field from one that is not whole.
func kindWords(t reflect.Type, value string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return "a time: a string in RFC 3339"
	}
	if t.Kind() != reflect.String && reflect.PointerTo(t).Implements(textUnmarshalType) {
		return "a string"
	}
	number, isNumber := strings.CutPrefix(value, "number ")
	whole := isNumber && !strings.ContainsAny(number, ".eE")
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if whole { // whole, but out of range
			bits := t.Bits()
			return fmt.Sprintf("a whole number from %d to %d", int64(-1)<<(bits-1), int64(math.MaxInt64>>(64-bits)))
		}
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if whole {
			return fmt.Sprintf("a whole number from 0 to %d", uint64(math.MaxUint64>>(64-t.Bits())))
		}
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another kind of value"
}

// fieldPath follows a decoder's path to a field from t (through lists' and maps' elements
// and pointers) and returns it as the body spells it, without the Go names of embedded
// structs the decoder puts in it ("addressJSON.phone" is "phone"), with the field's declared
// type; if the path leads nowhere, the path as it came and nil.
func fieldPath(t reflect.Type, path []string) (string, reflect.Type) {
	var shown []string
	for _, name := range path {
		for {
			switch t.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
				t = t.Elem()
				continue
			}
			break
		}
		if t.Kind() != reflect.Struct {
			return strings.Join(path, "."), nil
		}
		f, ok := t.FieldByName(name)
		if ok && f.Anonymous && f.Tag.Get("json") == "" { // an embedded struct: its fields are the outer one's
			t = f.Type
			continue
		}
		ft := structField(t, name)
		if ft == nil {
			return strings.Join(path, "."), nil
		}
		shown, t = append(shown, name), ft
	}
	return strings.Join(shown, "."), t
}

// structField is the type of struct t's field that JSON names name, looking into embedded
// structs as encoding/json does.
func structField(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if ft := structField(inner, name); ft != nil {
					return ft
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if strings.EqualFold(tag, name) {
			return f.Type
		}
	}
	return nil
}
