package sim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"testing"
)

// A signature given again for the same key and content is the one the key makes (PKCS#1
// v1.5 is deterministic), for each of two keys over one content; and the memo holds at most
// signMemoSize of them.
func TestSignMemoGivesTheKeysOwnSignature(t *testing.T) {
	keys := []*rsa.PrivateKey{}
	for range 2 {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	content := []byte(`{"alipay_trade_query_response":{"code":"10000","trade_status":"WAIT_BUYER_PAY"}}`)
	digest := sha256.Sum256(content)
	for i, k := range keys {
		want, err := rsa.SignPKCS1v15(nil, k, crypto.SHA256, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			got, err := SignSHA256RSA(k, content)
			if err != nil {
				t.Fatal(err)
			}
			if got != base64.StdEncoding.EncodeToString(want) {
				t.Fatalf("key %d, round %d: the signature is not the key's own", i, round)
			}
			if err := VerifySHA256RSA(&k.PublicKey, content, got); err != nil {
				t.Fatalf("key %d, round %d: %v", i, round, err)
			}
		}
	}
	m := &memo{m: map[[sha256.Size]byte]string{}}
	for i := range signMemoSize + 10 {
		m.put(sha256.Sum256(fmt.Appendf(nil, "content %d", i)), "sig")
		if len(m.m) > signMemoSize {
			t.Fatalf("after %d puts the memo holds %d signatures; at most %d", i+1, len(m.m), signMemoSize)
		}
	}
	if _, ok := m.get(sha256.Sum256(fmt.Appendf(nil, "content %d", signMemoSize+9))); !ok {
		t.Error("the last signature put is not kept")
	}
}
