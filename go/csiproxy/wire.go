package csiproxy

import (
	"errors"
	"math"
)

// A minimal protobuf (proto3) codec: the messages of library mode are a
// few scalar, string, repeated and map fields, so the module needs no
// protobuf runtime (and no dependency at all).

// encoder appends fields in wire format; zero values are left out, as
// proto3 does.
type encoder []byte

func (e *encoder) varint(v uint64) {
	for v >= 0x80 {
		*e = append(*e, byte(v)|0x80)
		v >>= 7
	}
	*e = append(*e, byte(v))
}

func (e *encoder) tag(field, wireType int) { e.varint(uint64(field<<3 | wireType)) }

func (e *encoder) str(field int, s string) {
	if s == "" {
		return
	}
	e.tag(field, 2)
	e.varint(uint64(len(s)))
	*e = append(*e, s...)
}

func (e *encoder) uint(field int, v uint64) {
	if v == 0 {
		return
	}
	e.tag(field, 0)
	e.varint(v)
}

func (e *encoder) int64(field int, v int64) { e.uint(field, uint64(v)) }

func (e *encoder) boolean(field int, b bool) {
	if b {
		e.uint(field, 1)
	}
}

func (e *encoder) message(field int, m encoder) {
	e.tag(field, 2)
	e.varint(uint64(len(m)))
	*e = append(*e, m...)
}

// wipe zeroes an encoded request that carried a secret (a password, a
// CHAP secret), once the library has answered (the library wipes its own
// copy).
func (e encoder) wipe() {
	for i := range e {
		e[i] = 0
	}
}

var errDecode = errors.New("csiproxy: the library's response does not decode")

// message is a decoded message: every field by number, in order.
type message map[int][]value

type value struct {
	n uint64 // varint fields
	b []byte // length-delimited fields
}

func uvarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * uint(i))
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

func decode(b []byte) (message, error) {
	m := message{}
	for len(b) > 0 {
		key, n := uvarint(b)
		if n == 0 || key>>3 == 0 || key>>3 > math.MaxInt32 {
			return nil, errDecode
		}
		b = b[n:]
		field := int(key >> 3)
		switch key & 7 {
		case 0:
			v, n := uvarint(b)
			if n == 0 {
				return nil, errDecode
			}
			m[field] = append(m[field], value{n: v})
			b = b[n:]
		case 2:
			l, n := uvarint(b)
			if n == 0 || l > uint64(len(b)-n) {
				return nil, errDecode
			}
			m[field] = append(m[field], value{b: b[n : n+int(l)]})
			b = b[n+int(l):]
		case 1:
			if len(b) < 8 {
				return nil, errDecode
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return nil, errDecode
			}
			b = b[4:]
		default:
			return nil, errDecode
		}
	}
	return m, nil
}

// last returns the last occurrence of a field (proto3: the last one wins).
func (m message) last(field int) value {
	vs := m[field]
	if len(vs) == 0 {
		return value{}
	}
	return vs[len(vs)-1]
}

func (m message) str(field int) string   { return string(m.last(field).b) }
func (m message) uint(field int) uint64  { return m.last(field).n }
func (m message) int64(field int) int64  { return int64(m.last(field).n) }
func (m message) boolean(field int) bool { return m.last(field).n != 0 }

func (m message) strs(field int) []string {
	out := make([]string, 0, len(m[field]))
	for _, v := range m[field] {
		out = append(out, string(v.b))
	}
	return out
}

// messages decodes every occurrence of a message field (repeated messages
// and map entries, whose key is field 1 and value field 2).
func (m message) messages(field int) ([]message, error) {
	out := make([]message, 0, len(m[field]))
	for _, v := range m[field] {
		sub, err := decode(v.b)
		if err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, nil
}
