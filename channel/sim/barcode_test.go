package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// Codes are shaped as each wallet's: WeChat 18 digits starting 10 to 15, Alipay 16 to 24
// digits starting 25 to 30 (mostly 18, sometimes not), so that orderpay.BarcodeChannel
// routes them; every code is new.
func TestPayCodes_ShapedAsEachWallets(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	seen := map[string]bool{}
	lengths := map[int]int{}
	for i := range 300 {
		for _, ch := range []string{orderpay.ChannelAlipay, orderpay.ChannelWechat} {
			c, err := b.sim.IssueCode(ch, "alice", "", 0)
			if err != nil {
				t.Fatalf("code %d: %v", i, err)
			}
			got, err := orderpay.BarcodeChannel(c.AuthCode)
			if err != nil || got != ch {
				t.Fatalf("%s code %q is routed to %q (%v)", ch, c.AuthCode, got, err)
			}
			if seen[c.AuthCode] {
				t.Fatalf("code %s issued twice", c.AuthCode)
			}
			seen[c.AuthCode] = true
			if ch == orderpay.ChannelAlipay {
				lengths[len(c.AuthCode)]++
			} else if len(c.AuthCode) != 18 {
				t.Fatalf("WeChat code %q", c.AuthCode)
			}
			if c.Behaviour != sim.CodeConfirm || c.State != sim.PayCodeLive || c.Channel != ch || c.Buyer != "alice" ||
				!c.ExpiresAt.Equal(b.clock.Now().Add(sim.DefaultPayCodeLifetime)) {
				t.Fatalf("code %+v", c)
			}
		}
	}
	if lengths[18] < 150 || len(lengths) < 3 {
		t.Fatalf("Alipay code lengths %v: mostly 18, some others", lengths)
	}
	for n := range lengths {
		if n < 16 || n > 24 {
			t.Fatalf("Alipay code lengths %v", lengths)
		}
	}
}

