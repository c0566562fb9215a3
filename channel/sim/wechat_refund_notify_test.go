package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/channel/sim"
)

// wxRefundNotice is a decoded refund notification: the envelope and its decrypted resource.
type wxRefundNotice struct {
	ID        string `json:"id"`
	EventType string `json:"event_type"`
	Summary   string `json:"summary"`
	Resource  struct {
		OriginalType   string `json:"original_type"`
		Algorithm      string `json:"algorithm"`
		Ciphertext     string `json:"ciphertext"`
		AssociatedData string `json:"associated_data"`
		Nonce          string `json:"nonce"`
	} `json:"resource"`
	refund struct {
		MchID         string `json:"mchid"`
		TransactionID string `json:"transaction_id"`
		OutTradeNo    string `json:"out_trade_no"`
		RefundID      string `json:"refund_id"`
		OutRefundNo   string `json:"out_refund_no"`
		RefundStatus  string `json:"refund_status"`
		SuccessTime   string `json:"success_time"`
		Amount        struct {
			Total       int64 `json:"total"`
			Refund      int64 `json:"refund"`
			PayerTotal  int64 `json:"payer_total"`
			PayerRefund int64 `json:"payer_refund"`
		} `json:"amount"`
	}
}

func wxOpenRefundNotice(t *testing.T, wk *sim.WechatKeys, body []byte) wxRefundNotice {
	t.Helper()
	var n wxRefundNotice
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatalf("notification %q: %v", body, err)
	}
	plain, err := sim.DecryptWechatResource(wk.APIv3Key, n.Resource.Ciphertext, n.Resource.AssociatedData, n.Resource.Nonce)
	if err != nil {
		t.Fatalf("refund notification resource: %v", err)
	}
	if err := json.Unmarshal(plain, &n.refund); err != nil {
		t.Fatalf("refund notification plaintext %q: %v", plain, err)
	}
	return n
}

// waitRefundNotify waits until the notification of refund outRefundNo is settled.
func waitRefundNotify(t *testing.T, s *sim.Simulator, outRefundNo string) sim.NotifyStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, st := range s.NotifyStats() {
			if st.OutRefundNo == outRefundNo && st.Done() {
				return st
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("refund notification for %s not settled in time: %+v", outRefundNo, s.NotifyStats())
	return sim.NotifyStats{}
}

// refundTo is a refund body with a notify_url.
func refundTo(outTradeNo, outRefundNo string, refund, total int64, notifyURL string) string {
	return strings.Replace(wxRefundBody(outTradeNo, outRefundNo, refund, total), `"reason"`, `"notify_url":"`+notifyURL+`","reason"`, 1)
}

// A refund that ends notifies its own notify_url: REFUND.SUCCESS with success_time,
// REFUND.ABNORMAL and REFUND.CLOSED without, each encrypted with the APIv3 key (original_type
// "refund") and signed like an answer. A refund that ended ABNORMAL or CLOSED moved no money:
// the ledger does not count it and its amount can be refunded again.
func TestWechatRefundNotify_SuccessAbnormalAndClosedGoToTheRefundsNotifyURL(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{TimeScale: fastTime})
	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	b.paid(t, "RFN_001", 1000) // no notify_url of its own: every notification here is a refund's
	if err := b.sim.EndWechatRefund("RFN_001_R2", sim.WechatRefundAbnormal); err != nil {
		t.Fatal(err)
	}
	if err := b.sim.EndWechatRefund("RFN_001_R3", sim.WechatRefundClosed); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		no, status, event, summary string
		refund                     int64
	}{
		{"RFN_001_R1", "SUCCESS", "REFUND.SUCCESS", "退款成功", 300},
		{"RFN_001_R2", "ABNORMAL", "REFUND.ABNORMAL", "退款异常", 200},
		{"RFN_001_R3", "CLOSED", "REFUND.CLOSED", "退款关闭", 700},
	}
	for _, tc := range cases {
		a := b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", refundTo("RFN_001", tc.no, tc.refund, 1000, recv.url))
		if v := wxRefundOf(t, a); v.Status != tc.status {
			t.Fatalf("refund %s answered %+v, want %s", tc.no, v, tc.status)
		}
		st := waitRefundNotify(t, b.sim, tc.no)
		if !st.Acked || len(st.Attempts) != 1 || st.OutTradeNo != "RFN_001" || st.URL != recv.url {
			t.Fatalf("delivery of %s: %+v", tc.no, st)
		}
	}
	got := recv.received()
	if len(got) != 3 {
		t.Fatalf("%d notifications, want 3", len(got))
	}
	ledger := wxEntry(t, b.sim, "RFN_001")
	for i, want := range cases {
		if err := b.verifyAnswer(got[i]); err != nil {
			t.Fatalf("%s notification signature: %v", want.no, err)
		}
		n := wxOpenRefundNotice(t, b.wk, got[i].body)
		r := n.refund
		if n.EventType != want.event || n.Summary != want.summary || n.Resource.OriginalType != "refund" ||
			n.Resource.AssociatedData != "refund" || n.Resource.Algorithm != "AEAD_AES_256_GCM" || n.ID == "" {
			t.Fatalf("%s envelope %+v", want.no, n)
		}
		if r.OutRefundNo != want.no || r.RefundStatus != want.status || r.OutTradeNo != "RFN_001" || r.TransactionID != ledger.TradeNo ||
			r.MchID != b.wk.MchID || r.Amount.Total != 1000 || r.Amount.Refund != want.refund || r.Amount.PayerRefund != want.refund ||
			!strings.HasPrefix(r.RefundID, "50") || (r.SuccessTime != "") != (want.status == "SUCCESS") {
			t.Fatalf("%s resource %+v", want.no, r)
		}
	}
	// Only the successful refund moved money; the others' 900 fen are refundable again.
	if ledger.Refunded != 300 {
		t.Fatalf("ledger refunded %d, want 300", ledger.Refunded)
	}
	if v := wxRefundOf(t, b.refund(t, "RFN_001", "RFN_001_R4", 700, 1000)); v.Status != "SUCCESS" {
		t.Fatalf("refund of the rest: %+v", v)
	}
	if got := wxRefundOf(t, b.refundQuery(t, "RFN_001_R2")); got.Status != "ABNORMAL" {
		t.Fatalf("query of the abnormal refund: %+v", got)
	}
}

