package storetest

import (
	"context"
	"testing"
	"time"

	"orderpay"
)

// The audit log keeps every operator action as written, and lists them newest first, by
// actor or by order.
func testAuditLog(t *testing.T, s orderpay.Store) {
	ctx := context.Background()
	log, ok := s.(orderpay.AuditLog)
	if !ok {
		t.Skip("the store keeps no audit log")
	}
	for i, a := range []orderpay.OperatorAction{
		{Actor: "operator:li", Role: orderpay.RoleOperator, Action: "POST /admin/shipments/{shipment_no}/ship", Target: "shipment_no=SH1", OrderNo: "O1", Status: 200,
			Addr: "203.0.113.7"},
		{Actor: "operator:wang", Role: orderpay.RoleViewer, Action: "POST /admin/after-sales/{after_sale_no}/approve", Target: "after_sale_no=AS1", OrderNo: "O1",
			Status: 403, Code: orderpay.EFORBIDDEN, Detail: "a viewer may not"},
		{Actor: "operator:li", Role: orderpay.RoleAdmin, Action: "POST /admin/skus", Status: 201, Detail: "bad\x00byte \xff"},
	} {
		a.At = t0.Add(time.Duration(i) * time.Second)
		if err := log.LogOperatorAction(ctx, &a); err != nil {
			t.Fatal(err)
		}
	}
	all, err := log.OperatorActions(ctx, orderpay.AuditFilter{}, 10)
	if err != nil || len(all) != 3 || all[0].Action != "POST /admin/skus" || all[2].Target != "shipment_no=SH1" || !all[2].At.Equal(t0) {
		t.Fatalf("all: %+v, %v", all, err)
	}
	if all[2].Addr != "203.0.113.7" || all[0].Addr != "" {
		t.Fatalf("addresses stored as %q and %q", all[2].Addr, all[0].Addr)
	}
	if all[0].Detail != "badbyte \uFFFD" {
		t.Fatalf("detail stored as %q", all[0].Detail)
	}
	byLi, _ := log.OperatorActions(ctx, orderpay.AuditFilter{Actor: "operator:li"}, 10)
	ofO1, _ := log.OperatorActions(ctx, orderpay.AuditFilter{OrderNo: "O1"}, 10)
	both, _ := log.OperatorActions(ctx, orderpay.AuditFilter{Actor: "operator:wang", OrderNo: "O1"}, 10)
	if len(byLi) != 2 || len(ofO1) != 2 || len(both) != 1 || both[0].Code != orderpay.EFORBIDDEN || both[0].Status != 403 || both[0].Role != orderpay.RoleViewer {
		t.Fatalf("by li %+v, of O1 %+v, wang on O1 %+v", byLi, ofO1, both)
	}
	if one, _ := log.OperatorActions(ctx, orderpay.AuditFilter{}, 1); len(one) != 1 {
		t.Fatalf("limit 1: %+v", one)
	}
}
