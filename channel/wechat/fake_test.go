package wechat_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"orderpay/channel/sim"
)

// signHeaders signs body as WeChat Pay signs answers and notifications, at time at, with
// key, under serial.
func signHeaders(t *testing.T, key *rsa.PrivateKey, serial string, at time.Time, body []byte) http.Header {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	nonce := "n0nce" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sig, err := sim.SignSHA256RSA(key, []byte(ts+"\n"+nonce+"\n"+string(body)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{
		"Wechatpay-Timestamp":      {ts},
		"Wechatpay-Nonce":          {nonce},
		"Wechatpay-Signature":      {sig},
		"Wechatpay-Serial":         {serial},
		"Wechatpay-Signature-Type": {"WECHATPAY2-SHA256-RSA2048"},
	}
}

// fakeAnswer is what a fake WeChat Pay answers every call with.
type fakeAnswer struct {
	status int
	body   string
	// sign with the platform key (or signKey) at the wall clock's time (or at); unsigned
	// otherwise.
	sign    bool
	signKey *rsa.PrivateKey
	at      time.Time
}

// fakeWechat is a WeChat Pay that answers everything with a, for answers the simulator
// never gives (micropay states, refund CLOSED/ABNORMAL, error codes of other accounts…).
func fakeWechat(t *testing.T, keys *sim.Keys, a fakeAnswer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if a.sign {
			key, at := keys.Wechat.PlatformPrivateKey, time.Now()
			if a.signKey != nil {
				key = a.signKey
			}
			if !a.at.IsZero() {
				at = a.at
			}
			for k, vs := range signHeaders(t, key, keys.Wechat.PublicKeyID, at, []byte(a.body)) {
				w.Header()[k] = vs
			}
		}
		if a.body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// encryptResource encrypts plaintext as a notification resource under key.
func encryptResource(t *testing.T, key string, plaintext []byte, originalType string) map[string]string {
	t.Helper()
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	nonce := "abcdefghijkl"
	return map[string]string{
		"original_type":   originalType,
		"algorithm":       "AEAD_AES_256_GCM",
		"ciphertext":      base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte("transaction"))),
		"associated_data": "transaction",
		"nonce":           nonce,
	}
}

// notification builds a notification body around resource.
func notification(t *testing.T, resource map[string]string) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id":            "EV-2025031410000000001",
		"create_time":   "2025-03-14T10:00:00+08:00",
		"event_type":    "TRANSACTION.SUCCESS",
		"resource_type": "encrypt-resource",
		"summary":       "支付成功",
		"resource":      resource,
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}
