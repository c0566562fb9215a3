package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// verifyAsDocumented is docs/payments-api.md's Go verification of a webhook, word for word
// but its name (TestPaymentsAPIDocShowsVerifyAsDocumented keeps the two the same); the
// apps' test receivers check every delivery with it as well as with webhook.Verify.
func verifyAsDocumented(secret []byte, h http.Header, body []byte, now time.Time) bool {
	ts, delivery := h.Get("X-Orderpay-Timestamp"), h.Get("X-Orderpay-Delivery")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute || delivery == "" {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "." + delivery + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, v := range strings.Split(h.Get("X-Orderpay-Signature"), ",") {
		sig, ok := strings.CutPrefix(strings.TrimSpace(v), "v2=")
		got, err := hex.DecodeString(sig)
		if ok && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// codeBlock returns the text of the first fenced block of lang in doc after the line that
// starts with after, or "".
func codeBlock(doc, after, lang string) string {
	_, rest, ok := strings.Cut(doc, "\n"+after)
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	if !ok {
		return ""
	}
	block, _, _ := strings.Cut(rest, "```\n")
	return block
}

func paymentsAPIDoc(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "payments-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// The Go function the payments API's guide tells an app to verify its webhooks with is
// the one the apps' tests verify every delivered webhook with.
func TestPaymentsAPIDocShowsVerifyAsDocumented(t *testing.T) {
	t.Parallel()
	block := codeBlock(paymentsAPIDoc(t), "In Go, with the standard library only", "go")
	doc, _, ok := strings.Cut(block, "\n}\n")
	if !ok || !strings.HasPrefix(doc, "func verify(") {
		t.Fatalf("no func verify in the guide's Go block:\n%s", block)
	}
	src, err := os.ReadFile("webhookrecipe_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "\nfunc verifyAsDocumented(")
	code, _, _ = strings.Cut(code, "\n}\n")
	if want := "func verify(" + code; doc != want {
		t.Errorf("the guide's verify:\n%s\nis not the tests' verifyAsDocumented:\n%s", doc, want)
	}
}

// shellVerify runs the guide's bash verification of a delivered webhook and returns what it
// printed (genuine or forged), or "" when bash or openssl is missing (logged; the test goes
// on).
func shellVerify(t *testing.T, secret string, h http.Header, body []byte) string {
	t.Helper()
	script := codeBlock(paymentsAPIDoc(t), "In bash, with the raw body saved to", "sh")
	if !strings.Contains(script, "openssl") {
		t.Fatalf("no bash verification in the guide:\n%s", script)
	}
	for _, tool := range []string{"bash", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("%s is not installed: the guide's bash verification is not tried", tool)
			return ""
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SECRET="+secret, "TS="+h.Get("X-Orderpay-Timestamp"),
		"DELIVERY="+h.Get("X-Orderpay-Delivery"), "SIG="+h.Get("X-Orderpay-Signature"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's bash verification: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