// With a RefundDelay the notification goes when the simulated clock reaches the refund's
// end, with no call needed to notice it; a refund still PROCESSING can be made to end
// CLOSED, one that has ended cannot change.
func TestWechatRefundNotify_SentWhenADelayedRefundEndsOnTheSimulatedClock(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{TimeScale: fastTime, RefundDelay: time.Minute})
	recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
	b.paid(t, "RFD_001", 1000)
	for _, no := range []string{"RFD_001_R1", "RFD_001_R2"} {
		if v := wxRefundOf(t, b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", refundTo("RFD_001", no, 400, 1000, recv.url))); v.Status != "PROCESSING" {
			t.Fatalf("refund %s: %+v, want PROCESSING", no, v)
		}
	}
	if err := b.sim.EndWechatRefund("RFD_001_R2", sim.WechatRefundClosed); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // several looks of the watcher
	if got := recv.received(); len(got) != 0 {
		t.Fatalf("%d notifications before the refunds ended", len(got))
	}
	b.clock.Advance(time.Minute)
	waitRefundNotify(t, b.sim, "RFD_001_R1")
	waitRefundNotify(t, b.sim, "RFD_001_R2")
	events := map[string]string{}
	for _, d := range recv.received() {
		n := wxOpenRefundNotice(t, b.wk, d.body)
		events[n.refund.OutRefundNo] = n.EventType
	}
	if events["RFD_001_R1"] != "REFUND.SUCCESS" || events["RFD_001_R2"] != "REFUND.CLOSED" || len(events) != 2 {
		t.Fatalf("notifications %v", events)
	}
	if err := b.sim.EndWechatRefund("RFD_001_R1", sim.WechatRefundAbnormal); orderpay.ErrorCode(err) != orderpay.ECONFLICT {
		t.Fatalf("ending a refund that succeeded: %v, want ECONFLICT", err)
	}
	if err := b.sim.EndWechatRefund("RFD_001_R9", "SUCCESS"); orderpay.ErrorCode(err) != orderpay.EINVALID {
		t.Fatalf("ending a refund SUCCESS: %v, want EINVALID", err)
	}
	if e := wxEntry(t, b.sim, "RFD_001"); e.Refunded != 400 {
		t.Fatalf("ledger refunded %d, want 400", e.Refunded)
	}
}

