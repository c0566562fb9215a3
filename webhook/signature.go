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
	// HeaderSignature is "v2=<hex HMAC-SHA256(secret, timestamp + "." + delivery + "." +
	// body)>", delivery being HeaderDelivery's value. It may carry several comma-separated
	// v2= values (one per secret while a secret is rotated); any one matching is enough.
	// Values of another version are ignored: v1, which did not sign the delivery id, is no
	// longer sent.
	HeaderSignature = "X-Orderpay-Signature"
	// HeaderDelivery is the delivery's id: the same on every attempt and resend of one
	// delivery, so that a receiver can drop a repeat. It is signed.
	HeaderDelivery = "X-Orderpay-Delivery"
	// HeaderEvent is the event's subject, e.g. payment.succeeded.
	HeaderEvent = "X-Orderpay-Event"
)

// SignatureVersion tags the signatures Sign makes and Verify accepts.
const SignatureVersion = "v2"

// Tolerance is how far a request's timestamp may be from the receiver's clock. A captured
// request replayed later than this is refused even though its signature is genuine; one
// replayed sooner carries the same signed delivery id, which the receiver has seen.
const Tolerance = 5 * time.Minute

// Sign returns the HeaderSignature value of body sent as delivery, signed at ts. The
// timestamp and the delivery id are inside the signed text, so neither can be changed: an
// old request cannot be made to look fresh, nor a repeat to look like another delivery.
func Sign(secret []byte, ts time.Time, delivery string, body []byte) string {
	return SignatureVersion + "=" + hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), delivery, body))
}

func mac(secret []byte, ts, delivery string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write([]byte(delivery))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a webhook request as its receiver must before acting on it: the timestamp
// is within Tolerance of now, there is a delivery id, and a v2 signature over timestamp +
// "." + delivery id + "." + body matches secret. body must be the raw bytes received,
// before any JSON decoding. It returns EUNAUTHORIZED when the request must be refused.
// Once it returns nil, the HeaderDelivery value is genuine: a receiver keys its
// deduplication on it.
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
	delivery := header.Get(HeaderDelivery)
	if delivery == "" {
		return orderpay.Errorf(orderpay.EUNAUTHORIZED, "webhook: %s missing", HeaderDelivery)
	}
	want := mac(secret, tsText, delivery, body)
	for _, part := range strings.Split(header.Get(HeaderSignature), ",") {
		sig, ok := strings.CutPrefix(strings.TrimSpace(part), SignatureVersion+"=")
		if !ok {
			continue
		}
		got, err := hex.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return orderpay.Errorf(orderpay.EUNAUTHORIZED, "webhook: no %s signature matches", SignatureVersion)
}
