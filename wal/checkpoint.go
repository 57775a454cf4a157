package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Checkpoint is an owner's snapshot of its state and the last seq the
// snapshot covers: recovery loads it and replays from Seq+1; Compact drops
// the owner's entries up to Seq.
type Checkpoint struct {
	Owner    string
	Seq      uint64
	Time     time.Time // when it was saved (Options.Now), UTC
	Snapshot []byte
}

// Checkpoint encoding (value under key = owner):
//
//	1 byte version (1), 8 bytes seq, 8 bytes Unix seconds, 4 bytes nanos
//	(all little-endian), the snapshot, then CRC-32C of all that and the
//	owner's name.
const (
	checkpointVersion = 1
	checkpointFixed   = 1 + 8 + 8 + 4
)

func encodeCheckpoint(cp Checkpoint) []byte {
	b := make([]byte, 0, checkpointFixed+len(cp.Snapshot)+4)
	b = append(b, checkpointVersion)
	b = binary.LittleEndian.AppendUint64(b, cp.Seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(cp.Time.Unix()))
	b = binary.LittleEndian.AppendUint32(b, uint32(cp.Time.Nanosecond()))
	b = append(b, cp.Snapshot...)
	crc := crc32.Update(crc32.Checksum(b, castagnoli), castagnoli, []byte(cp.Owner))
	return binary.LittleEndian.AppendUint32(b, crc)
}

func decodeCheckpoint(owner string, v []byte) (Checkpoint, error) {
	cp, err := checkCheckpoint(owner, v)
	if err != nil {
		return Checkpoint{}, err
	}
	if snap := v[checkpointFixed : len(v)-4]; len(snap) > 0 {
		cp.Snapshot = append([]byte(nil), snap...)
	}
	return cp, nil
}

// checkCheckpoint is decodeCheckpoint without a copy of the snapshot
// (cp.Snapshot stays nil): its CRC checked, for a reader that needs only
// the owner and seq of a checkpoint that may be a hundred megabytes.
func checkCheckpoint(owner string, v []byte) (Checkpoint, error) {
	bad := func(reason string) error {
		return &CorruptError{Reason: fmt.Sprintf("checkpoint %q: %s", owner, reason)}
	}
	if len(v) < checkpointFixed+4 {
		return Checkpoint{}, bad(fmt.Sprintf("truncated: %d bytes", len(v)))
	}
	body := v[:len(v)-4]
	crc := crc32.Update(crc32.Checksum(body, castagnoli), castagnoli, []byte(owner))
	if stored := binary.LittleEndian.Uint32(v[len(v)-4:]); stored != crc {
		return Checkpoint{}, bad(fmt.Sprintf("crc mismatch: stored %08x, computed %08x", stored, crc))
	}
	if body[0] != checkpointVersion {
		return Checkpoint{}, bad(fmt.Sprintf("unknown version %d", body[0]))
	}
	nsec := binary.LittleEndian.Uint32(body[17:])
	if nsec >= 1e9 {
		return Checkpoint{}, bad(fmt.Sprintf("bad nanoseconds %d", nsec))
	}
	return Checkpoint{
		Owner: owner,
		Seq:   binary.LittleEndian.Uint64(body[1:]),
		Time:  time.Unix(int64(binary.LittleEndian.Uint64(body[9:])), int64(nsec)).UTC(),
	}, nil
}

// SaveCheckpoint stores owner's snapshot covering every entry up to seq,
// replacing the owner's previous checkpoint. Durable on return. seq must
// not exceed LastSeq (ErrUnknownSeq); 0 means "covers nothing".
func (l *Log) SaveCheckpoint(owner string, seq uint64, snapshot []byte) error {
	if owner == "" {
		return errors.New("wal: save checkpoint: empty owner")
	}
	cp := Checkpoint{Owner: owner, Seq: seq, Time: l.opts.Now(), Snapshot: snapshot}
	if len(snapshot) > maxBatchBytes*32 {
		return fmt.Errorf("wal: save checkpoint %q at seq %d: snapshot of %d bytes is too large", owner, seq, len(snapshot))
	}
	r := newRequest(context.Background())
	r.cpOwner, r.cpSeq, r.cpValue = owner, seq, encodeCheckpoint(cp)
	err := l.submit(r)
	r.release()
	return err
}

// LoadCheckpoint returns owner's checkpoint; false if it has none.
func (l *Log) LoadCheckpoint(owner string) (Checkpoint, bool, error) {
	var (
		cp    Checkpoint
		found bool
	)
	err := l.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCheckpoints).Get([]byte(owner))
		if v == nil {
			return nil
		}
		var err error
		cp, err = decodeCheckpoint(owner, v)
		found = err == nil
		return err
	})
	l.noteTouched(len(cp.Snapshot)) // a large run's is tens of megabytes
	if err != nil {
		return Checkpoint{}, false, err
	}
	return cp, found, nil
}

// Checkpoints returns every owner's checkpoint, ordered by owner.
func (l *Log) Checkpoints() ([]Checkpoint, error) {
	var out []Checkpoint
	err := l.view(func(tx *bolt.Tx) error {
		return forEachCheckpoint(tx, func(cp Checkpoint) error {
			out = append(out, cp)
			return nil
		})
	})
	for _, cp := range out {
		l.noteTouched(len(cp.Snapshot))
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkpointHeader reads a stored checkpoint's owner, seq and time
// without its snapshot and without the CRC check (Stats: a checkpoint's
// snapshot can be megabytes, and Stats runs at every heartbeat).
func checkpointHeader(owner string, v []byte) (Checkpoint, error) {
	if len(v) < checkpointFixed+4 || v[0] != checkpointVersion {
		return Checkpoint{}, &CorruptError{Reason: fmt.Sprintf("checkpoint %q: bad header (%d bytes)", owner, len(v))}
	}
	nsec := binary.LittleEndian.Uint32(v[17:])
	if nsec >= 1e9 {
		return Checkpoint{}, &CorruptError{Reason: fmt.Sprintf("checkpoint %q: bad nanoseconds %d", owner, nsec)}
	}
	return Checkpoint{Owner: owner, Seq: binary.LittleEndian.Uint64(v[1:]),
		Time: time.Unix(int64(binary.LittleEndian.Uint64(v[9:])), int64(nsec)).UTC()}, nil
}

func forEachCheckpoint(tx *bolt.Tx, fn func(Checkpoint) error) error {
	return eachCheckpoint(tx, decodeCheckpoint, fn)
}

// eachCheckpoint reads every checkpoint with decode (decodeCheckpoint, or
// checkCheckpoint where the snapshots are not needed).
func eachCheckpoint(tx *bolt.Tx, decode func(string, []byte) (Checkpoint, error), fn func(Checkpoint) error) error {
	c := tx.Bucket(bucketCheckpoints).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		cp, err := decode(string(k), v)
		if err != nil {
			return err
		}
		if err := fn(cp); err != nil {
			return err
		}
	}
	return nil
}
