package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderpay"
	"orderpay/operators"
)

// operatorsFile writes an operators file of a viewer, an operator and an admin and returns
// it with their tokens.
func operatorsFile(t *testing.T) (path, viewer, operator, admin string) {
	t.Helper()
	var body strings.Builder
	tokens := map[string]string{}
	for _, o := range []struct {
		name string
		role orderpay.Role
	}{{"wang.fang", orderpay.RoleViewer}, {"li.wei", orderpay.RoleOperator}, {"zhao", orderpay.RoleAdmin}} {
		token, err := operators.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		tokens[o.name] = token
		body.WriteString(operators.Entry(o.name, o.role, token) + "\n")
	}
	path = filepath.Join(t.TempDir(), "operators.toml")
	if err := os.WriteFile(path, []byte(body.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tokens["wang.fang"], tokens["li.wei"], tokens["zhao"]
}

// as makes a request to the API with an operator's token and returns the status and body.
func as(t *testing.T, token, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Named operators from the operators file, each with a role: a viewer reads but every write
// is 403; an operator ships, under their own name in the parcel's history, but may not add
// a SKU; an admin may. Every write, refused ones too, is in the audit log with who made it,
// and the order's timeline shows the operator's action. Tokens that are no one's are 401.
func TestOperatorsActByRoleAndEveryWriteIsAudited(t *testing.T) {
	t.Parallel()
	file, viewer, operator, admin := operatorsFile(t)
	m, c := startMain(t, "", func(m *Main) { m.Config.OperatorsFile, m.Config.AdminToken = file, "" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if m.AdminToken != "" {
		t.Fatalf("an admin token was made although operators are named: %q", m.AdminToken)
	}
	sku := `{"sku":"ops-tea","merchant_id":"m1","title":"Tea","price":1200,"stock":5,"product_type":"normal"}`
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"viewer", viewer, 403}, {"operator", operator, 403}, {"admin", admin, 201}} {
		if status, body := as(t, tc.token, "POST", m.URL+"/admin/skus", sku); status != tc.want {
			t.Fatalf("%s adds a SKU: %d %s", tc.who, status, body)
		}
	}
	if status, body := as(t, "no-ones-token-0123456789", "GET", m.URL+"/admin/orders", ""); status != 401 {
		t.Fatalf("a token that is no one's: %d %s", status, body)
	}
	status, body := as(t, viewer, "GET", m.URL+"/admin/session", "")
	var sess struct {
		Actor string          `json:"actor"`
		Role  string          `json:"role"`
		May   map[string]bool `json:"may"`
	}
	if json.Unmarshal(body, &sess); status != 200 || sess.Actor != "operator:wang.fang" || sess.Role != "viewer" || sess.May["operator"] || !sess.May["viewer"] {
		t.Fatalf("the viewer's session: %d %s", status, body)
	}

	// A paid order with a parcel to ship.
	c.Client.AdminToken = admin
	o, err := c.createOrder(ctx, "ops-buyer", "ops-tea", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.pay(ctx, o.OrderNo, orderpay.ChannelAlipay)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walletPay(ctx, p.QRCode); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitStatus(ctx, o.OrderNo, "PAID", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	detail, err := c.OrderDetail(ctx, o.OrderNo)
	if err != nil || len(detail.Shipments) != 1 {
		t.Fatalf("order %+v, %v", detail, err)
	}
	parcel := detail.Shipments[0].ShipmentNo
	if status, body := as(t, operator, "PATCH", m.URL+"/v1/orders/"+o.OrderNo+"/address",
		`{"buyer_id":"ops-buyer","name":"Li Lei","phone":"13800138000","detail":"1 Bund Road"}`); status != 200 {
		t.Fatalf("address: %d %s", status, body)
	}
	ship := `{"carrier":"SF Express","tracking_no":"SF100"}`
	if status, body := as(t, viewer, "POST", m.URL+"/admin/shipments/"+parcel+"/ship", ship); status != 403 || !strings.Contains(string(body), orderpay.EFORBIDDEN) {
		t.Fatalf("the viewer ships: %d %s", status, body)
	}
	if status, body := as(t, operator, "POST", m.URL+"/admin/shipments/"+parcel+"/ship", ship); status != 200 {
		t.Fatalf("the operator ships: %d %s", status, body)
	}
	h, err := m.Store.History(ctx, orderpay.EntityShipment, parcel)
	if err != nil || len(h) == 0 || h[len(h)-1].Actor != "operator:li.wei" || h[len(h)-1].To != string(orderpay.ShipmentShipped) {
		t.Fatalf("the parcel's history %+v, %v", h, err)
	}

	// The audit log: newest first, refused writes included, the ship naming its order.
	status, body = as(t, viewer, "GET", m.URL+"/admin/audit", "")
	var audit struct {
		Actions []struct {
			Actor, Role, Action, Target, Code string
			OrderNo                           string `json:"order_no"`
			Status                            int
		} `json:"actions"`
	}
	if err := json.Unmarshal(body, &audit); status != 200 || err != nil {
		t.Fatalf("audit log: %d %s", status, body)
	}
	type key struct{ actor, action, code string }
	seen := map[key]int{}
	var shipOrder string
	for _, a := range audit.Actions {
		seen[key{a.Actor, a.Action, a.Code}]++
		if a.Actor == "operator:li.wei" && strings.HasSuffix(a.Action, "/ship") {
			shipOrder = a.OrderNo
			if a.Status != 200 || a.Target != "shipment_no="+parcel || a.Role != "operator" {
				t.Fatalf("the ship's entry %+v", a)
			}
		}
	}
	for _, k := range []key{
		{"operator:wang.fang", "POST /admin/skus", orderpay.EFORBIDDEN},
		{"operator:li.wei", "POST /admin/skus", orderpay.EFORBIDDEN},
		{"operator:zhao", "POST /admin/skus", ""},
		{"operator:wang.fang", "POST /admin/shipments/{shipment_no}/ship", orderpay.EFORBIDDEN},
		{"operator:li.wei", "POST /admin/shipments/{shipment_no}/ship", ""},
	} {
		if seen[k] != 1 {
			t.Errorf("audit log has %d of %+v; log %+v", seen[k], k, audit.Actions)
		}
	}
	if shipOrder != o.OrderNo {
		t.Fatalf("the ship's entry names order %q, want %s", shipOrder, o.OrderNo)
	}
	for _, a := range audit.Actions {
		if strings.HasPrefix(a.Action, "GET ") {
			t.Fatalf("a read was audited: %+v", a)
		}
	}

	// The order's timeline shows the operator's action and the parcel's transition.
	status, body = as(t, viewer, "GET", m.URL+"/admin/orders/"+o.OrderNo+"/timeline", "")
	var tl struct {
		Shipments []struct {
			ShipmentNo string `json:"shipment_no"`
		} `json:"shipments"`
		Events []struct{ Kind, Entity, Actor, Event, To, Result string } `json:"events"`
	}
	if err := json.Unmarshal(body, &tl); status != 200 || err != nil || len(tl.Shipments) != 1 {
		t.Fatalf("timeline: %d %s", status, body)
	}
	var action, moved bool
	for _, e := range tl.Events {
		action = action || (e.Kind == "operator" && e.Actor == "operator:li.wei" && strings.HasSuffix(e.Event, "/ship") && e.Result == "ok")
		moved = moved || (e.Kind == "transition" && e.Entity == orderpay.EntityShipment && e.To == "SHIPPED" && e.Actor == "operator:li.wei")
	}
	if !action || !moved {
		t.Fatalf("timeline events %+v: the operator's ship %v, the parcel's move %v", tl.Events, action, moved)
	}
}

// In development (no operators file, no token given) the generated admin token is kept in
// the data directory, readable by its owner only, so a restart keeps it.
func TestDevelopmentAdminTokenSurvivesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dev := func(m *Main) { m.Config.AdminToken, m.Config.DataDir = "", dir }
	first, _ := startMain(t, "", dev)
	token := first.AdminToken
	first.Close()
	second, _ := startMain(t, "", dev)
	if len(token) < adminTokenMin || second.AdminToken != token {
		t.Fatalf("tokens %q then %q", token, second.AdminToken)
	}
	st, err := os.Stat(filepath.Join(dir, devAdminTokenFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the kept token: %v, %v", st, err)
	}
	if status, body := as(t, token, "GET", second.URL+"/admin/session", ""); status != 200 || !strings.Contains(string(body), `"role":"admin"`) {
		t.Fatalf("the kept token after the restart: %d %s", status, body)
	}
}

// --pprof serves Go's profiler on its own listener; the API never serves it.
func TestProfilerOnlyOnItsOwnAddress(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, "", func(m *Main) { m.Config.PprofAddr = "127.0.0.1:0" })
	for url, want := range map[string]int{m.PprofURL + "/debug/pprof/": 200, m.URL + "/debug/pprof/": 404} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
		}
	}
	off, _ := startMain(t, "")
	if off.PprofURL != "" {
		t.Fatalf("a profiler without --pprof: %s", off.PprofURL)
	}
}
