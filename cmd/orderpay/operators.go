package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"orderpay"
	"orderpay/operators"
)

const operatorsUsage = `usage: orderpay operators add NAME ROLE

Makes a bearer token for a new operator of the console and the admin API, and prints it
with the [[operator]] lines to add to the file --operators-file names. The file keeps only
the token's SHA-256; give the token to the operator and keep no other copy.

  NAME  1 to 64 lower-case letters, digits, '.', '_' or '-' (shown as operator:NAME)
  ROLE  viewer    reads everything
        operator  also ships, reviews after-sales, confirms payments by hand, retries and
                  resolves refunds, resends webhooks
        admin     also manages SKUs, coupons, the blocklist and reconciliation runs
`

// runOperators is `orderpay operators add NAME ROLE`.
func runOperators(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && args[0] == "help" {
		fmt.Fprint(stdout, operatorsUsage)
		return nil
	}
	sub := ""
	if len(args) > 0 && args[0] == "add" {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("orderpay operators add", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), operatorsUsage) }
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if sub == "" || fs.NArg() != 2 {
		fmt.Fprint(stderr, operatorsUsage)
		return errUsage
	}
	args = append([]string{sub}, fs.Args()...)
	name, role := args[1], orderpay.Role(args[2])
	if !operators.ValidName(name) {
		return fmt.Errorf("operators add: %q is not a name: 1 to 64 lower-case letters, digits, '.', '_' or '-'", name)
	}
	if !role.Valid() {
		roles := make([]string, len(orderpay.Roles))
		for i, r := range orderpay.Roles {
			roles[i] = string(r)
		}
		return fmt.Errorf("operators add: the role must be %s, not %q", strings.Join(roles, ", "), role)
	}
	token, err := operators.NewToken()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# %s's token (give it to them; it is not kept anywhere):\n#   %s\n# add to the operators file:\n%s", name, token,
		operators.Entry(name, role, token))
	return nil
}
