package orderpay_test

import (
	"testing"

	"orderpay"
)

// checkMachine tries every (state, event) pair: the pairs in want must lead to their
// target, and every other pair must be refused with ECONFLICT.
func checkMachine[S ~string, E ~string](t *testing.T, m *orderpay.Machine[S, E], states []S, events []E, want map[S]map[E]S, final []S) {
	t.Helper()
	legal, illegal := 0, 0
	for _, from := range states {
		for _, ev := range events {
			got, err := m.Next(from, ev)
			if to, ok := want[from][ev]; ok {
				legal++
				if err != nil || got != to {
					t.Errorf("%s --%s--> got %q, %v; want %q", from, ev, got, err, to)
				}
				continue
			}
			illegal++
			if code := orderpay.ErrorCode(err); code != orderpay.ECONFLICT || got != "" {
				t.Errorf("%s --%s--> got %q, code %q; want refusal with ECONFLICT", from, ev, got, code)
			}
		}
	}
	if n := len(m.Table()); n != legal {
		t.Errorf("the table has %d transitions, the test expects %d", n, legal)
	}
	for _, s := range states {
		isFinal := false
		for _, f := range final {
			isFinal = isFinal || f == s
		}
		if m.Final(s) != isFinal {
			t.Errorf("Final(%s) = %v, want %v", s, m.Final(s), isFinal)
		}
	}
	t.Logf("%d legal and %d illegal transitions checked", legal, illegal)
}

func TestOrderMachine(t *testing.T) {
	states := []orderpay.OrderStatus{orderpay.OrderPendingPayment, orderpay.OrderPaid, orderpay.OrderShipped,
		orderpay.OrderReceived, orderpay.OrderCompleted, orderpay.OrderCancelled, orderpay.OrderRefunded}
	events := []orderpay.OrderEvent{orderpay.OrderEventPay, orderpay.OrderEventCancel, orderpay.OrderEventShip,
		orderpay.OrderEventReceive, orderpay.OrderEventComplete, orderpay.OrderEventRefund}
	if got := orderpay.OrderMachine.States(); len(got) != len(states) {
		t.Fatalf("machine states %v, test covers %v", got, states)
	}
	checkMachine(t, orderpay.OrderMachine, states, events, map[orderpay.OrderStatus]map[orderpay.OrderEvent]orderpay.OrderStatus{
		orderpay.OrderPendingPayment: {orderpay.OrderEventPay: orderpay.OrderPaid, orderpay.OrderEventCancel: orderpay.OrderCancelled},
		orderpay.OrderPaid:           {orderpay.OrderEventShip: orderpay.OrderShipped, orderpay.OrderEventRefund: orderpay.OrderRefunded},
		orderpay.OrderShipped:        {orderpay.OrderEventReceive: orderpay.OrderReceived},
		orderpay.OrderReceived:       {orderpay.OrderEventComplete: orderpay.OrderCompleted},
	}, []orderpay.OrderStatus{orderpay.OrderCompleted, orderpay.OrderCancelled, orderpay.OrderRefunded})
}

func TestPaymentMachine(t *testing.T) {
	states := []orderpay.PaymentStatus{orderpay.PaymentUnpaid, orderpay.PaymentPaying, orderpay.PaymentSuccess,
		orderpay.PaymentFailed, orderpay.PaymentClosed}
	events := []orderpay.PaymentEvent{orderpay.PaymentEventStart, orderpay.PaymentEventSucceed, orderpay.PaymentEventFail, orderpay.PaymentEventClose}
	if got := orderpay.PaymentMachine.States(); len(got) != len(states) {
		t.Fatalf("machine states %v, test covers %v", got, states)
	}
	checkMachine(t, orderpay.PaymentMachine, states, events, map[orderpay.PaymentStatus]map[orderpay.PaymentEvent]orderpay.PaymentStatus{
		orderpay.PaymentUnpaid: {orderpay.PaymentEventStart: orderpay.PaymentPaying, orderpay.PaymentEventClose: orderpay.PaymentClosed},
		orderpay.PaymentPaying: {orderpay.PaymentEventSucceed: orderpay.PaymentSuccess, orderpay.PaymentEventFail: orderpay.PaymentFailed,
			orderpay.PaymentEventClose: orderpay.PaymentClosed},
	}, []orderpay.PaymentStatus{orderpay.PaymentSuccess, orderpay.PaymentFailed, orderpay.PaymentClosed})
}

