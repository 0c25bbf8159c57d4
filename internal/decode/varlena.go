package decode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pierrec/lz4/v4"

	"github.com/walshadow/walshadow/internal/wal"
)

// VarlenaKind tells how a varlena is stored.
type VarlenaKind uint8

const (
	VarlenaShort      VarlenaKind = iota + 1 // 1-byte header, inline, uncompressed
	VarlenaPlain                             // 4-byte header, inline, uncompressed
	VarlenaCompressed                        // 4-byte header, inline, compressed
	VarlenaExternal                          // TOAST pointer to an out-of-line value
)

// CompressionMethod is a ToastCompressionId.
type CompressionMethod uint8

const (
	CompressionPGLZ CompressionMethod = 0
	CompressionLZ4  CompressionMethod = 1
)

func (m CompressionMethod) String() string {
	switch m {
	case CompressionPGLZ:
		return "pglz"
	case CompressionLZ4:
		return "lz4"
	}
	return fmt.Sprintf("compression(%d)", uint8(m))
}

// ToastPointer is varatt_external: where an out-of-line value lives.
type ToastPointer struct {
	RawSize    int32  // original size including the 4-byte header
	ExtInfo    uint32 // stored size (low 30 bits) and compression method (top 2)
	ValueID    uint32 // chunk_id in the TOAST table
	ToastRelID uint32
}

// ExtSize is the stored (possibly compressed) size of the value.
func (p ToastPointer) ExtSize() int { return int(p.ExtInfo & 0x3FFFFFFF) }

// Compressed reports whether the stored chunks are compressed
// (VARATT_EXTERNAL_IS_COMPRESSED).
func (p ToastPointer) Compressed() bool { return p.ExtSize() < int(p.RawSize)-4 }

// Method is the compression method of compressed chunks.
func (p ToastPointer) Method() CompressionMethod { return CompressionMethod(p.ExtInfo >> 30) }

// Varlena is a classified varlena.
type Varlena struct {
	Kind VarlenaKind
	// Payload is the value's bytes for Short and Plain, the compressed bytes
	// for Compressed, nil for External. It aliases the input.
	Payload []byte
	// RawSize and Method describe a Compressed value (RawSize excludes the header).
	RawSize  int
	Method   CompressionMethod
	External ToastPointer
}

// ErrExternal is returned when an inline value is needed but the varlena is
// a TOAST pointer.
var ErrExternal = errors.New("value is stored out of line (TOAST pointer)")

const (
	varTagOnDisk        = 18
	toastPointerSize    = 16
	varHdrSzExternal    = 2
	maxInlineRawSize    = 1 << 30
	compressedHeaderLen = 8
)

// varlenaSize is VARSIZE_ANY of the varlena at the start of b, checked
// against len(b).
func varlenaSize(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, errors.New("empty varlena")
	}
	var n int
	switch first := b[0]; {
	case first == 0x01:
		if len(b) < 2 {
			return 0, errors.New("external varlena: missing tag")
		}
		if b[1] != varTagOnDisk {
			return 0, fmt.Errorf("external varlena: tag %d is not an on-disk TOAST pointer", b[1])
		}
		n = varHdrSzExternal + toastPointerSize
	case first&0x01 != 0:
		n = int(first >> 1)
		if n < 1 {
			return 0, fmt.Errorf("1-byte varlena header %#x", first)
		}
	default:
		if len(b) < 4 {
			return 0, fmt.Errorf("4-byte varlena header: %d bytes", len(b))
		}
		n = int(binary.LittleEndian.Uint32(b) >> 2)
		if n < 4 {
			return 0, fmt.Errorf("4-byte varlena length %d < 4", n)
		}
	}
	if n > len(b) {
		return 0, fmt.Errorf("varlena of %d bytes, %d left", n, len(b))
	}
	return n, nil
}

// ParseVarlena classifies the varlena that is exactly raw (as Deform returns).
func ParseVarlena(raw []byte) (Varlena, error) {
	n, err := varlenaSize(raw)
	if err != nil {
		return Varlena{}, err
	}
	if n != len(raw) {
		return Varlena{}, fmt.Errorf("varlena header says %d bytes, datum has %d", n, len(raw))
	}
	switch first := raw[0]; {
	case first == 0x01:
		p := raw[varHdrSzExternal:]
		return Varlena{Kind: VarlenaExternal, External: ToastPointer{
			RawSize:    int32(binary.LittleEndian.Uint32(p)),
			ExtInfo:    binary.LittleEndian.Uint32(p[4:]),
			ValueID:    binary.LittleEndian.Uint32(p[8:]),
			ToastRelID: binary.LittleEndian.Uint32(p[12:]),
		}}, nil
	case first&0x01 != 0:
		return Varlena{Kind: VarlenaShort, Payload: raw[1:]}, nil
	case first&0x03 == 0x02:
		if n < compressedHeaderLen {
			return Varlena{}, fmt.Errorf("compressed varlena of %d bytes has no tcinfo", n)
		}
		tc := binary.LittleEndian.Uint32(raw[4:])
		return Varlena{Kind: VarlenaCompressed, Payload: raw[compressedHeaderLen:], RawSize: int(tc & 0x3FFFFFFF), Method: CompressionMethod(tc >> 30)}, nil
	default:
		return Varlena{Kind: VarlenaPlain, Payload: raw[4:]}, nil
	}
}

// Inline returns the value's bytes (without header), decompressing a
// compressed value into dst[:0] (grown as needed). External values give
// ErrExternal.
func (v Varlena) Inline(dst []byte) ([]byte, error) {
	switch v.Kind {
	case VarlenaShort, VarlenaPlain:
		return v.Payload, nil
	case VarlenaExternal:
		return nil, ErrExternal
	case VarlenaCompressed:
		return Decompress(dst, v.Payload, v.RawSize, v.Method)
	}
	return nil, fmt.Errorf("varlena kind %d", v.Kind)
}

// Decompress inflates src, compressed with method, to exactly rawSize bytes
// appended to dst[:0].
func Decompress(dst, src []byte, rawSize int, method CompressionMethod) ([]byte, error) {
	if rawSize < 0 || rawSize > maxInlineRawSize {
		return nil, fmt.Errorf("%s: raw size %d", method, rawSize)
	}
	switch method {
	case CompressionPGLZ:
		out, err := wal.PGLZDecompress(dst[:0], src, rawSize, true)
		if err != nil {
			return nil, fmt.Errorf("pglz: %w", err)
		}
		return out, nil
	case CompressionLZ4:
		// An LZ4 block expands at most ~255x: refuse sizes the input cannot reach.
		if rawSize > len(src)*255+16 {
			return nil, fmt.Errorf("lz4: raw size %d unreachable from %d bytes", rawSize, len(src))
		}
		if cap(dst) < rawSize {
			dst = make([]byte, rawSize)
		}
		dst = dst[:rawSize]
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if n != rawSize {
			return nil, fmt.Errorf("lz4: inflated to %d bytes, want %d", n, rawSize)
		}
		return dst, nil
	}
	return nil, fmt.Errorf("unknown compression method %d", method)
}
