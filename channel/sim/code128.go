package sim

import (
	"bytes"
	"fmt"

	"orderpay"
)

// Code 128 (ISO/IEC 15417), the barcode wallets draw a payment code as. A payment code is
// all digits, so it is written in code set C, two digits a symbol; an odd last digit goes
// in code set B.

// code128Widths are the bar and space widths, in modules, of every symbol value 0 to 105,
// then the stop pattern (106, with its final bar). Each symbol is three bars and three
// spaces, bar first, eleven modules wide; the stop is thirteen.
var code128Widths = [107]string{
	"212222", "222122", "222221", "121223", "121322", "131222", "122213", "122312", "132212", "221213",
	"221312", "231212", "112232", "122132", "122231", "113222", "123122", "123221", "223211", "221132",
	"221231", "213212", "223112", "312131", "311222", "321122", "321221", "312212", "322112", "322211",
	"212123", "212321", "232121", "111323", "131123", "131321", "112313", "132113", "132311", "211313",
	"231113", "231311", "112133", "112331", "132131", "113123", "113321", "133121", "313121", "211331",
	"231131", "213113", "213311", "213131", "311123", "311321", "331121", "312113", "312311", "332111",
	"314111", "221411", "431111", "111224", "111422", "121124", "121421", "141122", "141221", "112214",
	"112412", "122114", "122411", "142112", "142211", "241211", "221114", "413111", "241112", "134111",
	"111242", "121142", "121241", "114212", "124112", "124211", "411212", "421112", "421211", "212141",
	"214121", "412121", "111143", "111341", "131141", "114113", "114311", "411113", "411311", "113141",
	"114131", "311141", "411131", "211412", "211214", "211232", "2331112",
}

const (
	code128CodeB  = 100 // in code set C: switch to code set B
	code128StartC = 105
	code128Stop   = 106
	// code128DigitB is a digit's value in code set B less the digit: '0' is 16.
	code128DigitB = 16
)

// Code128Values are the symbol values of digits in Code 128: start C, a value per pair of
// digits, for an odd last digit code B and the digit, the check value, and the stop.
// Anything but digits is EINVALID.
func Code128Values(digits string) ([]int, error) {
	if digits == "" {
		return nil, orderpay.Errorf(orderpay.EINVALID, "nothing to draw")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return nil, orderpay.Errorf(orderpay.EINVALID, "a payment code has digits only")
		}
	}
	values := []int{code128StartC}
	i := 0
	for ; i+1 < len(digits); i += 2 {
		values = append(values, int(digits[i]-'0')*10+int(digits[i+1]-'0'))
	}
	if i < len(digits) {
		values = append(values, code128CodeB, code128DigitB+int(digits[i]-'0'))
	}
	// The check value: the start's value, plus each symbol's value times its position.
	sum := values[0]
	for pos, v := range values[1:] {
		sum += (pos + 1) * v
	}
	return append(values, sum%103, code128Stop), nil
}

// Code128SVG draws digits as a Code 128 barcode, with the digits below it in groups of
// four as wallets print them, as an SVG image with a quiet zone of ten modules each side.
func Code128SVG(digits string) ([]byte, error) {
	values, err := Code128Values(digits)
	if err != nil {
		return nil, err
	}
	const (
		module = 2  // px per module
		quiet  = 10 // modules each side
		height = 80 // px of bars
		text   = 24 // px below them
	)
	width := 2 * quiet
	for _, v := range values {
		for _, w := range code128Widths[v] {
			width += int(w - '0')
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="payment code %s">`,
		width*module, height+text, width*module, height+text, digits)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`)
	x := quiet
	for _, v := range values {
		for i, w := range code128Widths[v] {
			n := int(w - '0')
			if i%2 == 0 {
				fmt.Fprintf(&b, `<rect x="%d" y="0" width="%d" height="%d" fill="#000"/>`, x*module, n*module, height)
			}
			x += n
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-family="monospace" font-size="18">%s</text></svg>`,
		width*module/2, height+text-5, groupDigits(digits))
	return b.Bytes(), nil
}

// groupDigits writes digits in groups of four, as wallets print a code under its barcode.
func groupDigits(digits string) string {
	var b bytes.Buffer
	for i := 0; i < len(digits); i++ {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}
