package orderpay_test

import (
	"reflect"
	"testing"

	"orderpay"
)

func TestShipmentMachine(t *testing.T) {
	states := []orderpay.ShipmentStatus{orderpay.ShipmentPending, orderpay.ShipmentShipped, orderpay.ShipmentReceived, orderpay.ShipmentCancelled}
	events := []orderpay.ShipmentEvent{orderpay.ShipmentEventShip, orderpay.ShipmentEventExtend, orderpay.ShipmentEventReceive, orderpay.ShipmentEventCancel}
	checkMachine(t, orderpay.ShipmentMachine, states, events, map[orderpay.ShipmentStatus]map[orderpay.ShipmentEvent]orderpay.ShipmentStatus{
		orderpay.ShipmentPending: {orderpay.ShipmentEventShip: orderpay.ShipmentShipped, orderpay.ShipmentEventCancel: orderpay.ShipmentCancelled},
		orderpay.ShipmentShipped: {orderpay.ShipmentEventExtend: orderpay.ShipmentShipped, orderpay.ShipmentEventReceive: orderpay.ShipmentReceived},
	}, []orderpay.ShipmentStatus{orderpay.ShipmentReceived, orderpay.ShipmentCancelled})
}

func TestAfterSaleMachine(t *testing.T) {
	states := orderpay.AfterSaleMachine.States()
	if len(states) != 7 {
		t.Fatalf("states %v", states)
	}
	events := orderpay.AfterSaleMachine.Events()
	type m = map[orderpay.AfterSaleEvent]orderpay.AfterSaleStatus
	checkMachine(t, orderpay.AfterSaleMachine, states, events, map[orderpay.AfterSaleStatus]map[orderpay.AfterSaleEvent]orderpay.AfterSaleStatus{
		orderpay.AfterSaleRequested:     m{orderpay.AfterSaleEventApprove: orderpay.AfterSaleApproved, orderpay.AfterSaleEventReject: orderpay.AfterSaleRejected},
		orderpay.AfterSaleApproved:      m{orderpay.AfterSaleEventRefund: orderpay.AfterSaleRefunding, orderpay.AfterSaleEventAwaitGoods: orderpay.AfterSaleAwaitingGoods},
		orderpay.AfterSaleAwaitingGoods: m{orderpay.AfterSaleEventShipBack: orderpay.AfterSaleAwaitingGoods, orderpay.AfterSaleEventReceiveGoods: orderpay.AfterSaleGoodsReceived},
		orderpay.AfterSaleGoodsReceived: m{orderpay.AfterSaleEventRefund: orderpay.AfterSaleRefunding},
		// A refund the channel refuses stays REFUNDING: it is retried or goes before an
		// operator, and the request ends when the money is back, by the channel or by hand.
		orderpay.AfterSaleRefunding: m{orderpay.AfterSaleEventSucceed: orderpay.AfterSaleSucceeded},
	}, []orderpay.AfterSaleStatus{orderpay.AfterSaleRejected, orderpay.AfterSaleSucceeded})
}

