package decode

import (
	"encoding/binary"
	"fmt"
)

// Numeric on disk (after the varlena header), little-endian uint16 words:
//
//	short:   header 10sddddddwwwwwww (s sign, d dscale 6 bits, w weight 7 bits
//	         two's complement) | digits...
//	special: header 1100... NaN, 1101... +Infinity, 1111... -Infinity
//	long:    sign_dscale (sign 0x0000 +, 0x4000 -) | weight int16 | digits...
//
// Digits are base 10000, the first at position weight.
const (
	numericSignMask  = 0xC000
	numericNeg       = 0x4000
	numericShort     = 0x8000
	numericSpecial   = 0xC000
	numericNaN       = 0xC000
	numericPInf      = 0xD000
	numericNInf      = 0xF000
	numericExtMask   = 0xF000
	shortSignMask    = 0x2000
	shortDscaleMask  = 0x1F80
	shortDscaleShift = 7
	shortWeightSign  = 0x0040
	shortWeightMask  = 0x003F
	numericDscale    = 0x3FFF
	maxNumericDigits = 1 << 16
)

// appendNumeric is numeric_out.
func appendNumeric(dst []byte, p []byte) ([]byte, error) {
	if len(p) < 2 {
		return dst, fmt.Errorf("numeric of %d bytes", len(p))
	}
	hdr := binary.LittleEndian.Uint16(p)
	var neg bool
	var weight, dscale int
	var digits []byte
	switch {
	case hdr&numericSignMask == numericSpecial:
		switch hdr & numericExtMask {
		case numericNaN:
			return append(dst, "NaN"...), nil
		case numericPInf:
			return append(dst, "Infinity"...), nil
		case numericNInf:
			return append(dst, "-Infinity"...), nil
		}
		return dst, fmt.Errorf("numeric special header %#04x", hdr)
	case hdr&numericSignMask == numericShort:
		neg = hdr&shortSignMask != 0
		dscale = int(hdr&shortDscaleMask) >> shortDscaleShift
		weight = int(hdr & shortWeightMask)
		if hdr&shortWeightSign != 0 {
			weight -= shortWeightMask + 1
		}
		digits = p[2:]
	default:
		if len(p) < 4 {
			return dst, fmt.Errorf("long numeric of %d bytes", len(p))
		}
		switch hdr & numericSignMask {
		case 0:
		case numericNeg:
			neg = true
		default:
			return dst, fmt.Errorf("numeric sign %#04x", hdr&numericSignMask)
		}
		dscale = int(hdr & numericDscale)
		weight = int(int16(binary.LittleEndian.Uint16(p[2:])))
		digits = p[4:]
	}
	if len(digits)%2 != 0 {
		return dst, fmt.Errorf("numeric digits of %d bytes", len(digits))
	}
	nd := len(digits) / 2
	digit := func(i int) int {
		if i < 0 || i >= nd {
			return 0
		}
		return int(binary.LittleEndian.Uint16(digits[2*i:]))
	}
	for i := 0; i < nd; i++ {
		if digit(i) >= 10000 {
			return dst, fmt.Errorf("numeric digit %d is %d", i, digit(i))
		}
	}
	// get_str_from_var
	if neg {
		dst = append(dst, '-')
	}
	if weight < 0 {
		dst = append(dst, '0')
	} else {
		for i := 0; i <= weight; i++ {
			d := digit(i)
			if i == 0 {
				dst = appendInt(dst, d)
			} else {
				dst = append(dst, byte('0'+d/1000), byte('0'+d/100%10), byte('0'+d/10%10), byte('0'+d%10))
			}
		}
	}
	if dscale > 0 {
		dst = append(dst, '.')
		for i, written := weight+1, 0; written < dscale; i++ {
			d := digit(i)
			for _, c := range [4]byte{byte('0' + d/1000), byte('0' + d/100%10), byte('0' + d/10%10), byte('0' + d%10)} {
				if written == dscale {
					break
				}
				dst = append(dst, c)
				written++
			}
		}
	}
	return dst, nil
}

func appendInt(dst []byte, v int) []byte {
	if v >= 10 {
		dst = appendInt(dst, v/10)
	}
	return append(dst, byte('0'+v%10))
}
