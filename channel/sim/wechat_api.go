package sim

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"orderpay"
)

// The WeChat Pay v3 signature scheme (docs/channels.md §B3).
const (
	wechatAuthScheme    = "WECHATPAY2-SHA256-RSA2048"
	wechatSignatureType = "WECHATPAY2-SHA256-RSA2048"
	// wechatMaxSkew is how far an Authorization timestamp may be from the simulator's
	// wall clock (Config.WechatWallClock).
	wechatMaxSkew = 5 * time.Minute
	// maxWechatBody bounds a request body; real ones are a few kilobytes.
	maxWechatBody = 1 << 20
)

// wechatEndpoint is one WeChat Pay v3 operation. serveWechat gives every endpoint the same
// envelope: fault injection, request authentication, and signed answers.
type wechatEndpoint struct {
	// method names the operation in fault rules (Method*).
	method string
	// key is what fault draws are keyed on: the order's out_trade_no (for refunds too), or
	// the bill date.
	key func(s *Simulator, r *http.Request, body []byte) string
	// run authenticates nothing (serveWechat did) and performs the operation.
	run func(s *Simulator, r *http.Request, body []byte) wechatAnswer
	// readOnly operations change nothing, so a fault that is "not applied" may still
	// compute their real answer.
	readOnly bool
	// fabricate is the 2xx answer a forger would send for a state-changing operation that
	// never ran: what an unsigned or badly signed fault answers when not Applied.
	fabricate func(s *Simulator, r *http.Request, body []byte) wechatAnswer
	// unsignedAnswer: the answer is never signed, whatever its status (the bill download,
	// §B1).
	unsignedAnswer bool
}

// wechatAnswer is one HTTP answer: a JSON body (or none, for 204), or another content
// type for a bill file.
type wechatAnswer struct {
	status      int
	body        []byte // the exact bytes, signed as they are
	contentType string // defaults to application/json when there is a body
	// authenticated: the request's signature verified, so a refusal is signed too.
	authenticated bool
}

// wechatSignMode says how an answer is signed.
type wechatSignMode int

const (
	wechatSigned   wechatSignMode = iota // with the platform key, as WeChat Pay does
	wechatUnsigned                       // no Wechatpay-* signature headers at all
	wechatForged                         // with a key that is not WeChat Pay's
)

// serveWechat runs one endpoint: draw a fault, authenticate the request, run the
// operation and write its answer, signed. The order mirrors the Alipay gateway: the fault
// is drawn first because network and gateway failures hit any request.
//
// A fault with Applied runs the operation first, then answers as the fault says. Without
// it, nothing changes at the channel: timeout hangs, http_500, system_error and
// unknown_error answer 500 SYSTEM_ERROR, rate_limited 429 FREQUENCY_LIMITED (all unsigned,
// as WeChat's errors are), and unsigned and bad_signature send a 2xx that is not WeChat's:
// the real answer of a read-only call, or for a prepay, close or refund the success a
// forger would make up (a code_url no order stands behind, a 204, a SUCCESS refund). An
// adapter must believe none of them.
func (s *Simulator) serveWechat(ep wechatEndpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWechatBody))
		if err != nil {
			s.writeWechat(w, ep, wechatError(http.StatusBadRequest, "PARAM_ERROR", "请求体过大或无法读取"), wechatSigned)
			return
		}
		call := func() wechatAnswer {
			if refusal := s.wechatAuthenticate(r, body); refusal != nil {
				return *refusal
			}
			ans := ep.run(s, r, body)
			ans.authenticated = true
			return ans
		}
		fault := s.faults.callFault(orderpay.ChannelWechat, ep.method, ep.key(s, r, body))
		if fault == nil {
			s.writeWechat(w, ep, call(), wechatSigned)
			return
		}
		var ans wechatAnswer
		if fault.Applied {
			ans = call()
		}
		switch fault.Kind {
		case FaultTimeout:
			s.hang(r.Context(), fault)
		case FaultHTTP500, FaultSystemError, FaultUnknownError:
			// WeChat has one system error for all three (§B2); its result is unknown.
			s.writeWechat(w, ep, wechatError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误"), wechatSigned)
		case FaultBankError:
			// The buyer's bank did not answer: the payment's result is unknown (§B7).
			s.writeWechat(w, ep, wechatError(http.StatusInternalServerError, "BANKERROR", "银行系统异常"), wechatSigned)
		case FaultRateLimited:
			s.writeWechat(w, ep, wechatError(http.StatusTooManyRequests, "FREQUENCY_LIMITED", "请求频率超限"), wechatSigned)
		case FaultUnsigned, FaultBadSignature:
			if !fault.Applied {
				switch {
				case ep.readOnly:
					ans = call()
				case ep.fabricate != nil:
					ans = ep.fabricate(s, r, body)
				default:
					ans = wechatError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
				}
			}
			mode := wechatUnsigned
			if fault.Kind == FaultBadSignature {
				mode = wechatForged
			}
			s.writeWechat(w, ep, ans, mode)
		}
	}
}