// Refund notifications go through the same delivery as payments': retried on WeChat's
// schedule (divided by the time scale) until a 200 or 204, and under the same notification
// faults: a dropped attempt is retried, and bad copies (forged, tampered amount, another
// merchant) come before the genuine one.
func TestWechatRefundNotify_RetriedOnTheScheduleAndFaultedLikePayments(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{TimeScale: 1000, Faults: sim.FaultPlan{Rules: []sim.FaultRule{
		{Channel: "wechat", Method: sim.MethodNotify, Kind: sim.FaultDrop, Limit: 1},
	}}})
	// Refuses the first attempt that reaches it, acknowledges the next; records when each
	// arrived.
	arrivals := make(chan time.Time, 10)
	counting := wxServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals <- time.Now()
		if len(arrivals) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.paid(t, "RFS_001", 500)
	start := time.Now()
	b.refund(t, "RFS_001", "RFS_001_R0", 1, 500) // no notify_url: no notification
	b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", refundTo("RFS_001", "RFS_001_R1", 100, 500, counting.URL+"/n"))
	st := waitRefundNotify(t, b.sim, "RFS_001_R1")
	// Dropped, then refused with a 500, then acknowledged: the second and third attempts
	// come 15 s and 15 s (simulated) after the one before.
	if !st.Acked || len(st.Attempts) != 3 || !st.Attempts[0].Dropped || st.Attempts[1].Status != 500 || !st.Attempts[2].Acked {
		t.Fatalf("delivery %+v, want dropped, refused, acknowledged", st)
	}
	second, third := <-arrivals, <-arrivals
	if second.Sub(start) < 15*time.Millisecond || third.Sub(second) < 15*time.Millisecond {
		t.Fatalf("attempts at +%v and +%v, want 15 s and 15 s apart at a time scale of 1000", second.Sub(start), third.Sub(second))
	}
	for _, s := range b.sim.NotifyStats() {
		if s.OutRefundNo == "RFS_001_R0" {
			t.Fatalf("a refund without notify_url notified: %+v", s)
		}
	}

	for _, kind := range []string{sim.FaultForgeSignature, sim.FaultTamperAmount, sim.FaultWrongApp} {
		if err := b.sim.SetFaults(sim.FaultPlan{Rules: []sim.FaultRule{{Channel: "wechat", Method: sim.MethodNotify, Kind: kind, Limit: 1}}}); err != nil {
			t.Fatal(err)
		}
		bad := newWxReceiver(t, reply{http.StatusNoContent, ""})
		no := "RFS_001_" + kind
		b.call(t, http.MethodPost, "/v3/refund/domestic/refunds", refundTo("RFS_001", no, 10, 500, bad.url))
		st := waitRefundNotify(t, b.sim, no)
		got := bad.received()
		if len(got) != 2 || len(st.Bad) != 1 || st.Bad[0].Variant != kind {
			t.Fatalf("%s: %d deliveries, %+v; want the bad copy, then the genuine one", kind, len(got), st)
		}
		n, g := wxOpenRefundNotice(t, b.wk, got[0].body), wxOpenRefundNotice(t, b.wk, got[1].body)
		sigErr := b.verifyAnswer(got[0])
		switch kind {
		case sim.FaultForgeSignature:
			if sigErr == nil || n.refund != g.refund {
				t.Fatalf("forged copy: %v %+v", sigErr, n.refund)
			}
		case sim.FaultTamperAmount:
			if sigErr != nil || n.refund.Amount.Refund != 9 || g.refund.Amount.Refund != 10 {
				t.Fatalf("tampered copy: %v %+v", sigErr, n.refund)
			}
		case sim.FaultWrongApp:
			if sigErr != nil || n.refund.MchID == b.wk.MchID || g.refund.MchID != b.wk.MchID {
				t.Fatalf("wrong-app copy: %v %+v", sigErr, n.refund)
			}
		}
		if b.verifyAnswer(got[1]) != nil {
			t.Fatalf("%s: the genuine copy does not verify", kind)
		}
	}
}
