// Package sim is a protocol-faithful simulator of the payment channels orderpay talks to.
//
// It speaks the real wire protocols (docs/channel-protocols.md), so the real channel
// adapters and their SDKs run against it unchanged:
//
//   - Alipay face-to-face: the OpenAPI gateway (POST /gateway.do) with RSA2 request
//     verification and signed responses, the methods alipay.trade.precreate and
//     alipay.trade.query, and signed asynchronous notifications with Alipay's retry
//     schedule.
//
// Besides the channel protocols it plays the buyer's wallet (Pay, POST /sim/pay) and keeps
// a ledger of every trade the channel knows (Ledger, GET /sim/ledger): the truth about the
// money that the chaos auditor compares orderpay against.
//
// The code is split so that a second channel (WeChat Pay) can be added beside alipay.go:
// keys.go, rsa2.go, notify.go, ledger.go and http.go are shared by all channels.
//
// All state lives in memory behind one mutex.
package sim