// An order of three merchants' goods, one of them from two warehouses, with heavy units
// that do not fit one 20 kg parcel: one parcel per merchant and warehouse, the heavy line
// spread over parcels within the limit, and an oversize unit alone.
func TestPlanShipmentsSplitsByMerchantWarehouseAndPackageLimits(t *testing.T) {
	skus := map[string]*orderpay.SKU{
		"tea":     {SKU: "tea", MerchantID: "m-tea", Warehouse: "hangzhou", WeightG: 500, VolumeCm3: 2_000},
		"cup":     {SKU: "cup", MerchantID: "m-tea", Warehouse: "jingdezhen", WeightG: 300, VolumeCm3: 1_000},
		"rice":    {SKU: "rice", MerchantID: "m-grain", WeightG: 9_000, VolumeCm3: 10_000},
		"sofa":    {SKU: "sofa", MerchantID: "m-home", WeightG: 45_000, VolumeCm3: 900_000},
		"cushion": {SKU: "cushion", MerchantID: "m-home", WeightG: 800, VolumeCm3: 30_000},
	}
	items := []orderpay.OrderItem{
		{Line: 1, SKU: "tea", MerchantID: "m-tea", Qty: 2},
		{Line: 2, SKU: "cup", MerchantID: "m-tea", Qty: 4},
		{Line: 3, SKU: "rice", MerchantID: "m-grain", Qty: 5},
		{Line: 4, SKU: "sofa", MerchantID: "m-home", Qty: 1},
		{Line: 5, SKU: "cushion", MerchantID: "m-home", Qty: 5},
	}
	got, err := orderpay.PlanShipments(items, skus, orderpay.PackageLimits{MaxWeightG: 20_000, MaxVolumeCm3: 120_000})
	if err != nil {
		t.Fatal(err)
	}
	want := []orderpay.Parcel{
		// rice: 9 kg a bag, two bags per 20 kg parcel.
		{MerchantID: "m-grain", Warehouse: "default", WeightG: 18_000, VolumeCm3: 20_000, Items: []orderpay.ShipmentItem{{Line: 3, SKU: "rice", Qty: 2}}},
		{MerchantID: "m-grain", Warehouse: "default", WeightG: 18_000, VolumeCm3: 20_000, Items: []orderpay.ShipmentItem{{Line: 3, SKU: "rice", Qty: 2}}},
		{MerchantID: "m-grain", Warehouse: "default", WeightG: 9_000, VolumeCm3: 10_000, Items: []orderpay.ShipmentItem{{Line: 3, SKU: "rice", Qty: 1}}},
		// the sofa alone (oversize), the cushions by volume: four of 30 000 cm³ fill one.
		{MerchantID: "m-home", Warehouse: "default", WeightG: 45_000, VolumeCm3: 900_000, Items: []orderpay.ShipmentItem{{Line: 4, SKU: "sofa", Qty: 1}}},
		{MerchantID: "m-home", Warehouse: "default", WeightG: 3_200, VolumeCm3: 120_000, Items: []orderpay.ShipmentItem{{Line: 5, SKU: "cushion", Qty: 4}}},
		{MerchantID: "m-home", Warehouse: "default", WeightG: 800, VolumeCm3: 30_000, Items: []orderpay.ShipmentItem{{Line: 5, SKU: "cushion", Qty: 1}}},
		{MerchantID: "m-tea", Warehouse: "hangzhou", WeightG: 1_000, VolumeCm3: 4_000, Items: []orderpay.ShipmentItem{{Line: 1, SKU: "tea", Qty: 2}}},
		{MerchantID: "m-tea", Warehouse: "jingdezhen", WeightG: 1_200, VolumeCm3: 4_000, Items: []orderpay.ShipmentItem{{Line: 2, SKU: "cup", Qty: 4}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parcels:\n got %+v\nwant %+v", got, want)
	}
	// Every unit is in exactly one parcel.
	units := map[int]int64{}
	for _, p := range got {
		for _, it := range p.Items {
			units[it.Line] += it.Qty
		}
	}
	for _, it := range items {
		if units[it.Line] != it.Qty {
			t.Errorf("line %d: %d units in parcels, ordered %d", it.Line, units[it.Line], it.Qty)
		}
	}
	again, _ := orderpay.PlanShipments(items, skus, orderpay.PackageLimits{MaxWeightG: 20_000, MaxVolumeCm3: 120_000})
	if !reflect.DeepEqual(got, again) {
		t.Fatal("the plan is not deterministic")
	}
}

func TestAddressValidate(t *testing.T) {
	ok := orderpay.Address{Name: "张三", Phone: "13800138000", Detail: "浙江省杭州市西湖区文三路 1 号"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]orderpay.Address{
		"no name":       {Phone: ok.Phone, Detail: ok.Detail},
		"letters phone": {Name: ok.Name, Phone: "call me", Detail: ok.Detail},
		"short phone":   {Name: ok.Name, Phone: "123", Detail: ok.Detail},
		"no detail":     {Name: ok.Name, Phone: ok.Phone},
	} {
		if orderpay.ErrorCode(a.Validate()) != orderpay.EINVALID {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOrderRefundStatusDerivesFromTheRequests(t *testing.T) {
	o := &orderpay.Order{Payable: 1000}
	for _, c := range []struct {
		sales []orderpay.AfterSale
		want  string
	}{
		{nil, "NONE"},
		{[]orderpay.AfterSale{{Status: orderpay.AfterSaleRejected, Amount: 500}}, "NONE"},
		{[]orderpay.AfterSale{{Status: orderpay.AfterSaleSucceeded, Amount: 400}, {Status: orderpay.AfterSaleRejected, Amount: 600}}, "PARTIAL"},
		{[]orderpay.AfterSale{{Status: orderpay.AfterSaleSucceeded, Amount: 400}, {Status: orderpay.AfterSaleSucceeded, Amount: 600}}, "FULL"},
		{[]orderpay.AfterSale{{Status: orderpay.AfterSaleSucceeded, Amount: 400}, {Status: orderpay.AfterSaleAwaitingGoods, Amount: 600}}, "IN_PROGRESS"},
		{[]orderpay.AfterSale{{Status: orderpay.AfterSaleRefunding, Amount: 400}}, "IN_PROGRESS"},
	} {
		if got := orderpay.OrderRefundStatus(o, c.sales); got != c.want {
			t.Errorf("%+v: %s, want %s", c.sales, got, c.want)
		}
	}
}
