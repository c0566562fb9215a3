package channelfile

import (
	"fmt"
	"strings"

	"orderpay/channel/alipay"
	"orderpay/channel/wechat"
)

// alipayCerts reads the three certificates of Alipay's certificate mode that table names (k)
// into out; the adapter checks that they chain and belong to the app's key.
func (f *File) alipayCerts(table string, k *AlipayAppKeys, out *alipay.AppKeys) error {
	for _, c := range []struct {
		key, name string
		dst       *string
	}{
		{table + " app_cert_file", k.AppCertFile, &out.AppCertPEM},
		{table + " alipay_cert_file", k.AlipayCertFile, &out.AlipayCertPEM},
		{table + " alipay_root_cert_file", k.AlipayRootCertFile, &out.AlipayRootCertPEM},
	} {
		b, err := f.read(c.key, c.name)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "-----BEGIN CERTIFICATE-----") {
			return fmt.Errorf("%s: %s is not a PEM certificate file", c.key, c.name)
		}
		*c.dst = string(b)
	}
	return nil
}

// wechatCertificateMode sets cfg to download the platform certificates (GET
// /v3/certificates, decrypted with the APIv3 key) and verify with them, refreshed so that a
// rotation never breaks verification.
func wechatCertificateMode(cfg *wechat.Config) { cfg.Mode = wechat.ModePlatformCertificate }
