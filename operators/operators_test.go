package operators_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderpay"
	"orderpay/operators"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "operators.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The lines `operators add` prints make a file that lets exactly that token in, as that
// operator with that role, and no other token.
func TestEntryAuthenticatesItsTokenOnly(t *testing.T) {
	li, err := operators.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	wang, _ := operators.NewToken()
	if len(li) != 43 || li == wang {
		t.Fatalf("tokens %q, %q", li, wang)
	}
	set, err := operators.Load(write(t, operators.Entry("li.wei", orderpay.RoleOperator, li)+"\n"+operators.Entry("wang", orderpay.RoleViewer, wang)))
	if err != nil {
		t.Fatal(err)
	}
	if op, ok := set.Authenticate(li); !ok || op.Name != "li.wei" || op.Role != orderpay.RoleOperator || op.Actor() != "operator:li.wei" {
		t.Fatalf("li's token: %+v, %v", op, ok)
	}
	if op, ok := set.Authenticate(wang); !ok || op.Role != orderpay.RoleViewer {
		t.Fatalf("wang's token: %+v, %v", op, ok)
	}
	for _, bad := range []string{"", li + "x", strings.ToUpper(li), operators.Hash(li)} {
		if op, ok := set.Authenticate(bad); ok {
			t.Errorf("token %q let in %+v", bad, op)
		}
	}
	if got := set.Names(); len(got) != 2 || got[0] != "li.wei" {
		t.Fatalf("names %v", got)
	}
}

func TestLoadRefusesWhatWouldBeAMistake(t *testing.T) {
	h := operators.Hash("some-token")
	for name, body := range map[string]string{
		"unknown key": `[[operator]]` + "\nname = \"li\"\nrole = \"admin\"\ntoken_sha256 = \"" + h + "\"\ntoken = \"plain\"\n",
		"bad role":    `[[operator]]` + "\nname = \"li\"\nrole = \"root\"\ntoken_sha256 = \"" + h + "\"\n",
		"bad name":    `[[operator]]` + "\nname = \"Li Wei\"\nrole = \"admin\"\ntoken_sha256 = \"" + h + "\"\n",
		"short hash":  `[[operator]]` + "\nname = \"li\"\nrole = \"admin\"\ntoken_sha256 = \"abc\"\n",
		"name twice":  operators.Entry("li", orderpay.RoleAdmin, "a") + operators.Entry("li", orderpay.RoleViewer, "b"),
		"token twice": operators.Entry("li", orderpay.RoleAdmin, "a") + operators.Entry("wang", orderpay.RoleViewer, "a"),
		"no operator": "# nobody\n",
		"not toml":    "[[operator]\n",
	} {
		if _, err := operators.Load(write(t, body)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestRolesAllowWhatTheRolesBeforeThemAllow(t *testing.T) {
	for _, c := range []struct {
		have, need orderpay.Role
		ok         bool
	}{
		{orderpay.RoleViewer, orderpay.RoleViewer, true}, {orderpay.RoleViewer, orderpay.RoleOperator, false},
		{orderpay.RoleOperator, orderpay.RoleViewer, true}, {orderpay.RoleOperator, orderpay.RoleOperator, true},
		{orderpay.RoleOperator, orderpay.RoleAdmin, false}, {orderpay.RoleAdmin, orderpay.RoleAdmin, true},
		{"root", orderpay.RoleViewer, false}, {orderpay.RoleAdmin, "root", false},
	} {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%s allows %s: %v", c.have, c.need, got)
		}
	}
}
