package alipay

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"

	sdk "github.com/smartwalle/alipay/v3"

	"orderpay"
)

// CheckCredentials makes one harmless signed call, a query of a trade that does not exist,
// and says what its answer shows of the configured credentials: whether the gateway
// answered, took the request as this app's (app id, private key, certificates), signed its
// answer with the key configured here, and how far its clock is from this machine's. It
// checks this adapter's app alone, named in App: the in-app app's adapter (ForMethod) checks
// that app's credentials.
func (c *Channel) CheckCredentials(ctx context.Context) orderpay.CredentialCheck {
	r := orderpay.CredentialCheck{Channel: orderpay.ChannelAlipay, Endpoint: c.gateway, Mode: c.desc.Mode, App: c.appID}
	n, _ := rand.Int(rand.Reader, big.NewInt(1e12))
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, ex := withExchange(ctx)
	_, err := c.client.TradeQuery(ctx, sdk.TradeQuery{OutTradeNo: fmt.Sprintf("CHECK%012d", n)})
	if ex.status == 0 {
		r.Problem = fmt.Sprintf("Alipay could not be reached at %s: %s", c.gateway, describeError(err))
		return r
	}
	r.Reachable = true
	if at, perr := http.ParseTime(ex.date); perr == nil {
		r.SkewKnown, r.ClockSkew = true, at.Sub(time.Now()).Round(time.Second)
	}
	ans, signed := gatewayAnswer(ex.body)
	r.Detail = strings.TrimSpace(fmt.Sprintf("%s %s %s", ans.Code, ans.SubCode, ans.SubMsg))
	switch {
	case ex.status != http.StatusOK:
		r.Problem = fmt.Sprintf("Alipay's gateway answered HTTP %d: it is unavailable, or %s is not its address", ex.status, c.gateway)
		r.Inconclusive = ex.status >= 500
	case ans.Code == "20000" || ans.Code == "40005" || ans.SubCode == "ACQ.SYSTEM_ERROR":
		// A system error or a rate limit says nothing of the credentials (docs/channels.md §A4).
		r.Problem, r.Inconclusive = "Alipay did not process the check's query ("+r.Detail+"): try again", true
	case ans.Code == "":
		r.Problem = "the answer is not Alipay's: " + c.gateway + " is not an Alipay gateway"
	case ans.SubCode == "isv.invalid-app-id":
		r.Problem = fmt.Sprintf("Alipay does not know app id %s: copy the APPID from the app's page on the open platform", c.appID)
	case ans.SubCode == "isv.invalid-signature":
		r.Problem = fmt.Sprintf("Alipay refused our signature: the app private key is not the one whose public key (or certificate) is uploaded for app %s", c.appID)
	case strings.Contains(ans.SubCode, "cert"):
		r.Problem = fmt.Sprintf("Alipay refused our certificates (%s): the app is in the other signing mode, or the certificate files are not this app's", ans.SubCode)
	case ans.Code == "10000" || ans.SubCode == "ACQ.TRADE_NOT_EXIST":
		// The gateway ran the business call: it took the request as the app's.
		r.SignatureAccepted = true
		switch {
		case !signed:
			r.Problem = "Alipay's answer is not signed: it is not Alipay's, or something in between changed it"
		case err != nil:
			what := "Alipay public key"
			if c.desc.Mode == ModeCertificate {
				what = "Alipay certificate"
			}
			r.Problem = fmt.Sprintf("Alipay's answer does not verify with the %s in the channels file: it is not this app's (%s)", what, describeError(err))
		default:
			r.AnswerVerified = true
		}
	default:
		r.Problem = "Alipay refused the check's query: " + r.Detail
	}
	if r.Problem == "" {
		r.Problem = orderpay.SkewProblem("Alipay", r.ClockSkew)
	}
	return r
}

// gatewayAnswer reads the code of a gateway answer, whichever node holds it, without
// verifying anything, and whether it carries a signature.
func gatewayAnswer(body []byte) (answer sdk.Error, signed bool) {
	var nodes map[string]json.RawMessage
	if json.Unmarshal(body, &nodes) != nil {
		return answer, false
	}
	for k, v := range nodes {
		if strings.HasSuffix(k, "_response") {
			_ = json.Unmarshal(v, &answer)
		}
	}
	_, signed = nodes["sign"]
	return answer, signed
}
