package sim

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"orderpay"
)

// The envelope of a WeChat Pay notification (docs/channels.md §B4).
const (
	wechatNotifyEvent          = "TRANSACTION.SUCCESS"
	wechatNotifyResourceType   = "encrypt-resource"
	wechatNotifySummary        = "支付成功"
	wechatNotifyAlgorithm      = "AEAD_AES_256_GCM"
	wechatNotifyOriginalType   = "transaction"
	wechatNotifyAssociatedData = "transaction"
	// wechatForeignMchID and wechatForeignAppID are another merchant's, for FaultWrongApp.
	wechatForeignMchID = "1900000109"
	wechatForeignAppID = "wxd678efh567hg6787"
)

// wechatNotifyEnvelope is the JSON body of a notification.
type wechatNotifyEnvelope struct {
	ID           string               `json:"id"`
	CreateTime   string               `json:"create_time"`
	ResourceType string               `json:"resource_type"`
	EventType    string               `json:"event_type"`
	Summary      string               `json:"summary"`
	Resource     wechatNotifyResource `json:"resource"`
}

type wechatNotifyResource struct {
	OriginalType string `json:"original_type"`
	wechatEncryptedValue
}

// wechatEncryptedValue is a value WeChat encrypts with AEAD_AES_256_GCM under the APIv3 key:
// a notification's resource, or a certificate of GET /v3/certificates.
type wechatEncryptedValue struct {
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// wechatEvent is one notification WeChat Pay sends: a payment's or a refund's end. The
// notifier delivers it like any other, on WeChat's schedule and under the notification
// faults.
type wechatEvent struct {
	outTradeNo  string
	outRefundNo string // "" for a payment
	id          string // the same on every attempt
	url         string
	createTime  time.Time
	eventType   string
	summary     string
	// originalType is resource.original_type, and its associated data.
	originalType string
	// resource is the plaintext of one attempt: the genuine one for variant "", or the
	// copy FaultTamperAmount or FaultWrongApp sends (another amount, another merchant),
	// genuinely encrypted and signed so that only the merchant's own checks catch it.
	resource func(variant string) any
}

// wechatOutgoing turns ev into what the notifier sends (§B4). Every attempt is built
// afresh: the resource JSON is encrypted with AES-256-GCM under the APIv3 key with a new
// 12-character nonce, and the exact body is signed like an answer at the wall clock's time,
// with the key and serial in use then (the public key, or after a rotation possibly the new
// platform certificate); FaultForgeSignature signs with a key that is not WeChat's under
// the same serial. The id and create_time stay the same across attempts. It counts as
// acknowledged iff the merchant answers 200 or 204: the status decides, not the body.
func (s *Simulator) wechatOutgoing(ev wechatEvent) outgoingNotification {
	apiV3Key := s.keys.Wechat.APIv3Key
	n := outgoingNotification{
		Channel:     orderpay.ChannelWechat,
		OutTradeNo:  ev.outTradeNo,
		OutRefundNo: ev.outRefundNo,
		NotifyID:    ev.id,
		URL:         ev.url,
		Schedule:    s.cfg.WechatNotifySchedule,
		Build: func(_ time.Time, variant string) ([]byte, http.Header, error) {
			signWith, serial := s.wechatSigner()
			if variant == FaultForgeSignature {
				signWith = s.forgerKey()
			}
			plaintext, err := json.Marshal(ev.resource(variant))
			if err != nil {
				return nil, nil, err
			}
			sealed, err := sealWechatAEAD(apiV3Key, plaintext, ev.originalType)
			if err != nil {
				return nil, nil, err
			}
			body := wechatJSON(http.StatusOK, wechatNotifyEnvelope{
				ID:           ev.id,
				CreateTime:   wechatTime(ev.createTime),
				ResourceType: wechatNotifyResourceType,
				EventType:    ev.eventType,
				Summary:      ev.summary,
				Resource:     wechatNotifyResource{OriginalType: ev.originalType, wechatEncryptedValue: sealed},
			}).body
			h, err := s.wechatSignatureHeaders(signWith, serial, body)
			if err != nil {
				return nil, nil, err
			}
			h.Set("Content-Type", "application/json")
			h.Set("Request-ID", newWechatNotifyID())
			return body, h, nil
		},
		Acked: func(status int, _ []byte) bool {
			return status == http.StatusOK || status == http.StatusNoContent
		},
	}
	s.noteDue(&n)
	return n
}

// wechatNotification prepares the TRANSACTION.SUCCESS notification of a just-paid order
// (§B4), or nil if prepay gave no notify_url. Only successful payments notify. The caller
// holds s.mu; the Transaction is copied because the notification outlives the lock.
func (s *Simulator) wechatNotification(o *wechatOrder) *outgoingNotification {
	if o.prepay.notifyURL == "" {
		s.log.Info("sim: wechat order paid without notify_url, no notification", "out_trade_no", o.outTradeNo)
		return nil
	}
	txn := s.wechatTransaction(o, o.paidAt)
	n := s.wechatOutgoing(wechatEvent{
		outTradeNo:   o.outTradeNo,
		id:           o.notifyID,
		url:          o.prepay.notifyURL,
		createTime:   o.paidAt,
		eventType:    wechatNotifyEvent,
		summary:      wechatNotifySummary,
		originalType: wechatNotifyOriginalType,
		resource: func(variant string) any {
			t := txn // a copy: variants change only their own attempt
			switch variant {
			case FaultTamperAmount:
				other := tamperedAmount(t.Amount.Total)
				t.Amount.Total = other
				t.Amount.PayerTotal = &other
			case FaultWrongApp:
				t.MchID = wechatForeignMchID
				t.AppID = wechatForeignAppID
			}
			return t
		},
	})
	return &n
}

// sealWechatAEAD encrypts plaintext as WeChat Pay does a notification's resource (§B4) or
// a downloaded certificate (§E): AES-256-GCM under the 32-byte APIv3 key, a 12-character
// nonce used as its bytes, the given associated data, and the ciphertext with its tag in
// standard base64.
func sealWechatAEAD(apiV3Key string, plaintext []byte, associatedData string) (wechatEncryptedValue, error) {
	gcm, err := newWechatGCM(apiV3Key)
	if err != nil {
		return wechatEncryptedValue{}, err
	}
	nonce := newWechatNonce(gcm.NonceSize())
	sealed := gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))
	return wechatEncryptedValue{
		Algorithm:      wechatNotifyAlgorithm,
		Ciphertext:     base64.StdEncoding.EncodeToString(sealed),
		AssociatedData: associatedData,
		Nonce:          nonce,
	}, nil
}

// DecryptWechatResource opens a notification resource's ciphertext with the APIv3 key: the
// merchant's side of encryptWechatResource, for tests and tools.
func DecryptWechatResource(apiV3Key, ciphertext, associatedData, nonce string) ([]byte, error) {
	gcm, err := newWechatGCM(apiV3Key)
	if err != nil {
		return nil, err
	}
	sealed, err := base64.StdEncoding.DecodeString(ciphertext)
	if err != nil {
		return nil, fmt.Errorf("sim: ciphertext is not base64: %w", err)
	}
	if len(nonce) != gcm.NonceSize() {
		return nil, fmt.Errorf("sim: nonce must be %d bytes", gcm.NonceSize())
	}
	plaintext, err := gcm.Open(nil, []byte(nonce), sealed, []byte(associatedData))
	if err != nil {
		return nil, errors.New("sim: resource does not decrypt")
	}
	return plaintext, nil
}

func newWechatGCM(apiV3Key string) (cipher.AEAD, error) {
	if len(apiV3Key) != 32 {
		return nil, errors.New("sim: the APIv3 key must be 32 bytes")
	}
	block, err := aes.NewCipher([]byte(apiV3Key))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
