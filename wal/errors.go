package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by every method called after Close, and by
	// Appends that were not yet accepted when Close began.
	ErrClosed = errors.New("wal: log is closed")

	// ErrLocked is wrapped by the error Open returns when another process
	// (or another Open in this process) holds the database's file lock for
	// longer than Options.LockTimeout.
	ErrLocked = errors.New("wal: database is locked")

	// ErrNotDatabase is wrapped by the error Open returns when the file is
	// not a bbolt database, or is a bbolt database of some other program.
	ErrNotDatabase = errors.New("wal: not a WAL database")

	// ErrUnknownSeq is wrapped by the error Commit and SaveCheckpoint return
	// for a sequence number that was never assigned (0 or above LastSeq).
	ErrUnknownSeq = errors.New("wal: unknown sequence number")

	// ErrFailed is wrapped by the errors of writes refused because an
	// earlier write transaction failed (for example a failed fsync). After a
	// failed fsync the state of the page cache is unknown, so the log stops
	// writing; Close and Open it again to continue.
	ErrFailed = errors.New("wal: log failed")

	// ErrReadOnly is returned by every write to a log opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("wal: log is open read-only")

	// ErrEmpty is wrapped by the error of a read-only Open of an empty
	// file: there is no log to read.
	ErrEmpty = errors.New("wal: database file is empty")
)

// CorruptError reports stored data that fails its integrity checks: a bad
// CRC, a truncated record, impossible lengths, or sequence numbers out of
// order. Corruption is never skipped in silence: Open, Replay, Uncommitted,
// Stats, Compact and the checkpoint readers return it.
type CorruptError struct {
	// Seq is the sequence number where the damage was found: the entry's
	// seq when it can be told (the one after the last good entry of the
	// block, or the block's first seq), else the block's first seq. It is
	// 0 for damage in a checkpoint or in the log's metadata.
	Seq uint64
	// Reason says what is wrong and where (block, byte offset, owner).
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt data at seq %d: %s", e.Seq, e.Reason)
}

// notDatabaseError reports a file that is not a WAL database; it matches
// ErrNotDatabase with errors.Is.
type notDatabaseError struct {
	path string
	why  string
}

func (e *notDatabaseError) Error() string {
	return fmt.Sprintf("wal: %s is not a WAL database: %s", e.path, e.why)
}

func (e *notDatabaseError) Unwrap() error { return ErrNotDatabase }

// lockedError is the error of a lock timeout. Its text is exactly
// "database <path> in use by pid N" or "database <path> is locked by
// another process"; it matches ErrLocked with errors.Is.
type lockedError struct {
	path string
	pid  int // 0 when no live pid is known
}

func (e *lockedError) Error() string {
	if e.pid > 0 {
		return fmt.Sprintf("database %s in use by pid %d", e.path, e.pid)
	}
	return fmt.Sprintf("database %s is locked by another process", e.path)
}

func (e *lockedError) Unwrap() error { return ErrLocked }
