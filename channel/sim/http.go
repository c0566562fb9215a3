package sim

import (
	"encoding/json"
	"net/http"
	"time"

	"orderpay"
)

// ServerName is the Server header of the simulator's /healthz: orderpay serve, finding its
// port taken, tells another orderpay's simulator by it.
const ServerName = "orderpay-sim"

func (s *Simulator) routes() http.Handler {
	mux := http.NewServeMux()
	s.registerAlipay(mux)
	s.registerWechat(mux)
	mux.HandleFunc("POST /sim/scan", s.serveWallet(WalletScan, true))
	mux.HandleFunc("POST /sim/pay", s.serveWallet(WalletPay, false))
	mux.HandleFunc("GET /sim/ledger", s.serveLedger)
	mux.HandleFunc("GET /sim/wallet/identity", s.serveIdentity)
	mux.HandleFunc("/sim/faults", s.serveFaults)
	mux.HandleFunc("POST /sim/topup", s.serveTopUp)
	mux.HandleFunc("GET /sim/accounts", s.serveAccounts)
	s.registerWalletPage(mux)
	s.registerCodes(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Server", ServerName)
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// walletRequest is the body of POST /sim/pay and POST /sim/scan: a scanned code (qr_code;
// channel may be left out: a code's shape tells its channel), or, on POST /sim/pay, a pay
// instruction of any method and the device it is paid on (PayAs). Action defaults to the
// endpoint's own.
type walletRequest struct {
	QRCode  string `json:"qr_code"`
	Channel string `json:"channel"`
	Action  string `json:"action"`
	PayAs
}

// serveWallet plays the buyer's wallet app: POST /sim/pay does defaultAction (pay) or the
// body's action; POST /sim/scan only scans (fixed). The answer is the PayResult, or an
// error body {"error":{"code","message"}} with 400 (EINVALID), 404 (ENOTFOUND) or 409
// (ECONFLICT).
func (s *Simulator) serveWallet(defaultAction string, fixed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req walletRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		if err := dec.Decode(&req); err != nil {
			writeError(w, orderpay.Errorf(orderpay.EINVALID,
				"body must be JSON {\"qr_code\":\"…\",\"channel\":\"alipay|wechat\",\"action\":\"pay|scan|decline\"}"))
			return
		}
		if req.Pay != nil {
			if fixed {
				writeError(w, orderpay.Errorf(orderpay.EINVALID, "POST %s scans a qr_code; pay an instruction with POST /sim/pay", r.URL.Path))
				return
			}
			req.PayAs.Action = req.Action // "action" is read into the outer field
			res, err := s.PayInstruction(r.Context(), req.PayAs)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, res)
			return
		}
		action := req.Action
		switch {
		case action == "":
			action = defaultAction
		case fixed && action != defaultAction:
			writeError(w, orderpay.Errorf(orderpay.EINVALID, "POST %s only does %s; use POST /sim/pay for %s", r.URL.Path, defaultAction, action))
			return
		}
		switch got := QRChannel(req.QRCode); {
		case req.Channel == "" || got == "":
			// Unknown codes are reported by the wallet itself.
		case req.Channel != orderpay.ChannelAlipay && req.Channel != orderpay.ChannelWechat:
			writeError(w, orderpay.Errorf(orderpay.EINVALID, "channel must be alipay or wechat"))
			return
		case req.Channel != got:
			writeError(w, orderpay.Errorf(orderpay.EINVALID, "qr_code is a %s code, not %s", got, req.Channel))
			return
		}
		res, err := s.Wallet(r.Context(), req.QRCode, action)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}
}

// ledgerJSON is one row of GET /sim/ledger. Amounts are fen; paid_at is RFC 3339, or null
// for a trade that was never paid. refunds lists every refund the channel accepted ([] if
// none); refunded is the sum of those with status SUCCESS. app_id is the Alipay app the
// trade was made under (absent for WeChat Pay); method the way it was paid (qr, barcode, …).
type ledgerJSON struct {
	Channel    string             `json:"channel"`
	Method     orderpay.PayMethod `json:"method"`
	AppID      string             `json:"app_id,omitempty"`
	OutTradeNo string             `json:"out_trade_no"`
	TradeNo    string             `json:"trade_no"`
	Status     string             `json:"status"`
	Amount     int64              `json:"amount"`
	Refunded   int64              `json:"refunded"`
	PaidAt     *time.Time         `json:"paid_at"`
	Refunds    []ledgerRefundJSON `json:"refunds"`
}

// ledgerRefundJSON is one refund of a ledger row: out_refund_no (Alipay's out_request_no),
// amount in fen, status (SUCCESS, PROCESSING, ABNORMAL or CLOSED), and settled_at, RFC 3339
// for a SUCCESS refund and null otherwise.
type ledgerRefundJSON struct {
	OutRefundNo string     `json:"out_refund_no"`
	Amount      int64      `json:"amount"`
	Status      string     `json:"status"`
	SettledAt   *time.Time `json:"settled_at"`
}

func (s *Simulator) serveLedger(w http.ResponseWriter, _ *http.Request) {
	entries := s.Ledger()
	rows := make([]ledgerJSON, 0, len(entries))
	for _, e := range entries {
		row := ledgerJSON{
			Channel:    e.Channel,
			Method:     e.Method,
			AppID:      e.AppID,
			OutTradeNo: e.OutTradeNo,
			TradeNo:    e.TradeNo,
			Status:     e.Status,
			Amount:     e.Amount,
			Refunded:   e.Refunded,
			Refunds:    make([]ledgerRefundJSON, 0, len(e.Refunds)),
		}
		if !e.PaidAt.IsZero() {
			paidAt := e.PaidAt
			row.PaidAt = &paidAt
		}
		for _, r := range e.Refunds {
			rr := ledgerRefundJSON{OutRefundNo: r.OutRefundNo, Amount: r.Amount, Status: r.Status}
			if !r.SettledAt.IsZero() {
				settledAt := r.SettledAt
				rr.SettledAt = &settledAt
			}
			row.Refunds = append(row.Refunds, rr)
		}
		rows = append(rows, row)
	}
	writeJSON(w, http.StatusOK, rows)
}

// errorStatus maps orderpay error codes to HTTP statuses for the simulator's own endpoints.
var errorStatus = map[string]int{
	orderpay.EINVALID:  http.StatusBadRequest,
	orderpay.ENOTFOUND: http.StatusNotFound,
	orderpay.ECONFLICT: http.StatusConflict,
}

func writeError(w http.ResponseWriter, err error) {
	code := orderpay.ErrorCode(err)
	status, ok := errorStatus[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]any{
		"error": map[string]string{"code": code, "message": orderpay.ErrorMessage(err)},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serveIdentity is GET /sim/wallet/identity?buyer=NAME[&appid=APPID]: the simulated buyer's
// openid for that WeChat appid and Alipay user id (Identity), what the OAuth flows return.
func (s *Simulator) serveIdentity(w http.ResponseWriter, r *http.Request) {
	buyer := r.URL.Query().Get("buyer")
	if buyer == "" || len(buyer) > 64 {
		writeError(w, orderpay.Errorf(orderpay.EINVALID, "buyer is required, at most 64 bytes"))
		return
	}
	writeJSON(w, http.StatusOK, s.IdentityOf(buyer, r.URL.Query().Get("appid")))
}
