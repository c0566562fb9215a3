package sim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"orderpay/channel/sim"
)

// wxNotice is a decoded notification: the envelope and its decrypted Transaction.
type wxNotice struct {
	ID           string `json:"id"`
	CreateTime   string `json:"create_time"`
	EventType    string `json:"event_type"`
	ResourceType string `json:"resource_type"`
	Summary      string `json:"summary"`
	Resource     struct {
		OriginalType   string `json:"original_type"`
		Algorithm      string `json:"algorithm"`
		Ciphertext     string `json:"ciphertext"`
		AssociatedData string `json:"associated_data"`
		Nonce          string `json:"nonce"`
	} `json:"resource"`
	txn struct {
		AppID         string `json:"appid"`
		MchID         string `json:"mchid"`
		OutTradeNo    string `json:"out_trade_no"`
		TransactionID string `json:"transaction_id"`
		TradeState    string `json:"trade_state"`
		TradeType     string `json:"trade_type"`
		SuccessTime   string `json:"success_time"`
		Amount        struct {
			Total      int64 `json:"total"`
			PayerTotal int64 `json:"payer_total"`
		} `json:"amount"`
	}
}

// wxOpenNotification decodes a notification body and decrypts its resource with the APIv3
// key, failing the test if either fails.
func wxOpenNotification(t *testing.T, wk *sim.WechatKeys, body []byte) wxNotice {
	t.Helper()
	var n wxNotice
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatalf("notification %q: %v", body, err)
	}
	plain, err := sim.DecryptWechatResource(wk.APIv3Key, n.Resource.Ciphertext, n.Resource.AssociatedData, n.Resource.Nonce)
	if err != nil {
		t.Fatalf("notification resource: %v", err)
	}
	if err := json.Unmarshal(plain, &n.txn); err != nil {
		t.Fatalf("notification plaintext %q: %v", plain, err)
	}
	return n
}

