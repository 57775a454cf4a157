package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// Entry is one record of the log.
type Entry struct {
	Seq     uint64    // assigned by Append; ignored on input
	Time    time.Time // when the fact happened; caller sets it (injected clock); zero -> Options.Now(); read back in UTC
	Type    string    // caller's entry type, e.g. "task_submitted"
	Owner   string    // caller's owner name, e.g. "scheduler", "module/explorer"
	Intent  bool      // an intent: listed by Uncommitted until Commit(seq)
	Payload []byte
	// Closes, if set on input, commits the intent with that seq (see
	// Commit) in the same transaction as the entry: an answer closes its
	// request exactly when it is durable, with no Commit of its own. It
	// must be below the entry's seq. Not read back by Replay.
	Closes uint64
	// Archive, if set on input, is put in the archive (see Log.Archive)
	// in the same transaction as the entry: a record that exists exactly
	// when the entry does. Not read back by Replay.
	Archive *ArchiveRecord
}

// ArchiveRecord is one key and value of the archive.
type ArchiveRecord struct {
	Key   string
	Value []byte
}

// Entry encoding. Every entry is self-delimiting and carries its own CRC,
// so a block (the value stored for one group commit) is simply entries
// back to back:
//
//	off  size
//	0    4     n: little-endian length of everything after this field
//	4    1     flags: bit 0 = intent; other bits must be zero
//	5    8     seq (little-endian)
//	13   8     time: Unix seconds (little-endian, signed)
//	21   4     time: nanoseconds, < 1e9
//	25   ...   uvarint len + Type, uvarint len + Owner, uvarint len + Payload
//	4+n-4 4    CRC-32C (Castagnoli) of bytes [0, 4+n-4)
//
// Times are decoded in UTC.
const (
	entryFixed   = 4 + 1 + 8 + 8 + 4  // length, flags, seq, seconds, nanos
	entryMinSize = entryFixed + 3 + 4 // three empty strings and the CRC
	flagIntent   = 1
)

// Times are limited to years 1 through 9999 (the range time.Time
// round-trips through Unix seconds exactly).
const (
	minUnix = -62135596800 // 0001-01-01T00:00:00Z
	maxUnix = 253402300799 // 9999-12-31T23:59:59Z
)

// validTime reports whether t can be encoded.
func validTime(t time.Time) bool {
	s := t.Unix()
	return s >= minUnix && s <= maxUnix
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodedSize is the number of bytes encodeEntry appends for e.
func encodedSize(e *Entry) int {
	return entryFixed + uvarintLen(uint64(len(e.Type))) + len(e.Type) +
		uvarintLen(uint64(len(e.Owner))) + len(e.Owner) +
		uvarintLen(uint64(len(e.Payload))) + len(e.Payload) + 4
}

// encodeEntry appends the encoding of e (with e.Seq and e.Time as given)
// to buf and returns the extended buffer.
func encodeEntry(buf []byte, e *Entry) []byte {
	start := len(buf)
	size := encodedSize(e)
	var flags byte
	if e.Intent {
		flags |= flagIntent
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(size-4))
	buf = append(buf, flags)
	buf = binary.LittleEndian.AppendUint64(buf, e.Seq)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(e.Time.Unix()))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(e.Time.Nanosecond()))
	buf = binary.AppendUvarint(buf, uint64(len(e.Type)))
	buf = append(buf, e.Type...)
	buf = binary.AppendUvarint(buf, uint64(len(e.Owner)))
	buf = append(buf, e.Owner...)
	buf = binary.AppendUvarint(buf, uint64(len(e.Payload)))
	buf = append(buf, e.Payload...)
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf[start:], castagnoli))
}

// decodeEntry decodes the entry at the start of b and returns it with the
// number of bytes it occupies. Type, Owner and Payload are copies, so b
// may be memory that is only valid inside a bbolt transaction. A malformed
// entry yields an error describing it (the caller turns it into a
// *CorruptError); decodeEntry never panics, whatever b holds.
func decodeEntry(b []byte) (Entry, int, error) {
	p, n, err := parseEntry(b)
	if err != nil {
		return Entry{}, 0, err
	}
	return p.entry(), n, nil
}

// parsedEntry is an entry read in place: its fields are within the
// bytes it was parsed from (entry copies them).
type parsedEntry struct {
	seq                 uint64
	intent              bool
	sec                 int64
	nsec                uint32
	typ, owner, payload []byte
}

func (p *parsedEntry) entry() Entry {
	e := Entry{Seq: p.seq, Time: time.Unix(p.sec, int64(p.nsec)).UTC(), Intent: p.intent,
		Type: string(p.typ), Owner: string(p.owner)}
	if len(p.payload) > 0 {
		e.Payload = append([]byte(nil), p.payload...)
	}
	return e
}

