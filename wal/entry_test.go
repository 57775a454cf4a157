package wal

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func FuzzDecodeEntry(f *testing.F) {
	seeds := []Entry{
		{Seq: 1, Time: testTime, Type: "task_submitted", Owner: "scheduler", Payload: []byte("payload")},
		{Seq: 1 << 40, Time: time.Unix(0, 0), Intent: true},
		{Seq: 7, Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), Type: string(make([]byte, 200)), Payload: make([]byte, 300)},
	}
	for _, e := range seeds {
		enc := encodeEntry(nil, &e)
		f.Add(enc, e.Type, e.Owner, e.Seq, e.Time.Unix(), uint32(e.Time.Nanosecond()), e.Intent)
		f.Add(enc[:len(enc)-1], "", "", uint64(0), int64(0), uint32(0), false)
		bad := bytes.Clone(enc)
		bad[len(bad)/2] ^= 0xff
		f.Add(bad, "x", "y", uint64(2), int64(-1), uint32(999999999), true)
	}
	f.Add([]byte{}, "", "", uint64(0), int64(0), uint32(0), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0}, "", "", uint64(0), int64(0), uint32(0), false)
	f.Add([]byte{24, 0, 0, 0}, "", "", uint64(0), int64(0), uint32(0), false)

	f.Fuzz(func(t *testing.T, data []byte, typ, owner string, seq uint64, sec int64, nsec uint32, intent bool) {
		// Arbitrary bytes: no panic; what decodes re-encodes to the same bytes.
		if e, n, err := decodeEntry(data); err == nil {
			require.LessOrEqual(t, n, len(data))
			require.Equal(t, data[:n], encodeEntry(nil, &e))
		}
		_ = decodeBlock(1, data, func(Entry, []byte) error { return nil })
		_, _ = countEntries(1, data)

		// encode -> decode round-trips, also with bytes after the entry.
		sec = minUnix + int64(uint64(sec)%uint64(maxUnix-minUnix+1))
		e := Entry{
			Seq:     seq,
			Time:    time.Unix(sec, int64(nsec%1e9)).UTC(),
			Type:    typ,
			Owner:   owner,
			Intent:  intent,
			Payload: data,
		}
		if len(e.Payload) == 0 {
			e.Payload = nil
		}
		enc := encodeEntry(nil, &e)
		require.Equal(t, encodedSize(&e), len(enc))
		for _, b := range [][]byte{enc, append(bytes.Clone(enc), data...)} {
			got, n, err := decodeEntry(b)
			require.NoError(t, err)
			require.Equal(t, len(enc), n)
			require.Equal(t, e, got)
		}
		for cut := 0; cut < len(enc); cut += 1 + len(enc)/16 {
			_, _, err := decodeEntry(enc[:cut])
			require.Error(t, err)
		}
	})
}

func TestEncodeEntryFields(t *testing.T) {
	e := Entry{Seq: 5, Time: testTime, Type: "ty", Owner: "ow", Intent: true, Payload: []byte{1, 2, 3}}
	enc := encodeEntry([]byte("prefix"), &e)
	require.Equal(t, "prefix", string(enc[:6]))
	got, n, err := decodeEntry(enc[6:])
	require.NoError(t, err)
	require.Equal(t, len(enc)-6, n)
	require.Equal(t, e, got)

	// Every single-bit flip is detected.
	raw := enc[6:]
	for i := range raw {
		for bit := range 8 {
			b := bytes.Clone(raw)
			b[i] ^= 1 << bit
			_, n, err := decodeEntry(b)
			if err == nil {
				t.Fatalf("flip of byte %d bit %d not detected (n=%d)", i, bit, n)
			}
		}
	}
}