func TestWechatNotify_EncryptedSignedAndRetriedUntil200Or204(t *testing.T) {
	t.Parallel()
	b := wxSetup(t, sim.Config{TimeScale: fastTime})
	recv := newWxReceiver(t,
		reply{http.StatusInternalServerError, `{"code":"FAIL","message":"失败"}`},
		reply{http.StatusBadRequest, ""},
		reply{http.StatusNoContent, ""},
	)
	code := b.prepay(t, "NTF_001", 4200, b.clock.Now().Add(time.Hour), recv.url)
	paid, err := b.sim.Pay(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	st := waitNotify(t, b.sim, "NTF_001")
	if !st.Acked || len(st.Attempts) != 3 || st.Attempts[0].Status != 500 || st.Attempts[1].Status != 400 ||
		!st.Attempts[2].Acked || st.Channel != "wechat" || st.URL != recv.url {
		t.Fatalf("delivery %+v, want acknowledged by the 204 on the third attempt", st)
	}
	got := recv.received()
	if len(got) != 3 {
		t.Fatalf("receiver saw %d attempts", len(got))
	}
	for i, d := range got {
		if err := verifyWechatSignature(b.wk, d.header, d.body, b.wallClock.Now()); err != nil {
			t.Fatalf("attempt %d signature: %v", i, err)
		}
		n := wxOpenNotification(t, b.wk, d.body)
		if n.ID != st.NotifyID || n.ID == "" || n.EventType != "TRANSACTION.SUCCESS" || n.ResourceType != "encrypt-resource" ||
			n.Summary != "支付成功" || n.Resource.Algorithm != "AEAD_AES_256_GCM" || n.Resource.OriginalType != "transaction" ||
			len(n.Resource.Nonce) != 12 || n.CreateTime != b.clock.Now().In(cst).Format(time.RFC3339) {
			t.Errorf("attempt %d envelope %+v", i, n)
		}
		if n.txn.OutTradeNo != "NTF_001" || n.txn.TransactionID != paid.TradeNo || n.txn.TradeState != "SUCCESS" ||
			n.txn.Amount.Total != 4200 || n.txn.Amount.PayerTotal != 4200 || n.txn.MchID != b.wk.MchID ||
			n.txn.AppID != b.wk.AppID || n.txn.TradeType != "NATIVE" || n.txn.SuccessTime == "" {
			t.Errorf("attempt %d transaction %+v", i, n.txn)
		}
		// The signature covers the exact body: one changed byte and it fails.
		changed := append([]byte(nil), d.body...)
		changed[len(changed)/2] ^= 0x01
		if verifyWechatSignature(b.wk, d.header, changed, b.wallClock.Now()) == nil {
			t.Fatalf("attempt %d: the signature verified over a changed body", i)
		}
	}
	// The status decides, not the body: 200 with {"code":"FAIL"} is an acknowledgement.
	recv2 := newWxReceiver(t, reply{http.StatusOK, `{"code":"FAIL","message":"失败"}`})
	code = b.prepay(t, "NTF_002", 100, b.clock.Now().Add(time.Hour), recv2.url)
	if _, err := b.sim.Pay(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	if st := waitNotify(t, b.sim, "NTF_002"); !st.Acked || len(st.Attempts) != 1 {
		t.Fatalf("200 with a FAIL body: %+v, want acknowledged at once", st)
	}
}

func TestWechatNotify_DefaultScheduleIs16AttemptsIn24h4m(t *testing.T) {
	t.Parallel()
	var total time.Duration
	for _, d := range sim.WechatNotifySchedule() {
		total += d
	}
	if n := len(sim.WechatNotifySchedule()) + 1; n != 16 || total != 24*time.Hour+4*time.Minute {
		t.Fatalf("%d attempts over %v, want 16 over 24h4m", n, total)
	}
	b := wxSetup(t, sim.Config{TimeScale: 1e7})
	recv := newWxReceiver(t, reply{http.StatusServiceUnavailable, ""})
	code := b.prepay(t, "NTF_003", 100, b.clock.Now().Add(time.Hour), recv.url)
	if _, err := b.sim.Pay(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	if st := waitNotify(t, b.sim, "NTF_003"); !st.GaveUp || st.Acked || len(st.Attempts) != 16 {
		t.Fatalf("never acknowledged: %+v, want 16 attempts then give up", st)
	}
	// An order without notify_url is paid without a notification.
	code = b.prepay(t, "NTF_004", 100, b.clock.Now().Add(time.Hour), "")
	if _, err := b.sim.Pay(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	for _, st := range b.sim.NotifyStats() {
		if st.OutTradeNo == "NTF_004" {
			t.Fatalf("a notification without notify_url: %+v", st)
		}
	}
}

func TestWechatNotify_BadCopiesComeFirstAndOnlyTheirFlawIsWrong(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{sim.FaultForgeSignature, sim.FaultTamperAmount, sim.FaultWrongApp} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := wxSetup(t, sim.Config{TimeScale: fastTime, Faults: sim.FaultPlan{Seed: 3, Rules: []sim.FaultRule{
				{Channel: "wechat", Method: sim.MethodNotify, Kind: kind, Limit: 1},
			}}})
			recv := newWxReceiver(t, reply{http.StatusNoContent, ""})
			code := b.prepay(t, "BAD_001", 1000, b.clock.Now().Add(time.Hour), recv.url)
			if _, err := b.sim.Pay(context.Background(), code); err != nil {
				t.Fatal(err)
			}
			st := waitNotify(t, b.sim, "BAD_001")
			got := recv.received()
			if len(got) != 2 || len(st.Bad) != 1 || st.Bad[0].Variant != kind || len(st.Attempts) != 1 {
				t.Fatalf("deliveries %d, stats %+v; want the bad copy, then the genuine one", len(got), st)
			}
			bad, genuine := got[0], got[1]
			if err := verifyWechatSignature(b.wk, genuine.header, genuine.body, b.wallClock.Now()); err != nil {
				t.Fatalf("genuine copy: %v", err)
			}
			g := wxOpenNotification(t, b.wk, genuine.body)
			sigErr := verifyWechatSignature(b.wk, bad.header, bad.body, b.wallClock.Now())
			n := wxOpenNotification(t, b.wk, bad.body) // every variant is correctly encrypted
			switch kind {
			case sim.FaultForgeSignature:
				if sigErr == nil || n.txn != g.txn {
					t.Fatalf("forged copy: signature error %v, transaction %+v", sigErr, n.txn)
				}
			case sim.FaultTamperAmount:
				if sigErr != nil || n.txn.Amount.Total != 999 || n.txn.Amount.PayerTotal != 999 || n.txn.OutTradeNo != "BAD_001" {
					t.Fatalf("tampered copy: signature error %v, transaction %+v", sigErr, n.txn)
				}
			case sim.FaultWrongApp:
				if sigErr != nil || n.txn.MchID == b.wk.MchID || n.txn.AppID == b.wk.AppID || n.txn.Amount.Total != 1000 {
					t.Fatalf("wrong-app copy: signature error %v, transaction %+v", sigErr, n.txn)
				}
			}
			if n.ID != g.ID {
				t.Errorf("the bad copy has id %s, the genuine %s", n.ID, g.ID)
			}
		})
	}
}

func TestWechatResource_RoundTripsAndRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	wk := &testKeys(t).Wechat
	b := wxSetup(t, sim.Config{TimeScale: fastTime})
	recv := newWxReceiver(t, reply{http.StatusOK, ""})
	code := b.prepay(t, "RES_001", 100, b.clock.Now().Add(time.Hour), recv.url)
	if _, err := b.sim.Pay(context.Background(), code); err != nil {
		t.Fatal(err)
	}
	waitNotify(t, b.sim, "RES_001")
	n := wxOpenNotification(t, wk, recv.received()[0].body)
	if _, err := sim.DecryptWechatResource("0123456789abcdef0123456789abcdef", n.Resource.Ciphertext, n.Resource.AssociatedData, n.Resource.Nonce); err == nil {
		t.Fatal("the resource decrypted with another APIv3 key")
	}
	if _, err := sim.DecryptWechatResource(wk.APIv3Key, n.Resource.Ciphertext, "refund", n.Resource.Nonce); err == nil {
		t.Fatal("the resource decrypted with other associated data")
	}
}
