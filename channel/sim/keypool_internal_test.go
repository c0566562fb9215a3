package sim

import (
	"crypto/rsa"
	"os"
	"strings"
	"testing"
)

// This package's tests make dozens of fresh key sets: they take their keys from the pool
// every test binary uses (simtest.UseKeyPool, which this package cannot import).
var poolPEM []byte

func init() {
	var err error
	if poolPEM, err = os.ReadFile("simtest/keypool.pem"); err == nil {
		err = UseKeyPool(poolPEM)
	}
	if err != nil {
		panic(err)
	}
}

// TestKeyPoolGivesEachSetDistinctKeysInTurn: with a pool installed, a fresh key set's ten RSA
// keys are the pool's next ten, all different, and the next set's are the ten after; a
// pool that is too small, repeats a key or holds another size is refused.
func TestKeyPoolGivesEachSetDistinctKeysInTurn(t *testing.T) {
	pemKeys := poolPEM
	all, err := parseKeyPool(pemKeys)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < keyPoolMin {
		t.Fatalf("keypool.pem holds %d keys", len(all))
	}
	inPool := map[string]int{}
	for i, k := range all {
		inPool[k.N.String()] = i
	}
	blocks := strings.SplitAfter(string(pemKeys), "-----END RSA PRIVATE KEY-----\n")
	blocks = blocks[:len(blocks)-1]

	seen := map[string]bool{}
	var positions []int
	for range 2 {
		keys, err := GenerateKeys()
		if err != nil {
			t.Fatal(err)
		}
		set := []*rsa.PrivateKey{keys.AppPrivateKey, keys.AlipayPrivateKey, keys.InApp.AppPrivateKey, keys.InApp.AlipayPrivateKey,
			keys.Wechat.MerchantPrivateKey, keys.Wechat.PlatformPrivateKey, keys.Wechat.PlatformCAKey, keys.Wechat.PlatformCertificateKey}
		for _, k := range set {
			i, ok := inPool[k.N.String()]
			if !ok {
				t.Fatal("a fresh set's key is not one of the pool's")
			}
			if seen[k.N.String()] {
				t.Fatalf("pool key %d given twice in two sets", i)
			}
			seen[k.N.String()] = true
			positions = append(positions, i)
		}
	}
	t.Logf("pool positions of two sets: %v", positions)

	for _, bad := range []struct{ name, pem, want string }{
		{"too few", strings.Join(blocks[:keyPoolMin-1], ""), "needs at least"},
		{"a key twice", strings.Join(blocks[:keyPoolMin-1], "") + blocks[0], "appears twice"},
		{"not a key", strings.Join(blocks[:keyPoolMin], "") + "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", "key pool"},
	} {
		if err := UseKeyPool([]byte(bad.pem)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: UseKeyPool = %v; want an error with %q", bad.name, err, bad.want)
		}
	}
}