func TestChannelOrderMachine(t *testing.T) {
	states := []orderpay.ChannelOrderStatus{orderpay.ChannelOrderCreated, orderpay.ChannelOrderPaying, orderpay.ChannelOrderSuccess,
		orderpay.ChannelOrderFailed, orderpay.ChannelOrderClosed}
	events := []orderpay.ChannelOrderEvent{orderpay.ChannelOrderEventSubmit, orderpay.ChannelOrderEventReject, orderpay.ChannelOrderEventSucceed,
		orderpay.ChannelOrderEventFail, orderpay.ChannelOrderEventClose}
	if got := orderpay.ChannelOrderMachine.States(); len(got) != len(states) {
		t.Fatalf("machine states %v, test covers %v", got, states)
	}
	checkMachine(t, orderpay.ChannelOrderMachine, states, events, map[orderpay.ChannelOrderStatus]map[orderpay.ChannelOrderEvent]orderpay.ChannelOrderStatus{
		orderpay.ChannelOrderCreated: {orderpay.ChannelOrderEventSubmit: orderpay.ChannelOrderPaying, orderpay.ChannelOrderEventReject: orderpay.ChannelOrderFailed,
			orderpay.ChannelOrderEventClose: orderpay.ChannelOrderClosed},
		orderpay.ChannelOrderPaying: {orderpay.ChannelOrderEventSucceed: orderpay.ChannelOrderSuccess, orderpay.ChannelOrderEventFail: orderpay.ChannelOrderFailed,
			orderpay.ChannelOrderEventClose: orderpay.ChannelOrderClosed},
		// A verified payment of a closed or failed attempt: late money, recorded and refunded.
		orderpay.ChannelOrderClosed: {orderpay.ChannelOrderEventSucceed: orderpay.ChannelOrderSuccess},
		orderpay.ChannelOrderFailed: {orderpay.ChannelOrderEventSucceed: orderpay.ChannelOrderSuccess},
	}, []orderpay.ChannelOrderStatus{orderpay.ChannelOrderSuccess})
}

func TestChannelRefundMachine(t *testing.T) {
	states := []orderpay.ChannelRefundStatus{orderpay.ChannelRefundPending, orderpay.ChannelRefundProcessing, orderpay.ChannelRefundSuccess,
		orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundResolved}
	events := []orderpay.ChannelRefundEvent{orderpay.ChannelRefundEventAccept, orderpay.ChannelRefundEventSucceed, orderpay.ChannelRefundEventRetry,
		orderpay.ChannelRefundEventEscalate, orderpay.ChannelRefundEventOperatorRetry, orderpay.ChannelRefundEventResolve,
		orderpay.ChannelRefundEventRetryNow}
	if got := orderpay.ChannelRefundMachine.States(); len(got) != len(states) {
		t.Fatalf("machine states %v, test covers %v", got, states)
	}
	type m = map[orderpay.ChannelRefundEvent]orderpay.ChannelRefundStatus
	checkMachine(t, orderpay.ChannelRefundMachine, states, events, map[orderpay.ChannelRefundStatus]map[orderpay.ChannelRefundEvent]orderpay.ChannelRefundStatus{
		orderpay.ChannelRefundPending: m{orderpay.ChannelRefundEventAccept: orderpay.ChannelRefundProcessing,
			orderpay.ChannelRefundEventSucceed: orderpay.ChannelRefundSuccess, orderpay.ChannelRefundEventRetry: orderpay.ChannelRefundPending,
			orderpay.ChannelRefundEventEscalate: orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundEventRetryNow: orderpay.ChannelRefundPending},
		orderpay.ChannelRefundProcessing: m{orderpay.ChannelRefundEventSucceed: orderpay.ChannelRefundSuccess,
			orderpay.ChannelRefundEventEscalate: orderpay.ChannelRefundNeedsAction, orderpay.ChannelRefundEventRetryNow: orderpay.ChannelRefundProcessing},
		// Only an operator moves a refund out of the queue, or the channel's verified word
		// that it refunded after all.
		orderpay.ChannelRefundNeedsAction: m{orderpay.ChannelRefundEventOperatorRetry: orderpay.ChannelRefundPending,
			orderpay.ChannelRefundEventResolve: orderpay.ChannelRefundResolved, orderpay.ChannelRefundEventSucceed: orderpay.ChannelRefundSuccess},
	}, []orderpay.ChannelRefundStatus{orderpay.ChannelRefundSuccess, orderpay.ChannelRefundResolved})
	for _, s := range states {
		if s.Owed() != (s != orderpay.ChannelRefundSuccess && s != orderpay.ChannelRefundResolved) {
			t.Errorf("%s: owed %v", s, s.Owed())
		}
	}
}

func TestMachineRejectsDuplicateRows(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a table with the same (state, event) twice must not build")
		}
	}()
	orderpay.NewMachine("broken", []orderpay.Transition[string, string]{{"A", "go", "B"}, {"A", "go", "C"}})
}