// IssueCode refuses what is not a code a wallet could show, and a password buyer takes
// DefaultCodeAfter unless told otherwise; other behaviours take no time.
func TestPayCodes_IssueArguments(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	for name, f := range map[string]func() error{
		"channel":   func() error { _, err := b.sim.IssueCode("unionpay", "", "", 0); return err },
		"behaviour": func() error { _, err := b.sim.IssueCode("alipay", "", "run_away", 0); return err },
		"negative":  func() error { _, err := b.sim.IssueCode("alipay", "", sim.CodePassword, -time.Second); return err },
		"too slow": func() error {
			_, err := b.sim.IssueCode("alipay", "", sim.CodePassword, sim.MaxCodeAfter+time.Second)
			return err
		},
		"a long buyer": func() error { _, err := b.sim.IssueCode("alipay", strings.Repeat("x", 65), "", 0); return err },
	} {
		if err := f(); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
	if c, _ := b.sim.IssueCode("wechat", "", sim.CodePassword, 0); c.After != sim.DefaultCodeAfter || c.AfterSeconds != 10 {
		t.Fatalf("password by default: %+v", c)
	}
	if c, _ := b.sim.IssueCode("wechat", "", sim.CodeNever, time.Minute); c.After != 0 {
		t.Fatalf("never with a time: %+v", c)
	}
}

// A code is used once, by either channel's first pay call that gets to it: a WeChat code
// at Alipay is unknown there and stays usable at WeChat.
func TestPayCodes_SingleUseAcrossChannels(t *testing.T) {
	t.Parallel()
	b := wxModeSetup(t, sim.WechatModePublicKey, sim.Config{})
	wx := issue(t, b.sim, "wechat", "alice", "", 0)
	wantAlipayCode(t, "a WeChat code at Alipay", barcodePay(t, b.client, barcodePayReq("SU_1", "1.00", wx)).Error, "40004", "ACQ.PAYMENT_AUTH_CODE_INVALID")
	if a := b.codepay(t, "SU_WX1", 100, wx); a.status != http.StatusOK {
		t.Fatalf("the code at WeChat: %s", a)
	}
	wantWxError(t, "again", b.codepay(t, "SU_WX2", 100, wx), http.StatusBadRequest, "AUTH_CODE_INVALID")
	c, err := b.sim.Code(wx)
	if err != nil || c.State != sim.PayCodeUsed || c.OutTradeNo != "SU_WX1" || c.TradeStatus != "SUCCESS" || c.TradeNo == "" || c.Amount != 100 {
		t.Fatalf("the used code: %+v, %v", c, err)
	}
}

// The unauthenticated codes endpoint is bounded: at most MaxPayCodes live codes, more
// refused until some expire; expired codes are remembered to be refused as expired, at most
// MaxPayCodes of them and for a day, then forgotten (a pay call then calls them unknown).
func TestPayCodes_Bounded(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{MaxPayCodes: 3})
	var first []string
	for range 3 {
		first = append(first, issue(t, b.sim, "alipay", "", "", 0))
	}
	if _, err := b.sim.IssueCode("alipay", "", "", 0); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("a fourth live code: %v, want ECONFLICT", err)
	}
	resp, err := http.Post(b.srv.URL+"/sim/wallet/codes", "application/json", strings.NewReader(`{"channel":"wechat"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("POST a fourth: %d, want 409", resp.StatusCode)
	}
	b.clock.Advance(sim.DefaultPayCodeLifetime)
	var second []string
	for range 3 {
		second = append(second, issue(t, b.sim, "alipay", "", "", 0))
	}
	wantAlipayCode(t, "an expired code", barcodePay(t, b.client, barcodePayReq("BD_1", "1.00", first[0])).Error, "40004", "ACQ.PAYMENT_AUTH_CODE_INVALID")
	if rsp := barcodePay(t, b.client, barcodePayReq("BD_1", "1.00", first[0])); !strings.Contains(rsp.SubMsg, "已过期") {
		t.Fatalf("the first code: %+v", rsp)
	}
	// Three more expire: the first three are the oldest of six expired, and go.
	b.clock.Advance(sim.DefaultPayCodeLifetime)
	issue(t, b.sim, "alipay", "", "", 0)
	if _, err := b.sim.Code(first[0]); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("the oldest expired code: %v, want forgotten", err)
	}
	if rsp := barcodePay(t, b.client, barcodePayReq("BD_1", "1.00", first[0])); !strings.Contains(rsp.SubMsg, "获取顾客账户信息失败") {
		t.Fatalf("a forgotten code: %+v", rsp)
	}
	if c, err := b.sim.Code(second[0]); err != nil || c.State != sim.PayCodeExpired {
		t.Fatalf("a remembered expired code: %+v, %v", c, err)
	}
	b.clock.Advance(25 * time.Hour)
	issue(t, b.sim, "alipay", "", "", 0)
	if _, err := b.sim.Code(second[0]); orderpay.ErrorCode(err) != orderpay.ENOTFOUND {
		t.Fatalf("a code expired a day ago: %v, want forgotten", err)
	}
	if n := len(b.sim.PayCodes(100)); n != 1 {
		t.Fatalf("%d codes kept, want only the one issued last", n)
	}
}

// The wallet's endpoints: issue, read, list, confirm and draw a code, with the simulator's
// error bodies for what they refuse.
func TestPayCodes_HTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	do := func(method, path, body string) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, m, resp.Header
	}
	for _, bad := range []string{`{`, `{"channel":"alipay","x":1}`, `{"channel":"paypal"}`, `{"channel":"alipay","behaviour":"later"}`,
		`{"channel":"alipay","behaviour":"password","after_seconds":-1}`, `{"channel":"alipay","after_seconds":3601}`,
		`{"channel":"alipay","buyer":"` + strings.Repeat("x", 2000) + `"}`} {
		if st, m, _ := do(http.MethodPost, "/sim/wallet/codes", bad); st != http.StatusBadRequest || m["error"] == nil {
			t.Errorf("POST %.60s: %d %v, want 400", bad, st, m)
		}
	}
	st, c, _ := do(http.MethodPost, "/sim/wallet/codes", `{"channel":"alipay","buyer":"alice","behaviour":"password","after_seconds":30}`)
	code, _ := c["auth_code"].(string)
	if st != http.StatusOK || !regexp.MustCompile(`^(2[5-9]|30)[0-9]{14,22}$`).MatchString(code) || c["channel"] != "alipay" || c["buyer"] != "alice" ||
		c["behaviour"] != "password" || c["after_seconds"] != 30.0 || c["state"] != "live" || c["expires_at"] == nil {
		t.Fatalf("POST: %d %v", st, c)
	}
	if st, m, _ := do(http.MethodGet, "/sim/wallet/codes/"+code, ""); st != http.StatusOK || m["auth_code"] != code || m["waiting"] != false {
		t.Fatalf("GET the code: %d %v", st, m)
	}
	if st, m, _ := do(http.MethodGet, "/sim/wallet/codes", ""); st != http.StatusOK || len(m["codes"].([]any)) != 1 {
		t.Fatalf("GET the list: %d %v", st, m)
	}
	if st, _, _ := do(http.MethodGet, "/sim/wallet/codes/281234567890123456", ""); st != http.StatusNotFound {
		t.Fatalf("GET an unknown code: %d", st)
	}
	if st, m, _ := do(http.MethodPost, "/sim/wallet/codes/"+code+"/confirm", ""); st != http.StatusConflict {
		t.Fatalf("confirm before a till used it: %d %v", st, m)
	}
	if rsp := barcodePay(t, b.client, barcodePayReq("WH_1", "6.60", code)); rsp.Code != "10003" {
		t.Fatalf("pay: %+v", rsp)
	}
	if st, m, _ := do(http.MethodGet, "/sim/wallet/codes/"+code, ""); st != http.StatusOK || m["waiting"] != true || m["out_trade_no"] != "WH_1" ||
		m["trade_status"] != "WAIT_BUYER_PAY" || m["amount"] != 660.0 || m["state"] != "used" {
		t.Fatalf("GET the used code: %d %v", st, m)
	}
	if st, m, _ := do(http.MethodPost, "/sim/wallet/codes/"+code+"/confirm", ""); st != http.StatusOK || m["status"] != "TRADE_SUCCESS" || m["out_trade_no"] != "WH_1" {
		t.Fatalf("confirm: %d %v", st, m)
	}
	if q := b.query(t, "WH_1"); q.TradeStatus != "TRADE_SUCCESS" {
		t.Fatalf("query after confirm: %+v", q)
	}
	if st, _, _ := do(http.MethodPost, "/sim/wallet/codes/281234567890123456/confirm", ""); st != http.StatusNotFound {
		t.Fatalf("confirm an unknown code: %d", st)
	}

	resp, err := http.Get(b.srv.URL + "/sim/wallet/codes/" + code + "/barcode.svg")
	if err != nil {
		t.Fatal(err)
	}
	svg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("barcode: %d %s", resp.StatusCode, resp.Header)
	}
	if got := decodeCode128SVG(t, string(svg)); got != code {
		t.Fatalf("the barcode reads %q, want %q", got, code)
	}
	if st, _, _ := do(http.MethodGet, "/sim/wallet/codes/281234567890123456/barcode.svg", ""); st != http.StatusNotFound {
		t.Fatalf("barcode of an unknown code: %d", st)
	}
}

// Code 128 as the standard writes it: digits in code set C (start 105), an odd last digit in
// code set B after code B (100), the check value the weighted sum modulo 103, then the stop.
func TestCode128_Values(t *testing.T) {
	t.Parallel()
	for digits, want := range map[string][]int{
		"1234":  {105, 12, 34, (105 + 1*12 + 2*34) % 103, 106},
		"12345": {105, 12, 34, 100, 16 + 5, (105 + 1*12 + 2*34 + 3*100 + 4*21) % 103, 106},
		"0":     {105, 100, 16, (105 + 100 + 2*16) % 103, 106},
	} {
		got, err := sim.Code128Values(digits)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", digits, got, err, want)
		}
	}
	for _, bad := range []string{"", "12a4", "１２"} {
		if _, err := sim.Code128Values(bad); orderpay.ErrorCode(err) != orderpay.EINVALID {
			t.Errorf("%q: %v, want EINVALID", bad, err)
		}
	}
	for _, n := range []int{16, 17, 18, 23, 24} {
		digits := strings.Repeat("9", n)
		svg, err := sim.Code128SVG(digits)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeCode128SVG(t, string(svg)); got != digits {
			t.Fatalf("%d digits read back as %q", n, got)
		}
	}
}

// decodeCode128SVG reads a barcode drawn by Code128SVG back, as a scanner would from its
// bars alone: the element widths from the bars' positions, every symbol eleven modules of
// six elements, start C first and the stop last (the standard's patterns), the data
// symbols (set C pairs as the writer draws them, code B and a digit), and the check value.
func decodeCode128SVG(t *testing.T, svg string) string {
	t.Helper()
	const startC, codeB, stop = "211232", "114131", "2331112"
	key := func(ws []int) string {
		var s strings.Builder
		for _, w := range ws {
			s.WriteByte(byte('0' + w))
		}
		return s.String()
	}
	// A pair's pattern is the first data symbol of the writer's drawing of that pair; a
	// set B digit's is the symbol after code B in its drawing of that digit alone.
	pairs, digitsB := map[string]int{}, map[string]int{}
	for v := range 100 {
		svgV, err := sim.Code128SVG(strconv.Itoa(v/10) + strconv.Itoa(v%10))
		if err != nil {
			t.Fatal(err)
		}
		pairs[key(elementWidths(t, string(svgV))[6:12])] = v
	}
	for d := range 10 {
		svgD, _ := sim.Code128SVG(strconv.Itoa(d))
		digitsB[key(elementWidths(t, string(svgD))[12:18])] = d
	}
	widths := elementWidths(t, svg)
	if len(widths) < 13 || (len(widths)-7)%6 != 0 {
		t.Fatalf("%d elements do not make symbols", len(widths))
	}
	n := (len(widths) - 7) / 6
	if key(widths[:6]) != startC || key(widths[6*n:]) != stop {
		t.Fatalf("the barcode does not start with start C and end with the stop: %v", widths)
	}
	sum := 105
	var out strings.Builder
	setB := false
	for i := 1; i < n-1; i++ {
		ws := widths[6*i : 6*i+6]
		total := 0
		for _, w := range ws {
			total += w
		}
		if total != 11 {
			t.Fatalf("symbol %d is %d modules wide", i, total)
		}
		var v int
		switch k := key(ws); {
		case setB:
			d, ok := digitsB[k]
			if !ok {
				t.Fatalf("symbol %d %v is no digit of set B", i, ws)
			}
			out.WriteByte(byte('0' + d))
			v = 16 + d
		case k == codeB:
			setB, v = true, 100
		default:
			p, ok := pairs[k]
			if !ok {
				t.Fatalf("symbol %d %v is no pair of set C", i, ws)
			}
			out.WriteString(strconv.Itoa(p/10) + strconv.Itoa(p%10))
			v = p
		}
		sum += i * v
	}
	want, err := sim.Code128Values(out.String())
	if err != nil || want[len(want)-2] != sum%103 || len(want) != n+1 {
		t.Fatalf("check: %v %v, the weighted sum gives %d", want, err, sum%103)
	}
	if check, want := widths[6*(n-1):6*n], checkPattern(t, sum%103); want != "" && key(check) != want {
		t.Fatalf("check symbol %v is not value %d", check, sum%103)
	}
	return out.String()
}

// checkPattern is the pattern the writer draws for symbol value v (0 to 102) as a check.
func checkPattern(t *testing.T, v int) string {
	t.Helper()
	// Find digits whose check value is v by trying two-digit codes: the check of "ab" is
	// (105 + ab) % 103, so ab = v - 2 (mod 103) when that is under 100.
	ab := (v - 2 + 103) % 103
	if ab > 99 {
		return "" // 100 to 102 are no check of two digits: the caller takes the symbol as it is
	}
	svg, _ := sim.Code128SVG(strconv.Itoa(ab/10) + strconv.Itoa(ab%10))
	ws := elementWidths(t, string(svg))
	var s strings.Builder
	for _, w := range ws[12:18] {
		s.WriteByte(byte('0' + w))
	}
	return s.String()
}

// elementWidths is the bar and space widths, in modules, of a Code128SVG drawing: every
// bar on the 2 px module grid.
func elementWidths(t *testing.T, svg string) []int {
	t.Helper()
	var widths []int
	prevEnd := -1
	for _, r := range regexp.MustCompile(`<rect x="(\d+)" y="0" width="(\d+)"`).FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.Atoi(r[1])
		w, _ := strconv.Atoi(r[2])
		if x%2 != 0 || w%2 != 0 {
			t.Fatalf("bar %v is not on the 2 px module grid", r)
		}
		if prevEnd >= 0 {
			widths = append(widths, (x-prevEnd)/2)
		}
		widths = append(widths, w/2)
		prevEnd = x + w
	}
	return widths
}
