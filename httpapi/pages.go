package httpapi

import "orderpay/web"

// pageRoutes serves the buyer's pages, the operations console, the till (/pos) and the API
// reference (the OpenAPI document rendered), embedded in the binary
// (package web). The pages are static; everything they show comes from the JSON API.
// /pay/{order_no} serves a queue ticket's id too: the page tells a ticket by its "T" and
// shows its place in the queue until its order is made (queue.js).
// Beside the pay page, the routes of its single code (cashier.go): its image, the URL it
// holds and the wallets' OAuth return, which browsers follow.
func (s *Server) pageRoutes(mux *routeMux) {
	pages := web.Pages()
	for _, pattern := range []string{"GET /{$}", "GET /orders", "GET /orders/{order_no}", "GET /pay/{order_no}", "GET /ops", "GET /pos", "GET /docs", "GET /assets/{file}"} {
		mux.Handle(pattern, pages)
	}
	s.cashierRoutes(mux)
}