// wechatAuthenticate checks the Authorization header (§B3) and returns the 401 refusal, or
// nil if the request is the merchant's, signed over exactly what arrived, and fresh.
func (s *Simulator) wechatAuthenticate(r *http.Request, body []byte) *wechatAnswer {
	refuse := func(msg string) *wechatAnswer {
		a := wechatError(http.StatusUnauthorized, "SIGN_ERROR", msg)
		return &a
	}
	scheme, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case scheme == "":
		return refuse("Http头缺少Authorization")
	case scheme != wechatAuthScheme:
		return refuse("错误的签名方式，认证类型应为 " + wechatAuthScheme)
	}
	params, ok := parseWechatAuthParams(rest)
	if !ok {
		return refuse("Http头Authorization格式错误")
	}
	for _, k := range []string{"mchid", "nonce_str", "timestamp", "serial_no", "signature"} {
		if params[k] == "" {
			return refuse("Http头Authorization缺少" + k)
		}
	}
	keys := &s.keys.Wechat
	if params["mchid"] != keys.MchID {
		return refuse("商户号与签名信息不匹配")
	}
	if !strings.EqualFold(params["serial_no"], keys.MerchantSerial) {
		return refuse("商户证书序列号有误")
	}
	ts, err := strconv.ParseInt(params["timestamp"], 10, 64)
	if err != nil {
		return refuse("Http头Authorization中的timestamp格式错误")
	}
	if skew := time.Duration(s.cfg.WechatWallClock.Now().Unix()-ts) * time.Second; skew > wechatMaxSkew || skew < -wechatMaxSkew {
		return refuse("Http头Authorization中的timestamp与发起请求的时间不得超过5分钟")
	}
	message := r.Method + "\n" + wechatRequestURI(r) + "\n" + params["timestamp"] + "\n" +
		params["nonce_str"] + "\n" + string(body) + "\n"
	if VerifySHA256RSA(keys.MerchantPublicKey, []byte(message), params["signature"]) != nil {
		return refuse("签名错误")
	}
	return nil
}

// parseWechatAuthParams reads `k="v",k="v",…`. A repeated or unquoted key makes the header
// malformed.
func parseWechatAuthParams(s string) (map[string]string, bool) {
	params := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return nil, false
		}
		if _, dup := params[k]; dup {
			return nil, false
		}
		params[k] = v[1 : len(v)-1]
	}
	return params, true
}

// wechatRequestURI is the URL a client signed: path and query exactly as they arrived.
func wechatRequestURI(r *http.Request) string {
	uri := r.RequestURI
	if u, err := url.ParseRequestURI(uri); err == nil && u.IsAbs() {
		// A request through a forward proxy carries the absolute URL; the client signed
		// only its path and query.
		uri = u.RequestURI()
	}
	return uri
}

