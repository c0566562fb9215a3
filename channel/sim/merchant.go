package sim

import "path/filepath"

// MerchantFiles are the files of a keys directory that a merchant's configuration names
// (the channels file the simulator writes), relative to the directory: what the Alipay
// open platform and the WeChat Pay merchant console hand a real merchant. The simulator's
// own signing keys sit beside them and are named by nothing a merchant configures.
type MerchantFiles struct {
	AlipayAppPrivateKey string // the app private key (the key tool's output)
	AlipayPublicKey     string // key mode: the Alipay public key
	AlipayAppCert       string // cert mode: appCertPublicKey_<app id>.crt
	AlipayCert          string // cert mode: alipayCertPublicKey_RSA2.crt
	AlipayRootCert      string // cert mode: alipayRootCert.crt, the in-app app's too
	// The in-app app's (Keys.InApp) files, "" when the keys have none: its private key, its
	// Alipay public key (key mode), and its two certificates (cert mode).
	AlipayInAppPrivateKey string
	AlipayInAppPublicKey  string
	AlipayInAppAppCert    string
	AlipayInAppCert       string
	WechatMerchantKey     string // apiclient_key.pem
	WechatAPIv3Key        string // the APIv3 key, in a file of its own
	WechatPublicKey       string // pubkey mode: pub_key.pem
}

// KeyDirMerchantFiles names the merchant's files in a keys directory LoadOrCreateKeys
// wrote for k.
func KeyDirMerchantFiles(k *Keys) MerchantFiles {
	f := MerchantFiles{
		AlipayAppPrivateKey: filepath.Join(alipayKeyDir, appPrivateFile),
		AlipayPublicKey:     filepath.Join(alipayKeyDir, alipayPublicFile),
		AlipayAppCert:       filepath.Join(alipayKeyDir, appCertFile(k.AppID)),
		AlipayCert:          filepath.Join(alipayKeyDir, alipayCertFile),
		AlipayRootCert:      filepath.Join(alipayKeyDir, alipayRootCertFile),
		WechatMerchantKey:   filepath.Join(wechatKeyDir, wechatMerchantPrivFile),
		WechatAPIv3Key:      filepath.Join(wechatKeyDir, wechatAPIv3File),
		WechatPublicKey:     filepath.Join(wechatKeyDir, wechatPlatformPubFile),
	}
	if k.InApp != nil {
		f.AlipayInAppPrivateKey = filepath.Join(alipayKeyDir, inAppPrefix+appPrivateFile)
		f.AlipayInAppPublicKey = filepath.Join(alipayKeyDir, inAppPrefix+alipayPublicFile)
		f.AlipayInAppAppCert = filepath.Join(alipayKeyDir, appCertFile(k.InApp.AppID))
		f.AlipayInAppCert = filepath.Join(alipayKeyDir, inAppPrefix+alipayCertFile)
	}
	return f
}
