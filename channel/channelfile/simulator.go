package channelfile

import (
	"orderpay/channel/sim"
)

// ForSimulator is the channels file of the merchant a simulator's keys describe, pointing
// at the simulator at simURL: the file `orderpay sim` writes beside its keys, in exactly the
// form of a production one, so that `serve --channels` with it runs the production code
// path against another address. File names are relative to keysDir, where the file is
// written.
func ForSimulator(keysDir string, k *sim.Keys, simURL, alipayMode, wechatMode string) *File {
	files := sim.KeyDirMerchantFiles(k)
	f := &File{dir: keysDir,
		Alipay: &AlipayAccount{AppID: k.AppID, SellerID: k.SellerID, Gateway: simURL + "/gateway.do", Mode: alipayMode,
			AppPrivateKeyFile: files.AlipayAppPrivateKey},
		Wechat: &WechatAccount{MchID: k.Wechat.MchID, AppID: k.Wechat.AppID, BaseURL: simURL, Mode: wechatMode,
			MerchantSerial: k.Wechat.MerchantSerial, MerchantPrivateKeyFile: files.WechatMerchantKey, APIv3KeyFile: files.WechatAPIv3Key},
	}
	switch alipayMode {
	case AlipayKeyMode:
		f.Alipay.AlipayPublicKeyFile = files.AlipayPublicKey
	case AlipayCertMode:
		f.Alipay.AppCertFile, f.Alipay.AlipayCertFile, f.Alipay.AlipayRootCertFile = files.AlipayAppCert, files.AlipayCert, files.AlipayRootCert
	}
	if wechatMode == WechatPubKeyMode {
		f.Wechat.PublicKeyID, f.Wechat.PublicKeyFile = k.Wechat.PublicKeyID, files.WechatPublicKey
	}
	return f
}
