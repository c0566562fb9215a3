package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"orderpay"
	"orderpay/payment"
)

// The return from a cashier (docs/api.md, "Back from the cashier"). A wallet that sent the
// buyer's browser to its own pages sends it back to the shop's pay page: Alipay PC and WAP
// to return_url with signed parameters (同步返回), WeChat H5 to redirect_url with none. The
// page hands what it came back with to POST /v1/orders/{order_no}/return, which verifies
// what can be verified and asks the channel once (as the buyer's poll does). Nothing a
// return says is ever applied: a payment is recorded from the channel's notification or
// its answer to a query, never from a browser's address bar, so a forged or replayed
// return changes only what the page says while it checks.

// ReturnCheck verifies the parameters a channel's cashier added to the shop's return
// address (alipay.Channel.VerifyReturn), answering the attempt (out_trade_no) and amount
// the channel signed. A return that does not verify is an error.
type ReturnCheck func(ctx context.Context, query url.Values) (outTradeNo string, amount int64, err error)

// maxReturnQuery bounds the return's query string: Alipay's signed return is under 1 KiB.
const maxReturnQuery = 4096

// returnJSON is the answer of POST /v1/orders/{order_no}/return.
type returnJSON struct {
	// Verified: the channel signed that the buyer came back from paying this order's
	// attempt (Channel, OutTradeNo) this amount. Only a hint for the page's words: Status
	// decides.
	Verified   bool   `json:"verified"`
	Channel    string `json:"channel,omitempty"`
	OutTradeNo string `json:"out_trade_no,omitempty"`
	// Reason says why the return was not verified: it carried nothing signed, its
	// signature or app did not verify, or it is for another order or amount.
	Reason string `json:"reason,omitempty"`
	// Status is the order's, after the channel was asked.
	Status orderpay.OrderStatus `json:"status"`
}

// payReturn is POST /v1/orders/{order_no}/return {"query": "<the return's query string>"}
// for the order's own buyer (or its scan session).
func (s *Server) payReturn(w http.ResponseWriter, r *http.Request, c caller) {
	var req struct {
		Query string `json:"query"`
	}
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Query) > maxReturnQuery {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "query: at most %d bytes", maxReturnQuery))
		return
	}
	q, err := url.ParseQuery(strings.TrimPrefix(req.Query, "?"))
	if err != nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.EINVALID, "query: not a URL query string: %v", err))
		return
	}
	page, err := s.Orders.Page(r.Context(), r.PathValue("order_no"))
	if err == nil {
		err = owns(c, page.Order)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := s.checkReturn(r.Context(), q, func() ([]orderpay.ChannelOrder, error) {
		if page.Payment != nil || s.Ops == nil {
			return page.Attempts, nil
		}
		// Past PENDING_PAYMENT the page is read without its attempts.
		return s.Ops.ChannelOrders(r.Context(), payment.PaymentNo(page.Order.No))
	})
	if page, err = s.Orders.WatchPage(r.Context(), page); err != nil {
		s.writeError(w, r, err)
		return
	}
	out.Status = page.Order.Status
	writeJSON(w, http.StatusOK, out)
}

// checkReturn verifies q with each channel's ReturnCheck and matches what it signed to one
// of the order's attempts, of that channel and amount.
func (s *Server) checkReturn(ctx context.Context, q url.Values, attemptsOf func() ([]orderpay.ChannelOrder, error)) returnJSON {
	if !q.Has("sign") {
		return returnJSON{Reason: "the return carries nothing signed: the channel is asked"}
	}
	channels := make([]string, 0, len(s.Returns))
	for ch := range s.Returns {
		channels = append(channels, ch)
	}
	slices.Sort(channels)
	for _, ch := range channels {
		outTradeNo, amount, err := s.Returns[ch](ctx, q)
		if err != nil {
			continue
		}
		attempts, err := attemptsOf()
		if err != nil {
			return returnJSON{Channel: ch, Reason: "the order's payments could not be read: the channel is asked"}
		}
		for _, co := range attempts {
			if co.Channel == ch && co.OutTradeNo == outTradeNo && co.Amount == amount {
				return returnJSON{Verified: true, Channel: ch, OutTradeNo: outTradeNo}
			}
		}
		return returnJSON{Channel: ch, Reason: "the return is signed for another order or amount"}
	}
	return returnJSON{Reason: "the return's signature does not verify"}
}
