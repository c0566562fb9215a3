package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

// Headers of every webhook request.
const (
	// HeaderTimestamp is the Unix time in seconds at which the request was signed.
	HeaderTimestamp = "X-Orderpay-Timestamp"
	// HeaderSignature is "v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>". It may
	// carry several comma-separated v1= values (one per secret while a secret is rotated);
	// any one matching is enough.
	HeaderSignature = "X-Orderpay-Signature"
	// HeaderDelivery is the delivery's id: the same on every attempt and resend of one
	// delivery, so that a receiver can drop a repeat.
	HeaderDelivery = "X-Orderpay-Delivery"
	// HeaderEvent is the event's subject, e.g. payment.succeeded.
	HeaderEvent = "X-Orderpay-Event"
)

// Tolerance is how far a request's timestamp may be from the receiver's clock. A captured
// request replayed later than this is refused even though its signature is genuine.
const Tolerance = 5 * time.Minute

// Sign returns the HeaderSignature value of body signed at ts. The timestamp is inside the
// signed text, so it cannot be changed to make an old request look fresh.
func Sign(secret []byte, ts time.Time, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a webhook request as its receiver must before acting on it: the timestamp
// is within Tolerance of now, and a v1 signature over timestamp + "." + body matches secret.
// body must be the raw bytes received, before any JSON decoding. It returns EUNAUTHORIZED
// when the request must be refused.
func Verify(secret []byte, header http.Header, body []byte, now time.Time) error {
	if len(secret) == 0 {
		return orderpay.Errorf(orderpay.EINVALID, "webhook: no secret to verify with")
	}
	tsText := header.Get(HeaderTimestamp)
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return orderpay.Errorf(orderpay.EUNAUTHORIZED, "webhook: %s missing or not Unix seconds", HeaderTimestamp)
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > Tolerance || skew < -Tolerance {
		return orderpay.Errorf(orderpay.EUNAUTHORIZED, "webhook: timestamp is %s away from now, more than %s", skew.Round(time.Second), Tolerance)
	}
	want := mac(secret, tsText, body)
	for _, part := range strings.Split(header.Get(HeaderSignature), ",") {
		sig, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue
		}
		got, err := hex.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return orderpay.Errorf(orderpay.EUNAUTHORIZED, "webhook: no v1 signature matches")
}
