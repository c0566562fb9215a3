// Package sim is a protocol-faithful simulator of the payment channels orderpay talks to.
//
// It speaks the real wire protocols (docs/channels.md), so the real channel
// adapters and the official SDKs run against it unchanged:
//
//   - Alipay face-to-face: the OpenAPI gateway (POST /gateway.do) with RSA2 request
//     verification and signed responses; alipay.trade.precreate, pay (barcode), query,
//     close, cancel, refund, fastpay.refund.query and the bill download URL (a GBK CSV in a
//     zip, served at GET /sim/bills/alipay/{token}); RSA2-signed asynchronous
//     notifications of payments and of settled refunds, retried on Alipay's schedule until
//     the answer is exactly "success". The app is in public-key or certificate mode (Config.AlipayMode); in
//     certificate mode requests must name the app and root certificates, answers name
//     Alipay's, and alipay.open.app.alipaycert.download hands it out.
//   - WeChat Pay v3 Native: prepay, codepay and its reverse (barcode), query by
//     out_trade_no, close, refund, refund query and the trade bill, with
//     WECHATPAY2-SHA256-RSA2048 request authentication (5-minute timestamp tolerance),
//     signed responses, and payment and refund notifications whose
//     resource is AES-256-GCM encrypted with the APIv3 key, retried on WeChat's schedule
//     until a 2xx. The merchant is in public key mode or platform certificate mode
//     (GET /v3/certificates, with rotations: wechat_certs.go).
//
// Besides the channel protocols it plays the buyer's wallet (Pay, Scan, POST /sim/pay; the
// payment codes a till scans, IssueCode and POST /sim/wallet/codes, barcode.go) and
// keeps a ledger of every trade the channels know, with each refund they accepted (Ledger,
// GET /sim/ledger): the truth about the money that the chaos auditor compares orderpay
// against.
//
// Faults (faults.go; SetFaults, POST /sim/faults) make it misbehave as real channels do:
// calls that time out, fail with 5xx or system errors, answer unsigned or with a forged
// signature, or are rate limited, each with or without the operation having taken effect;
// notifications that are dropped, delayed, duplicated, forged, tampered with, or addressed
// to another app; and refunds (refund_faults.go) refused because the merchant's account is
// short until it is topped up (TopUp, POST /sim/topup; GET /sim/accounts), refused for the
// buyer's WeChat account, slow to settle, or ending ABNORMAL or CLOSED at WeChat. Draws are
// seeded, so the same plan and traffic give the same faults.
//
// keys.go, rsa2.go, notify.go, faults.go, refund_faults.go, ledger.go and http.go are shared
// by the channels; alipay*.go and wechat*.go each hold one channel. All state lives in
// memory behind one mutex and, with Config.StateDir, in a journal on disk too (state.go,
// journal.go), so that a restart goes on where the last run stopped.
package sim
