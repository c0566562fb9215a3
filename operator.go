package orderpay

import (
	"context"
	"time"
)

// Role is what a named operator of the console and the admin API may do. Each role may do
// everything the one before it may.
type Role string

const (
	// RoleViewer reads everything: orders, timelines, queues, charts, reports, the audit log.
	RoleViewer Role = "viewer"
	// RoleOperator also does the daily jobs: ships parcels, extends receipt, reviews
	// after-sales and receives returned goods, confirms payments by hand, retries and
	// resolves refunds, resends webhooks.
	RoleOperator Role = "operator"
	// RoleAdmin also changes what the shop sells and whom it refuses: SKUs, coupons, the
	// blocklist, and runs reconciliations.
	RoleAdmin Role = "admin"
)

// Roles are the roles, least first.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i
		}
	}
	return -1
}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.rank() >= 0 }

// Allows reports whether an operator of role r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.Valid() && need.Valid() && r.rank() >= need.rank() }

// Operator is a person acting through the console or the admin API.
type Operator struct {
	Name string
	Role Role
}

// Actor is how histories and the audit log name the operator: "operator:<name>".
func (o Operator) Actor() string { return "operator:" + o.Name }

// OperatorAction is one entry of the audit log: an operator's write through the admin API,
// and what it came to.
type OperatorAction struct {
	ID     int64
	At     time.Time
	Actor  string // "operator:<name>"
	Role   Role
	Action string // the route, e.g. "POST /admin/shipments/{shipment_no}/ship"
	Target string // what the route's path names, e.g. "shipment_no=SH…"
	// OrderNo is the order the action was about, when there is one: the order's timeline
	// shows the action.
	OrderNo string
	Status  int    // the HTTP status of the answer
	Code    string // the error code if it failed; "" if it succeeded
	Detail  string // the error message if it failed, or what the action recorded
	// Addr is the client address the request came from: behind a trusted proxy the one it
	// forwarded. "" in entries written before it was kept.
	Addr string
}

// AuditFilter selects audit log entries; empty fields match everything.
type AuditFilter struct {
	Actor   string
	OrderNo string
}

// AuditLog stores and lists the operators' actions, newest first.
type AuditLog interface {
	LogOperatorAction(ctx context.Context, a *OperatorAction) error
	OperatorActions(ctx context.Context, f AuditFilter, limit int) ([]OperatorAction, error)
}
