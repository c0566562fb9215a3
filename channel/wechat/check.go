package wechat

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/validators"

	"orderpay"
)

// CheckCredentials makes one harmless signed call, a query of a trade that does not exist,
// and says what its answer shows of the configured credentials: whether WeChat Pay
// answered, took the request as this merchant's (merchant number, private key, merchant
// serial, clock), signed its refusal with the key configured here (it signs its answer to
// every request it authenticated), and how far its clock is from this machine's. In
// platform certificate mode the certificates are downloaded first: a list that does not
// download or decrypt is the problem then.
func (c *Channel) CheckCredentials(ctx context.Context) orderpay.CredentialCheck {
	r := orderpay.CredentialCheck{Channel: orderpay.ChannelWechat, Endpoint: c.baseURL, Mode: string(c.mode)}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	n, _ := rand.Int(rand.Reader, big.NewInt(1e12))
	no := fmt.Sprintf("CHECK%012d", n)
	result, err := c.rawAPI.Get(ctx, DefaultBaseURL+"/v3/pay/transactions/out-trade-no/"+no+"?mchid="+c.mchID)
	var apiErr *core.APIError
	var header http.Header
	var body []byte
	var status int
	switch {
	case errors.As(err, &apiErr):
		header, body, status = apiErr.Header, []byte(apiErr.Body), apiErr.StatusCode
	case err == nil && result != nil && result.Response != nil:
		header, status = result.Response.Header, result.Response.StatusCode
		body, _ = io.ReadAll(io.LimitReader(result.Response.Body, maxResponse))
	default:
		r.Problem = fmt.Sprintf("WeChat Pay could not be reached at %s: %v", c.baseURL, err)
		return r
	}
	r.Reachable = true
	if at, perr := http.ParseTime(header.Get("Date")); perr == nil {
		r.SkewKnown, r.ClockSkew = true, at.Sub(time.Now()).Round(time.Second)
	}
	if ts, perr := strconv.ParseInt(header.Get("Wechatpay-Timestamp"), 10, 64); perr == nil {
		r.SkewKnown, r.ClockSkew = true, time.Unix(ts, 0).Sub(time.Now()).Round(time.Second)
	}
	code, message := "", ""
	if apiErr != nil {
		code, message = apiErr.Code, apiErr.Message
	}
	r.Detail = strings.TrimSpace(fmt.Sprintf("HTTP %d %s %s", status, code, message))
	switch {
	case status == http.StatusUnauthorized && strings.Contains(message, "商户号"):
		r.Problem = fmt.Sprintf("WeChat Pay refused our signature: merchant number %s is not the merchant of the API certificate %s (check mch_id and merchant_serial)", c.mchID, c.merchantSerial)
	case status == http.StatusUnauthorized && strings.Contains(message, "序列号"):
		r.Problem = fmt.Sprintf("WeChat Pay refused our signature: %s is not a serial of merchant %s's API certificates (check merchant_serial)", c.merchantSerial, c.mchID)
	case status == http.StatusUnauthorized && strings.Contains(message, "timestamp"):
		r.Problem = "WeChat Pay refused our signature's time: this machine's clock is more than 5 minutes off WeChat Pay's; set it right (NTP)"
	case status == http.StatusUnauthorized:
		r.Problem = fmt.Sprintf("WeChat Pay refused our signature: the merchant serial %s does not match the private key (apiclient_key.pem is not the key of that API certificate)", c.merchantSerial)
	case status == http.StatusNotFound && (code == "ORDER_NOT_EXIST" || code == "ORDERNOTEXIST"):
		r.SignatureAccepted = true
		if err := c.verifyAnswer(ctx, header, body); err != nil {
			r.Problem = err.Error()
		} else {
			r.AnswerVerified = true
		}
	case status >= 500 || status == http.StatusTooManyRequests:
		// A system error or a rate limit says nothing of the credentials (docs/channels.md §B2).
		r.Problem, r.Inconclusive = "WeChat Pay did not process the check's query ("+r.Detail+"): try again", true
	default:
		r.Problem = fmt.Sprintf("WeChat Pay answered the check's query unexpectedly (%s): is %s its API?", r.Detail, c.baseURL)
	}
	if r.Problem == "" {
		r.Problem = orderpay.SkewProblem("WeChat Pay", r.ClockSkew)
	}
	return r
}

// verifyAnswer checks a signed answer with the configured public key or platform
// certificates, in words a merchant understands when it does not verify.
func (c *Channel) verifyAnswer(ctx context.Context, header http.Header, body []byte) error {
	if header.Get("Wechatpay-Signature") == "" {
		return errors.New("WeChat Pay's answer is not signed: it is not WeChat Pay's, or something in between changed it")
	}
	if c.certs != nil {
		c.certs.refresh(ctx, "")
		c.certs.mu.Lock()
		failed, known := c.certs.lastErr, len(c.certs.certs)
		c.certs.mu.Unlock()
		if known == 0 {
			return fmt.Errorf("WeChat Pay's platform certificates could not be had: %v (is this merchant in public key mode, or the APIv3 key wrong?)", failed)
		}
	}
	resp := &http.Response{Header: header, Body: io.NopCloser(bytes.NewReader(body))}
	if err := validators.NewWechatPayResponseValidator(c.verifier).Validate(ctx, resp); err != nil {
		what := "WeChat Pay public key (pub_key.pem and its PUB_KEY_ID)"
		if c.certs != nil {
			what = "platform certificates WeChat Pay lists"
		}
		return fmt.Errorf("WeChat Pay's answer does not verify with the %s: they are not this merchant's (%v)", what, err)
	}
	return nil
}
