// Package operators reads the operators file: the people who use the console and the admin
// API, each with a name, a role (orderpay.Role) and the SHA-256 of their bearer token. The
// tokens themselves are never stored: a stolen file names the operators but lets nobody in.
//
//	[[operator]]
//	name = "li.wei"
//	role = "operator"
//	token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//
// `orderpay operators add NAME ROLE` makes a token and prints it with the lines to paste.
package operators

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"

	"orderpay"
)

// TokenBytes is how much randomness a token made by NewToken carries.
const TokenBytes = 32

// file is the operators file as written.
type file struct {
	Operators []entry `toml:"operator"`
}

type entry struct {
	Name        string `toml:"name"`
	Role        string `toml:"role"`
	TokenSHA256 string `toml:"token_sha256"`
}

// Set is the operators of one file, by the hash of their token.
type Set struct {
	byHash map[[sha256.Size]byte]orderpay.Operator
	names  []string
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidName reports whether name can name an operator: 1 to 64 lower-case letters, digits,
// dots, underscores or hyphens, starting with a letter or digit (it appears in histories
// as operator:<name>).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Load reads and checks the operators file at path: unknown keys, a bad name or role, a hash
// that is not 64 hex digits, a name or a token given twice are errors.
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operators file: %w", err)
	}
	var f file
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		return nil, fmt.Errorf("operators file %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("operators file %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	s := &Set{byHash: map[[sha256.Size]byte]orderpay.Operator{}}
	seen := map[string]bool{}
	for i, e := range f.Operators {
		where := fmt.Sprintf("operators file %s: operator %d", path, i+1)
		if e.Name != "" {
			where += " (" + e.Name + ")"
		}
		role := orderpay.Role(e.Role)
		switch {
		case !ValidName(e.Name):
			return nil, fmt.Errorf("%s: name must be 1 to 64 lower-case letters, digits, '.', '_' or '-'", where)
		case seen[e.Name]:
			return nil, fmt.Errorf("%s: the name is given twice", where)
		case !role.Valid():
			return nil, fmt.Errorf("%s: role must be viewer, operator or admin, not %q", where, e.Role)
		}
		raw, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%s: token_sha256 must be the 64 hex digits of the token's SHA-256 (orderpay operators add prints it)", where)
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		if _, dup := s.byHash[h]; dup {
			return nil, fmt.Errorf("%s: the same token as another operator", where)
		}
		seen[e.Name] = true
		s.byHash[h] = orderpay.Operator{Name: e.Name, Role: role}
		s.names = append(s.names, e.Name)
	}
	if len(s.byHash) == 0 {
		return nil, fmt.Errorf("operators file %s: no [[operator]]", path)
	}
	return s, nil
}

// Authenticate returns the operator whose token this is. The token is hashed first, so the
// lookup never compares secrets; the final comparison of hashes runs in constant time.
func (s *Set) Authenticate(token string) (orderpay.Operator, bool) {
	if s == nil || token == "" {
		return orderpay.Operator{}, false
	}
	h := sha256.Sum256([]byte(token))
	for k, op := range s.byHash {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			return op, true
		}
	}
	return orderpay.Operator{}, false
}

// Names lists the operators, in the file's order.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// NewToken makes a bearer token: 32 random bytes, base64url without padding (43 characters).
func NewToken() (string, error) {
	var b [TokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Hash is the token's SHA-256 in hex, as token_sha256 holds it.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Entry is the [[operator]] table of one operator, to paste into the file.
func Entry(name string, role orderpay.Role, token string) string {
	return fmt.Sprintf("[[operator]]\nname = %q\nrole = %q\ntoken_sha256 = %q\n", name, string(role), Hash(token))
}