// writeWechat writes ans. Every 2xx answer, including a 204 without body, carries a
// signature over "timestamp\nnonce\nbody\n" (§B3) unless ep never signs; so does a
// business refusal (4xx) of a request whose signature verified: WeChat Pay signs its
// answer to every request it authenticated ("对于签名验证成功的请求，微信支付API v3会…对应答
// 进行签名"). A 401 (the request did not authenticate) and a system error are not signed.
// Every answer has a Request-ID.
func (s *Simulator) writeWechat(w http.ResponseWriter, ep wechatEndpoint, ans wechatAnswer, mode wechatSignMode) {
	h := w.Header()
	h.Set("Request-ID", strings.ToUpper(wechatHex(16)))
	if len(ans.body) > 0 {
		ct := ans.contentType
		if ct == "" {
			ct = "application/json; charset=utf-8"
		}
		h.Set("Content-Type", ct)
	}
	signs := ans.status >= 200 && ans.status <= 299 || ans.authenticated && ans.status >= 400 && ans.status <= 499
	if signs && !ep.unsignedAnswer && mode != wechatUnsigned {
		key, serial := s.wechatSigner()
		if mode == wechatForged {
			// A forger names the serial the merchant expects, so that only the
			// signature itself gives it away.
			key = s.forgerKey()
		}
		sh, err := s.wechatSignatureHeaders(key, serial, ans.body)
		if err != nil {
			s.log.Error("sim: sign wechat answer", "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		for k, vs := range sh {
			h[k] = vs
		}
	}
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
}

// wechatSignatureHeaders signs body as WeChat Pay signs answers and notifications, at the
// time of its wall clock (Config.WechatWallClock).
func (s *Simulator) wechatSignatureHeaders(key *rsa.PrivateKey, serial string, body []byte) (http.Header, error) {
	ts := strconv.FormatInt(s.cfg.WechatWallClock.Now().Unix(), 10)
	nonce := newWechatNonce(32)
	sig, err := SignSHA256RSA(key, []byte(ts+"\n"+nonce+"\n"+string(body)+"\n"))
	if err != nil {
		return nil, err
	}
	return http.Header{
		"Wechatpay-Timestamp":      {ts},
		"Wechatpay-Nonce":          {nonce},
		"Wechatpay-Signature":      {sig},
		"Wechatpay-Serial":         {serial},
		"Wechatpay-Signature-Type": {wechatSignatureType},
	}, nil
}

// wechatError is an error answer {"code","message"} (§B2).
func wechatError(status int, code, message string) wechatAnswer {
	return wechatJSON(status, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{code, message})
}

// wechatParamError is a 400 PARAM_ERROR naming the field at fault in detail, as WeChat does.
func wechatParamError(field, location, message string) wechatAnswer {
	type detail struct {
		Field    string `json:"field"`
		Location string `json:"location"`
	}
	return wechatJSON(http.StatusBadRequest, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Detail  detail `json:"detail"`
	}{"PARAM_ERROR", message, detail{field, location}})
}

// wechatJSON encodes v without HTML escaping (a code_url keeps its "&" and "=" as they are).
func wechatJSON(status int, v any) wechatAnswer {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return wechatAnswer{status: http.StatusInternalServerError, body: []byte(`{"code":"SYSTEM_ERROR","message":"系统错误"}`)}
	}
	return wechatAnswer{status: status, body: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}
}

// wechatNoContent is the 204 of a close.
func wechatNoContent() wechatAnswer { return wechatAnswer{status: http.StatusNoContent} }

// decodeWechatBody decodes a JSON request body into v; the answer is a PARAM_ERROR when the
// body is not a JSON object of the right field types.
func decodeWechatBody(body []byte, v any) *wechatAnswer {
	if err := json.Unmarshal(body, v); err != nil {
		a := wechatParamError("body", "body", "请求体不是合法的JSON或字段类型错误")
		return &a
	}
	return nil
}

// bodyField returns one string field of a JSON body, "" if absent: what fault draws are
// keyed on before the body is validated.
func bodyField(body []byte, field string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var v string
	if json.Unmarshal(m[field], &v) != nil {
		return ""
	}
	return v
}
