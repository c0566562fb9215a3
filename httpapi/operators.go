package httpapi

import (
	"context"
	"crypto/subtle"
	"net/http"
	"regexp"
	"strings"
	"time"

	"orderpay"
)

// OperatorAuth names the operator a bearer token belongs to (package operators reads them
// from the operators file).
type OperatorAuth interface {
	Authenticate(token string) (orderpay.Operator, bool)
}

// AdminName is the operator the single --admin-token signs in as, with role admin.
const AdminName = "admin"

// operatorRoutes are the writes of the daily jobs, which role operator may make. Every other
// write needs role admin, reads need viewer: a write added later is an admin's until it is
// listed here.
var operatorRoutes = map[string]bool{
	"POST /admin/shipments/{shipment_no}/ship":              true,
	"POST /admin/shipments/{shipment_no}/extend":            true,
	"POST /admin/after-sales/{after_sale_no}/approve":       true,
	"POST /admin/after-sales/{after_sale_no}/reject":        true,
	"POST /admin/after-sales/{after_sale_no}/receive-goods": true,
	"POST /admin/payments/{payment_no}/confirm":             true,
	"POST /admin/refunds/{out_refund_no}/retry":             true,
	"POST /admin/refunds/{out_refund_no}/resolve":           true,
	"POST /admin/webhooks/deliveries/{id}/resend":           true,
}

// RouteRole is the role an admin route needs: viewer to read, operator for the daily jobs,
// admin for the rest.
func RouteRole(pattern string) orderpay.Role {
	method, _, _ := strings.Cut(pattern, " ")
	switch {
	case method == http.MethodGet || method == http.MethodHead:
		return orderpay.RoleViewer
	case operatorRoutes[pattern]:
		return orderpay.RoleOperator
	}
	return orderpay.RoleAdmin
}

type ctxKey int

const (
	operatorKey ctxKey = iota
	auditKey
)

// auditRecord is what a write's handler adds to its audit log entry.
type auditRecord struct {
	orderNo string
	code    string
	detail  string
}

// admin authenticates an admin route's operator (the operators file, or the single admin
// token), refuses a role the route does not allow (403 EFORBIDDEN), and records every write
// in the audit log, refused ones included. RateLimits.Admin bounds each operator's requests,
// and, in buckets of their own, missing and wrong tokens per client address (clientIP): a
// valid token is never refused for the failures of others, even from the same address.
func (s *Server) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := s.Clock.Now()
		op, ok := s.authenticateOperator(r)
		if !ok {
			if allowed, wait := s.admins.Allow("ip:"+s.clientIP(r), now); !allowed {
				refuse(w, wait, "too many admin requests with a wrong token from this address")
				return
			}
			s.writeError(w, r, orderpay.Errorf(orderpay.EUNAUTHORIZED, "admin endpoints need Authorization: Bearer <an operator's token>"))
			return
		}
		if allowed, wait := s.admins.Allow("operator:"+op.Name, now); !allowed {
			refuse(w, wait, "too many admin requests from this operator")
			return
		}
		ctx := context.WithValue(r.Context(), operatorKey, op)
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		var rec *auditRecord
		if !read {
			rec = &auditRecord{}
			ctx = context.WithValue(ctx, auditKey, rec)
		}
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if need := RouteRole(r.Pattern); !op.Role.Allows(need) {
			s.writeError(sw, r, orderpay.Errorf(orderpay.EFORBIDDEN, "%s is a %s; %s needs a %s", op.Actor(), op.Role, r.Pattern, need))
		} else {
			next(sw, r)
		}
		if rec != nil {
			s.logAction(r, op, rec, sw.status)
		}
	}
}

// authenticateOperator finds the operator of the request's bearer token.
func (s *Server) authenticateOperator(r *http.Request) (orderpay.Operator, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return orderpay.Operator{}, false
	}
	if s.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.AdminToken)) == 1 {
		return orderpay.Operator{Name: AdminName, Role: orderpay.RoleAdmin}, true
	}
	if s.Operators != nil {
		return s.Operators.Authenticate(token)
	}
	return orderpay.Operator{}, false
}

