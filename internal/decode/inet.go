package decode

import (
	"fmt"
	"strconv"
)

// inet/cidr payload: family u8 (2 IPv4, 3 IPv6) | bits u8 | address (4 or 16 bytes).
const (
	pgsqlAFInet  = 2
	pgsqlAFInet6 = 3
)

// appendInet is inet_out / cidr_out.
func appendInet(dst []byte, p []byte, cidr bool) ([]byte, error) {
	if len(p) < 2 {
		return dst, fmt.Errorf("inet of %d bytes", len(p))
	}
	family, bits, addr := p[0], int(p[1]), p[2:]
	var maxBits int
	switch family {
	case pgsqlAFInet:
		maxBits = 32
		if len(addr) != 4 {
			return dst, fmt.Errorf("IPv4 inet address of %d bytes", len(addr))
		}
		for i, b := range addr {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = strconv.AppendUint(dst, uint64(b), 10)
		}
	case pgsqlAFInet6:
		maxBits = 128
		if len(addr) != 16 {
			return dst, fmt.Errorf("IPv6 inet address of %d bytes", len(addr))
		}
		dst = appendIPv6(dst, addr)
	default:
		return dst, fmt.Errorf("inet family %d", family)
	}
	if bits > maxBits {
		return dst, fmt.Errorf("inet netmask /%d", bits)
	}
	if cidr || bits != maxBits {
		dst = append(dst, '/')
		dst = strconv.AppendUint(dst, uint64(bits), 10)
	}
	return dst, nil
}

// appendIPv6 is inet_net_ntop_ipv6's address part: the longest run (first
// on ties) of two or more zero words becomes "::", and ::a.b.c.d /
// ::ffff:a.b.c.d forms print the IPv4 part dotted.
func appendIPv6(dst []byte, a []byte) []byte {
	var words [8]uint16
	for i := range words {
		words[i] = uint16(a[2*i])<<8 | uint16(a[2*i+1])
	}
	bestBase, bestLen, curBase, curLen := -1, 0, -1, 0
	for i, w := range words {
		if w == 0 {
			if curBase == -1 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
		} else if curBase != -1 {
			if bestBase == -1 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase != -1 && (bestBase == -1 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase != -1 && bestLen < 2 {
		bestBase = -1
	}
	for i := 0; i < 8; i++ {
		if bestBase != -1 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				dst = append(dst, ':')
			}
			continue
		}
		if i != 0 {
			dst = append(dst, ':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 7 && words[7] != 1) || (bestLen == 5 && words[5] == 0xffff)) {
			for j, b := range a[12:] {
				if j > 0 {
					dst = append(dst, '.')
				}
				dst = strconv.AppendUint(dst, uint64(b), 10)
			}
			return dst
		}
		dst = strconv.AppendUint(dst, uint64(words[i]), 16)
	}
	if bestBase != -1 && bestBase+bestLen == 8 {
		dst = append(dst, ':')
	}
	return dst
}
