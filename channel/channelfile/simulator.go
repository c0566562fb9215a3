package channelfile

import (
	"fmt"
	"slices"

	"orderpay/channel/sim"
)

// ForSimulator is the channels file of the merchant a simulator's keys describe, pointing
// at the simulator at simURL: the file `orderpay sim` writes beside its keys, in exactly the
// form of a production one, so that `serve --channels` with it runs the production code
// path against another address. File names are relative to keysDir, where the file is
// written. It names every method's settings the simulator made up: the official account's,
// mini program's and app's appids, the H5 domains and JSAPI pay directories registered on
// the shop's own address, and the official account's AppSecret; and the Alipay app of
// in-app payments (inapp_app_id and [alipay.inapp], in the same mode) when the keys have one.
func ForSimulator(keysDir string, k *sim.Keys, simURL, alipayMode, wechatMode string) *File {
	files := sim.KeyDirMerchantFiles(k)
	f := &File{dir: keysDir,
		Alipay: &AlipayAccount{AppID: k.AppID, SellerID: k.SellerID, Gateway: simURL + "/gateway.do",
			AlipayAppKeys: AlipayAppKeys{Mode: alipayMode, AppPrivateKeyFile: files.AlipayAppPrivateKey}},
		Wechat: &WechatAccount{MchID: k.Wechat.MchID, AppID: k.Wechat.AppID, BaseURL: simURL, Mode: wechatMode,
			MerchantSerial: k.Wechat.MerchantSerial, MerchantPrivateKeyFile: files.WechatMerchantKey, APIv3KeyFile: files.WechatAPIv3Key,
			JSAPIAppID: k.Wechat.JSAPIAppID, MiniAppID: k.Wechat.MiniAppID, AppAppID: k.Wechat.AppAppID,
			H5Domains: slices.Clone(k.Wechat.H5Domains), JSAPIPaths: slices.Clone(k.Wechat.JSAPIPaths),
			OAuthSecretFile: sim.WechatOAuthSecretFile, Fees: simulatorFees()},
	}
	f.Alipay.Fees = simulatorFees()
	if k.InApp != nil {
		f.Alipay.InAppAppID = k.InApp.AppID
		f.Alipay.InApp = &AlipayAppKeys{Mode: alipayMode, AppPrivateKeyFile: files.AlipayInAppPrivateKey}
	}
	switch alipayMode {
	case AlipayKeyMode:
		f.Alipay.AlipayPublicKeyFile = files.AlipayPublicKey
		if in := f.Alipay.InApp; in != nil {
			in.AlipayPublicKeyFile = files.AlipayInAppPublicKey
		}
	case AlipayCertMode:
		f.Alipay.AppCertFile, f.Alipay.AlipayCertFile, f.Alipay.AlipayRootCertFile = files.AlipayAppCert, files.AlipayCert, files.AlipayRootCert
		if in := f.Alipay.InApp; in != nil {
			in.AppCertFile, in.AlipayCertFile, in.AlipayRootCertFile = files.AlipayInAppAppCert, files.AlipayInAppCert, files.AlipayRootCert
		}
	}
	if wechatMode == WechatPubKeyMode {
		f.Wechat.PublicKeyID, f.Wechat.PublicKeyFile = k.Wechat.PublicKeyID, files.WechatPublicKey
	}
	return f
}

// SimulatorModes sets a simulator's merchants in the modes a channels file names: "key" or
// "cert" for Alipay, "pubkey" or "certificate" for WeChat Pay ("" is the first of each).
func SimulatorModes(cfg *sim.Config, alipayMode, wechatMode string) error {
	switch alipayMode {
	case AlipayKeyMode, "":
		cfg.AlipayMode = sim.AlipayModeKey
	case AlipayCertMode:
		cfg.AlipayMode = sim.AlipayModeCert
	default:
		return fmt.Errorf("the Alipay mode must be key or cert, not %q", alipayMode)
	}
	switch wechatMode {
	case WechatPubKeyMode, "":
		cfg.WechatMode = sim.WechatModePublicKey
	case WechatCertificateMode:
		cfg.WechatMode = sim.WechatModeCertificate
	default:
		return fmt.Errorf("the WeChat Pay mode must be pubkey or certificate, not %q", wechatMode)
	}
	return nil
}