// operator is the actor of a request on an admin route: "operator:<name>".
func (s *Server) operator(r *http.Request) string {
	if op, ok := r.Context().Value(operatorKey).(orderpay.Operator); ok {
		return op.Actor()
	}
	return "operator:unknown"
}

// noteOrder names the order a write was about, so that the order's timeline shows it.
func noteOrder(r *http.Request, orderNo string) {
	if rec, ok := r.Context().Value(auditKey).(*auditRecord); ok && orderNo != "" {
		rec.orderNo = orderNo
	}
}

// noteError keeps a failed write's error for its audit log entry.
func noteError(r *http.Request, code, message string) {
	if rec, ok := r.Context().Value(auditKey).(*auditRecord); ok {
		rec.code, rec.detail = code, message
	}
}

var patternParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// logAction writes a write's audit log entry. The action has happened by now (or was
// refused); a failed log write is logged at error level and does not change the answer.
func (s *Server) logAction(r *http.Request, op orderpay.Operator, rec *auditRecord, status int) {
	if s.Audit == nil {
		return
	}
	var target []string
	for _, m := range patternParam.FindAllStringSubmatch(r.Pattern, -1) {
		target = append(target, m[1]+"="+r.PathValue(m[1]))
	}
	a := &orderpay.OperatorAction{At: orderpay.Now(s.Clock), Actor: op.Actor(), Role: op.Role, Action: r.Pattern,
		Target: strings.Join(target, " "), OrderNo: rec.orderNo, Status: status, Code: rec.code, Detail: rec.detail, Addr: s.clientIP(r)}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	if err := s.Audit.LogOperatorAction(ctx, a); err != nil {
		s.Logger.Error("audit log write failed", "actor", a.Actor, "action", a.Action, "target", a.Target, "status", status, "err", err)
	}
}

// statusWriter remembers the status of the answer.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

// auditLog is GET /admin/audit?actor=&order_no=: the operators' actions, newest first.
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request) {
	if s.Audit == nil {
		s.writeError(w, r, orderpay.Errorf(orderpay.ENOTFOUND, "no audit log is kept"))
		return
	}
	q := r.URL.Query()
	list, err := s.Audit.OperatorActions(r.Context(), orderpay.AuditFilter{Actor: q.Get("actor"), OrderNo: q.Get("order_no")}, adminLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]operatorActionJSON, 0, len(list))
	for i := range list {
		out = append(out, toOperatorActionJSON(&list[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"actions": out})
}

type operatorActionJSON struct {
	ID      int64         `json:"id"`
	At      time.Time     `json:"at"`
	Actor   string        `json:"actor"`
	Role    orderpay.Role `json:"role"`
	Action  string        `json:"action"`
	Target  string        `json:"target,omitempty"`
	OrderNo string        `json:"order_no,omitempty"`
	Status  int           `json:"status"`
	Code    string        `json:"code,omitempty"`
	Detail  string        `json:"detail,omitempty"`
	Addr    string        `json:"addr,omitempty"`
}

func toOperatorActionJSON(a *orderpay.OperatorAction) operatorActionJSON {
	return operatorActionJSON{ID: a.ID, At: a.At.UTC(), Actor: a.Actor, Role: a.Role, Action: a.Action, Target: a.Target,
		OrderNo: a.OrderNo, Status: a.Status, Code: a.Code, Detail: a.Detail, Addr: a.Addr}
}

// session is GET /admin/session: who the token is, and what their role allows, for the
// console to show only the actions it may take.
func (s *Server) adminSession(w http.ResponseWriter, r *http.Request) {
	op, _ := r.Context().Value(operatorKey).(orderpay.Operator)
	may := map[string]bool{}
	for _, role := range orderpay.Roles {
		may[string(role)] = op.Role.Allows(role)
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": op.Name, "actor": op.Actor(), "role": op.Role, "may": may})
}