// parseEntry is decodeEntry without the copies: what it returns is
// within b.
func parseEntry(b []byte) (parsedEntry, int, error) {
	var p parsedEntry
	if len(b) < 4 {
		return p, 0, fmt.Errorf("truncated: %d bytes left, need 4 for the length", len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if n < entryMinSize-4 {
		return p, 0, fmt.Errorf("bad length %d (minimum %d)", n, entryMinSize-4)
	}
	if n > uint64(len(b)-4) {
		return p, 0, fmt.Errorf("truncated: length %d, only %d bytes left", n, len(b)-4)
	}
	end := int(4 + n)
	rec := b[:end]
	body := rec[:end-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(rec[end-4:]); got != want {
		return p, 0, fmt.Errorf("crc mismatch: stored %08x, computed %08x", want, got)
	}
	flags := body[4]
	if flags&^flagIntent != 0 {
		return p, 0, fmt.Errorf("unknown flags %#x", flags)
	}
	p.sec = int64(binary.LittleEndian.Uint64(body[13:]))
	p.nsec = binary.LittleEndian.Uint32(body[21:])
	if p.sec < minUnix || p.sec > maxUnix || p.nsec >= 1e9 {
		return p, 0, fmt.Errorf("bad time %d.%09d", p.sec, p.nsec)
	}
	p.seq = binary.LittleEndian.Uint64(body[5:])
	p.intent = flags&flagIntent != 0
	rest := body[entryFixed:]
	var err error
	if p.typ, rest, err = readField(rest, "type"); err != nil {
		return p, 0, err
	}
	if p.owner, rest, err = readField(rest, "owner"); err != nil {
		return p, 0, err
	}
	if p.payload, rest, err = readField(rest, "payload"); err != nil {
		return p, 0, err
	}
	if len(rest) != 0 {
		return p, 0, fmt.Errorf("bad lengths: %d stray bytes after the payload", len(rest))
	}
	return p, end, nil
}

// readField reads one uvarint-length-prefixed field from b.
func readField(b []byte, name string) (field, rest []byte, err error) {
	l, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("bad lengths: unreadable %s length", name)
	}
	if k != uvarintLen(l) {
		return nil, nil, fmt.Errorf("bad lengths: %s length not minimally encoded", name)
	}
	if l > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("bad lengths: %s length %d, only %d bytes left", name, l, len(b)-k)
	}
	return b[k : k+int(l)], b[k+int(l):], nil
}

func uvarintLen(x uint64) int {
	n := 1
	for v := x; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// decodeBlock decodes every entry of the block stored under first (the
// seq of its first entry when it was written) and calls fn for each, in
// order. It checks that the block is not empty and that seqs start at or
// after first and strictly increase. Damage is returned as *CorruptError.
func decodeBlock(first uint64, v []byte, fn func(e Entry, raw []byte) error) error {
	return parseBlock(first, v, func(p *parsedEntry, raw []byte) error { return fn(p.entry(), raw) })
}

// parseBlock is decodeBlock with the entries read in place (what fn gets
// is valid only during the call): compaction reads gigabytes of entries
// for their seqs and owners only.
func parseBlock(first uint64, v []byte, fn func(p *parsedEntry, raw []byte) error) error {
	if len(v) == 0 {
		return &CorruptError{Seq: first, Reason: fmt.Sprintf("block %d is empty", first)}
	}
	next := first // the lowest seq the next entry may have
	for off := 0; off < len(v); {
		p, n, err := parseEntry(v[off:])
		if err != nil {
			return &CorruptError{Seq: next, Reason: fmt.Sprintf("block %d, offset %d: %v", first, off, err)}
		}
		if p.seq < next {
			return &CorruptError{Seq: next, Reason: fmt.Sprintf("block %d, offset %d: seq %d out of order", first, off, p.seq)}
		}
		if err := fn(&p, v[off:off+n]); err != nil {
			return err
		}
		if p.seq == ^uint64(0) {
			if off+n != len(v) {
				return &CorruptError{Seq: p.seq, Reason: fmt.Sprintf("block %d: entries after the largest seq", first)}
			}
			break
		}
		next = p.seq + 1
		off += n
	}
	return nil
}

// lastSeqOfBlock returns the seq of the last entry of a block, checking
// every entry's CRC on the way.
func lastSeqOfBlock(first uint64, v []byte) (uint64, error) {
	var last uint64
	err := parseBlock(first, v, func(p *parsedEntry, _ []byte) error {
		last = p.seq
		return nil
	})
	return last, err
}
