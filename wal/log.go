// Package wal is a durable, group-committed write-ahead log stored in a
// bbolt file. It knows nothing of its callers: entries are (seq, time,
// type, owner, intent flag, payload bytes); owners save checkpoints (a
// snapshot plus the last seq it covers) and Compact drops what they cover.
//
// Layout of the bbolt file:
//
//	blocks       big-endian first seq -> nested bucket {0x00 -> the entries of
//	             one group commit, back to back} (see block.go)
//	intents      big-endian seq -> empty; one key per intent not yet committed
//	checkpoints  owner -> encoded checkpoint
//	meta         "format" -> format name; "last_seq" -> last seq ever assigned,
//	             kept when compaction deletes the newest block
//
// One writer goroutine owns every write: Append, Commit and SaveCheckpoint
// queue a request and wait; the writer puts every request waiting at that
// moment (up to Options.MaxBatch entries) into one bbolt transaction, so
// one commit (two fsyncs) carries them all, with one B+tree value for all
// the entries.
package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var (
	bucketBlocks      = []byte("blocks")
	bucketIntents     = []byte("intents")
	bucketCheckpoints = []byte("checkpoints")
	bucketMeta        = []byte("meta")

	keyFormat  = []byte("format")
	keyLastSeq = []byte("last_seq")

	formatName = []byte("fano-wal/1")
)

const (
	defaultLockTimeout = time.Second
	defaultMaxBatch    = 4096
	// maxBatchBytes bounds the encoded size of one group commit; a single
	// Append larger than this still goes through, alone.
	maxBatchBytes = 32 << 20
	// maxEntryBytes bounds one encoded entry (the length field is 32 bits).
	maxEntryBytes = 1 << 30
)

// Options configure Open. The zero value is usable.
type Options struct {
	// LockTimeout is how long Open waits for the file lock (default 1s);
	// Open never hangs.
	LockTimeout time.Duration
	// PIDFile, optional: after the lock is taken, Open writes our pid here
	// (Close removes it); on lock timeout Open reads it to say "database
	// <path> in use by pid N".
	PIDFile string
	// NoSync skips fsync: for tests and benchmarks only.
	NoSync bool
	// MaxBatch is the most entries one group commit carries (default 4096).
	MaxBatch int
	// Now is the clock for entries with a zero Time and for checkpoint
	// times (default time.Now).
	Now func() time.Time
	// RetryWrites, when > 0, makes a failed write transaction (a full
	// disk, an I/O error) retry with the same entries and seqs after 50 ms,
	// the wait doubling up to RetryWrites, until it succeeds or Close:
	// writers wait instead of failing, and nothing is lost or written
	// twice. Zero: the first failure fails every later write (ErrFailed).
	RetryWrites time.Duration
	// OnWriteFault, if set, is called from the writer before each wait of
	// a retry (attempt counts from 1); OnWriteRecovered once the retried
	// write went through. They must not call the Log.
	OnWriteFault     func(err error, attempt int)
	OnWriteRecovered func(down time.Duration, attempts int)
	// ReleasePagesEvery: after this many bytes were written to or read
	// from the file, the pages of it mapped in memory leave the process's
	// resident set (see ReleasePages). Default 4 MB; < 0: never.
	ReleasePagesEvery int
	// WriterSlice is the CPU slice the writer's thread asks the kernel
	// for (Linux's EEVDF scheduler, 6.12 on: sched_attr.sched_runtime).
	// Default 100 µs, the shortest it takes; < 0: the kernel's own (1.4
	// ms on a two-core machine). See startWriterThread.
	WriterSlice time.Duration
	// ReadOnly opens an existing log for reading only: the lock is shared,
	// nothing is written (not even bbolt's meta page, nor PIDFile, which
	// is only read to name the holder of the lock), every write returns
	// ErrReadOnly, and a missing or empty file is an error rather than a
	// new log.
	ReadOnly bool
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = defaultLockTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = defaultMaxBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReleasePagesEvery == 0 {
		o.ReleasePagesEvery = defaultReleaseBytes
	}
	if o.WriterSlice == 0 {
		o.WriterSlice = defaultWriterSlice
	}
	return o
}

// Log is an open write-ahead log.
//
// Concurrency contract: all methods are safe for concurrent use by any
// number of goroutines. Writes (Append, Commit, SaveCheckpoint) are
// serialized through one writer goroutine and are durable (fsynced) when
// they return nil; concurrent writes share transactions (group commit).
// Reads (Replay, Uncommitted, LoadCheckpoint, Checkpoints, Stats) see
// every write that returned before they started, and run alongside
// writes. Replay calls its callback outside any bbolt transaction, so the
// callback may itself call methods of the Log. Compact runs online in
// short transactions of its own. Close waits for writes already queued;
// every method called after Close returns ErrClosed.
type Log struct {
	path     string
	opts     Options
	db       *bolt.DB
	stalePID int
	ownPID   bool // we wrote opts.PIDFile

	lastSeq atomic.Uint64 // last durable seq
	touched atomic.Int64  // bytes read or written through the mapping since ReleasePages

	chunkCompacted func()       // tests: called after each Compact transaction, before its pages are released
	statsReadBack  atomic.Int64 // blocks Stats read back to count their entries

	mu          sync.Mutex
	cond        *sync.Cond // signalled when queue grows or closed is set
	queue       []*request
	closed      bool
	failed      error         // sticky error of a failed write transaction
	fault       error         // the failed write being retried (RetryWrites)
	closing     chan struct{} // closed by Close or StopRetrying: a retry gives up
	closingOnce sync.Once
	done        chan struct{}

	blockCounts blockCountCache // Stats' entries per block
	duty        writerDuty      // what the writer spent its time on
	writer      writerThread    // set before Open returns

	// Test hooks, set before the first write.
	hookEnqueued     func()          // after a request is queued
	hookIdle         func()          // in the writer, each time it waits for a request; set under l.mu
	hookBeforeCommit func(batch int) // in the writer, before tx.Commit; batch = entries
	hookAnswered     func()          // in the writer, once a written commit's requests are answered
}

// Open opens (creating if needed) the log in the bbolt file at path and
// takes its exclusive file lock, waiting at most opts.LockTimeout. On
// timeout the error wraps ErrLocked and reads "database <path> in use by
// pid N" when opts.PIDFile names a live process. A file that is not a WAL
// database gives an error wrapping ErrNotDatabase that names the path.
// Damage in the newest block is reported as *CorruptError.
func Open(path string, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	fi, err := os.Stat(path)
	if err == nil && fi.IsDir() {
		return nil, &notDatabaseError{path: path, why: "it is a directory"}
	}
	if opts.ReadOnly {
		if err != nil {
			return nil, fmt.Errorf("wal: open %s read-only: %w", path, err)
		}
		if fi.Size() == 0 {
			return nil, fmt.Errorf("wal: open %s read-only: %w", path, ErrEmpty)
		}
	}
	// bbolt maps the file and trusts its meta page: pages it names beyond
	// the end of a cut-short file fault (SIGSEGV/SIGBUS) on first touch.
	// A file another process holds is being written: read now, its pages
	// may be torn, and it would look damaged. It is checked once bbolt
	// has waited for the lock instead (bbolt's own reads at open turn a
	// fault into an error: openBolt).
	inUse := heldByAnother(path)
	if !inUse {
		if err := CheckFile(path); err != nil {
			return nil, err
		}
	}
	db, err := openBolt(path, opts)
	if err == nil && inUse {
		if cerr := CheckFile(path); cerr != nil {
			_ = db.Close()
			return nil, cerr
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, lockTimeoutError(path, opts.PIDFile)
		case isNotBolt(err):
			return nil, &notDatabaseError{path: path, why: fmt.Sprintf("not a bbolt file (%v)", err)}
		}
		return nil, fmt.Errorf("wal: open %s: %w", path, err)
	}
	l := &Log{path: path, opts: opts, db: db, done: make(chan struct{}), closing: make(chan struct{})}
	l.cond = sync.NewCond(&l.mu)
	last, err := l.init()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	l.lastSeq.Store(last)
	// bbolt read every page at open to rebuild its freelist (it is not
	// stored: NoFreelistSync).
	if opts.ReleasePagesEvery > 0 {
		l.ReleasePages()
	}
	if opts.ReadOnly {
		l.failed = ErrReadOnly // every write is refused at enqueue
		close(l.done)          // no writer goroutine
		return l, nil
	}
	if opts.PIDFile != "" {
		stale, err := takePIDFile(opts.PIDFile)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("wal: open %s: %w", path, err)
		}
		l.stalePID, l.ownPID = stale, true
	}
	started := make(chan struct{})
	go l.run(started)
	<-started
	return l, nil
}

// openBolt opens the bbolt file. A fault while bbolt reads a damaged
// file it has mapped becomes an error, not a crash of the process.
func openBolt(path string, opts Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, &DamagedError{Path: path, Problem: fmt.Sprintf("bbolt faulted reading it: %v", r)}
		}
	}()
	return bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        opts.LockTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		NoSync:         opts.NoSync,
		NoGrowSync:     opts.NoSync,
		ReadOnly:       opts.ReadOnly,
	})
}

// isNotBolt reports bbolt's errors for a file whose header is not a bbolt
// header. A file shorter than two pages gets an error with no sentinel.
func isNotBolt(err error) bool {
	return errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) ||
		errors.Is(err, berrors.ErrChecksum) || strings.HasPrefix(err.Error(), "file size too small")
}

// init creates the buckets of a fresh file, checks the format of an
// existing one, and returns the last seq ever assigned.
func (l *Log) init() (last uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &notDatabaseError{path: l.path, why: fmt.Sprintf("bbolt panicked: %v", r)}
		}
	}()
	// An existing log is only read here: opening it writes nothing.
	fresh := false
	err = l.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		fresh = meta == nil || meta.Get(keyFormat) == nil
		if fresh {
			return nil
		}
		return checkFormat(tx, l.path)
	})
	if err == nil && fresh {
		if l.opts.ReadOnly {
			err = &notDatabaseError{path: l.path, why: "no WAL format marker"}
		} else {
			err = l.db.Update(l.initTx)
		}
	}
	if err != nil {
		return 0, err
	}
	return l.readLastSeq()
}

// checkFormat checks the marker and buckets of an existing log.
func checkFormat(tx *bolt.Tx, path string) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return &notDatabaseError{path: path, why: "no WAL format marker"}
	}
	if f := meta.Get(keyFormat); string(f) != string(formatName) {
		return &notDatabaseError{path: path, why: fmt.Sprintf("format %q, want %q", f, formatName)}
	}
	for _, name := range [][]byte{bucketBlocks, bucketIntents, bucketCheckpoints} {
		if tx.Bucket(name) == nil {
			return &CorruptError{Reason: fmt.Sprintf("%s: bucket %s missing", path, name)}
		}
	}
	return nil
}

// initTx creates the buckets of a fresh file; a bbolt file with buckets
// but no format marker belongs to another program.
func (l *Log) initTx(tx *bolt.Tx) error {
	foreign := false
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		foreign = true
		return nil
	})
	if foreign {
		return &notDatabaseError{path: l.path, why: "a bbolt database of another program (no WAL format marker)"}
	}
	for _, name := range [][]byte{bucketBlocks, bucketIntents, bucketCheckpoints, bucketMeta} {
		if _, err := tx.CreateBucket(name); err != nil {
			return fmt.Errorf("wal: open %s: create bucket %s: %w", l.path, name, err)
		}
	}
	return tx.Bucket(bucketMeta).Put(keyFormat, formatName)
}

// readLastSeq returns the last seq ever assigned.
func (l *Log) readLastSeq() (last uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Reason: fmt.Sprintf("%s: bbolt panicked reading: %v", l.path, r)}
		}
	}()
	err = l.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLastSeq); v != nil {
			if len(v) != 8 {
				return &CorruptError{Reason: fmt.Sprintf("%s: meta last_seq has %d bytes", l.path, len(v))}
			}
			last = binary.BigEndian.Uint64(v)
		}
		blocks := tx.Bucket(bucketBlocks)
		k, _ := blocks.Cursor().Last()
		if k == nil {
			return nil
		}
		first, v, err := blockAt(blocks, k)
		if err != nil {
			return err
		}
		blockLast, err := lastSeqOfBlock(first, v)
		if err != nil {
			return err
		}
		last = max(last, blockLast)
		return nil
	})
	return last, err
}

// StalePID returns the pid found in a PID file left behind at Open by a
// process that no longer held the database (it crashed or was killed), or
// 0 if there was none. The caller may warn about the unclean shutdown.
func (l *Log) StalePID() int { return l.stalePID }

// Path returns the file the log was opened from.
func (l *Log) Path() string { return l.path }

// LastSeq returns the last seq assigned and made durable; it survives
// reopen and compaction. 0 for an empty log.
func (l *Log) LastSeq() uint64 { return l.lastSeq.Load() }

// Close waits for the writes already queued to finish, then closes the
// file and removes the PID file. Appends that arrive after Close began
// get ErrClosed. Calling Close again returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	l.closingOnce.Do(func() { close(l.closing) })
	l.cond.Broadcast()
	l.mu.Unlock()
	<-l.done // the writer drained the queue and exited

	var errs []error
	if err := l.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("wal: close %s: %w", l.path, err))
	}
	if l.ownPID {
		if err := removePIDFile(l.opts.PIDFile); err != nil {
			errs = append(errs, fmt.Errorf("wal: close %s: %w", l.path, err))
		}
	}
	return errors.Join(errs...)
}

func (l *Log) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// view runs fn in a read transaction, turning a bbolt panic on a damaged
// page into a *CorruptError and a closed database into ErrClosed.
func (l *Log) view(fn func(tx *bolt.Tx) error) (err error) {
	if l.isClosed() {
		return ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Reason: fmt.Sprintf("%s: bbolt panicked reading: %v", l.path, r)}
		}
	}()
	err = l.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Append writes entries to the log and returns their seqs (contiguous, in
// order) once they are durable. Entries with a zero Time get Options.Now().
// Seq on input is ignored. Append neither modifies nor retains entries,
// but they must not change until it returns. An Append whose ctx ends before its entries are
// written returns ctx.Err() and writes nothing; once the write has
// started it completes and Append returns success.
func (l *Log) Append(ctx context.Context, entries ...Entry) ([]uint64, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	r, err := l.newAppend(ctx, entries)
	if err != nil {
		return nil, err
	}
	err = l.submit(r)
	return r.result(err)
}

// AppendAsync queues entries like Append but returns at once; wait blocks
// until they are durable and returns their sequence numbers. Appends are
// written in the order AppendAsync was called, so one goroutine can keep
// several in flight and still have its entries in sequence order (actors
// persist their events this way without waiting for each fsync). wait
// must be called exactly once.
func (l *Log) AppendAsync(entries ...Entry) (wait func() ([]uint64, error)) {
	if len(entries) == 0 {
		return func() ([]uint64, error) { return nil, nil }
	}
	r, err := l.newAppend(context.Background(), entries)
	if err == nil {
		err = l.enqueue(r)
	}
	if err != nil {
		if r != nil {
			r.release()
		}
		return func() ([]uint64, error) { return nil, err }
	}
	return func() ([]uint64, error) { return r.result(l.await(r)) }
}

// newAppend checks entries and builds their request.
func (l *Log) newAppend(ctx context.Context, entries []Entry) (*request, error) {
	r := newRequest(ctx)
	size := 0
	for i := range entries {
		e := &entries[i]
		if e.Time.IsZero() {
			if r.now.IsZero() {
				r.now = l.opts.Now()
			}
		} else if !validTime(e.Time) {
			r.release()
			return nil, fmt.Errorf("wal: append: entry %d (%s): time %v outside years 1-9999", i, e.Type, e.Time)
		}
		n := encodedSize(e)
		if n > maxEntryBytes {
			r.release()
			return nil, fmt.Errorf("wal: append: entry %d (%s) is %d bytes, limit %d", i, e.Type, n, maxEntryBytes)
		}
		size += n
	}
	r.entries, r.size = entries, size
	return r, nil
}

// result turns a finished append into its sequence numbers and releases
// r.
func (r *request) result(err error) ([]uint64, error) {
	seqs := r.seqs
	r.release()
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// Commit marks intents as done: Uncommitted no longer lists them and
// Compact may drop them. Durable on return. Committing a seq that is not
// an uncommitted intent is a no-op; a seq never assigned (0 or above
// LastSeq) gives an error wrapping ErrUnknownSeq and commits nothing.
func (l *Log) Commit(ctx context.Context, seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	r := newRequest(ctx)
	r.commits = seqs
	err := l.submit(r)
	r.release()
	return err
}

// Uncommitted returns the intents that have no commit, in seq order.
func (l *Log) Uncommitted() ([]Entry, error) {
	var out []Entry
	err := l.view(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		bc := blocks.Cursor()
		var (
			cached    []Entry
			cachedKey []byte
		)
		ic := tx.Bucket(bucketIntents).Cursor()
		for k, _ := ic.First(); k != nil; k, _ = ic.Next() {
			if len(k) != 8 {
				return &CorruptError{Reason: fmt.Sprintf("intent key of %d bytes", len(k))}
			}
			seq := binary.BigEndian.Uint64(k)
			bk := seekBlock(bc, seq)
			if bk == nil || binary.BigEndian.Uint64(bk) > seq {
				return &CorruptError{Seq: seq, Reason: "intent has no entry"}
			}
			if string(bk) != string(cachedKey) {
				first, bv, err := blockAt(blocks, bk)
				if err != nil {
					return err
				}
				cached = cached[:0]
				cachedKey = append(cachedKey[:0], bk...)
				if err := decodeBlock(first, bv, func(e Entry, _ []byte) error {
					cached = append(cached, e)
					return nil
				}); err != nil {
					return err
				}
			}
			e, ok := findSeq(cached, seq)
			if !ok {
				return &CorruptError{Seq: seq, Reason: "intent has no entry"}
			}
			if !e.Intent {
				return &CorruptError{Seq: seq, Reason: "intent key for an entry that is not an intent"}
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func findSeq(es []Entry, seq uint64) (Entry, bool) {
	lo, hi := 0, len(es)
	for lo < hi {
		m := (lo + hi) / 2
		if es[m].Seq < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(es) && es[lo].Seq == seq {
		return es[lo], true
	}
	return Entry{}, false
}

const (
	replayChunkEntries = 1024
	replayChunkBytes   = 4 << 20
)

// Replay calls fn for every entry with Seq >= from, in seq order, up to
// the LastSeq at the time of the call. It reads in chunks and calls fn
// outside any transaction. An error from fn stops the replay and is
// returned wrapped; damaged data is returned as *CorruptError.
func (l *Log) Replay(from uint64, fn func(Entry) error) error {
	upto := l.LastSeq()
	next := max(from, 1)
	read := 0
	defer func() { l.noteTouched(read) }()
	for next <= upto {
		var chunk []Entry
		more := false
		err := l.view(func(tx *bolt.Tx) error {
			blocks := tx.Bucket(bucketBlocks)
			c := blocks.Cursor()
			bytes := 0
			for k := seekBlock(c, next); k != nil; k, _ = c.Next() {
				first, v, err := blockAt(blocks, k)
				if err != nil {
					return err
				}
				if first > upto {
					return nil
				}
				if len(chunk) > 0 && (len(chunk) >= replayChunkEntries || bytes >= replayChunkBytes) {
					more = true
					return nil
				}
				bytes += len(v)
				read += len(v)
				if err := parseBlock(first, v, func(p *parsedEntry, _ []byte) error {
					if p.seq >= next && p.seq <= upto {
						chunk = append(chunk, p.entry())
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range chunk {
			if err := fn(e); err != nil {
				return fmt.Errorf("wal: replay stopped at seq %d: %w", e.Seq, err)
			}
		}
		if !more {
			return nil
		}
		next = chunk[len(chunk)-1].Seq + 1
	}
	return nil
}

// Stats describe the log.
type Stats struct {
	Entries     int    // entries stored
	Blocks      int    // group-commit blocks stored
	Bytes       int64  // size of the file
	LastSeq     uint64 // last seq assigned
	Uncommitted int    // intents without a commit
	Checkpoints int    // owners with a checkpoint
	// OldestCheckpoint is the checkpoint with the lowest Seq (the one that
	// holds back compaction), without its Snapshot; zero when there is none.
	OldestCheckpoint Checkpoint
}

// Size is the log file's size in bytes (Stats().Bytes), without walking
// the log.
func (l *Log) Size() (int64, error) {
	fi, err := os.Stat(l.path)
	if err != nil {
		return 0, fmt.Errorf("wal: size of %s: %w", l.path, err)
	}
	return fi.Size(), nil
}

// Stats counts entries, blocks, intents and checkpoints. It walks every
// block (lengths only, no CRC checks).
func (l *Log) Stats() (Stats, error) {
	s := Stats{LastSeq: l.LastSeq()}
	counts, gen := l.blockCounts.snapshot()
	fresh := map[uint64]int{}
	read := 0 // bytes of blocks read back through the mapping
	defer func() { l.noteTouched(read) }()
	err := l.view(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		c := blocks.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) == 8 {
				if n, ok := counts[binary.BigEndian.Uint64(k)]; ok {
					s.Entries += n
					s.Blocks++
					continue
				}
			}
			first, v, err := blockAt(blocks, k)
			if err != nil {
				return err
			}
			n, err := countEntries(first, v)
			if err != nil {
				return err
			}
			read += len(v)
			l.statsReadBack.Add(1)
			fresh[first] = n
			s.Entries += n
			s.Blocks++
		}
		s.Uncommitted = tx.Bucket(bucketIntents).Stats().KeyN
		cps := tx.Bucket(bucketCheckpoints).Cursor()
		for k, v := cps.First(); k != nil; k, v = cps.Next() {
			cp, err := checkpointHeader(string(k), v)
			if err != nil {
				return err
			}
			s.Checkpoints++
			if s.Checkpoints == 1 || cp.Seq < s.OldestCheckpoint.Seq {
				s.OldestCheckpoint = cp
			}
		}
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	l.blockCounts.add(fresh, gen)
	fi, err := os.Stat(l.path)
	if err != nil {
		return Stats{}, fmt.Errorf("wal: stats %s: %w", l.path, err)
	}
	s.Bytes = fi.Size()
	return s, nil
}

// blockCountCache remembers how many entries each block holds, so that
// Stats (at every heartbeat) opens only the blocks written since its last
// walk: a block is written once, and only compaction rewrites or deletes
// blocks, so Compact empties the cache, before and after. A walk that
// overlapped a compaction (gen moved on) keeps nothing it counted.
type blockCountCache struct {
	mu     sync.Mutex
	gen    uint64
	counts map[uint64]int // by the block's first seq
}

// snapshot returns a copy of the cached counts and the generation they
// belong to.
func (c *blockCountCache) snapshot() (map[uint64]int, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts), c.gen
}

// wrote records the entries of a block just committed (the writer knows
// them: Stats need not read the block back through the mapping).
func (c *blockCountCache) wrote(first uint64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[uint64]int{}
	}
	c.counts[first] = n
}

// add records counts made by a walk that began at generation gen.
func (c *blockCountCache) add(counts map[uint64]int, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || len(counts) == 0 {
		return
	}
	if c.counts == nil {
		c.counts = map[uint64]int{}
	}
	maps.Copy(c.counts, counts)
}

// reset replaces the counts with those a compaction read, in a new
// generation, keeping those of blocks written meanwhile.
func (c *blockCountCache) reset(counts map[uint64]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for first, n := range c.counts {
		if _, ok := counts[first]; !ok {
			counts[first] = n
		}
	}
	c.counts = counts
}

// compacting begins a compaction: a Stats walk in flight is not kept (the
// blocks change under it). The counts stay: Stats during the compaction
// still counts what it drops until reset. Forgotten, every Stats of a
// compaction's tens of seconds read the whole log back through the
// mapping.
func (c *blockCountCache) compacting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
}

// heldByAnother reports whether another open of path holds its lock now
// (flock is per open file, so this process's other opens count too). A
// missing or unreadable file is not held.
func heldByAnother(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close() // closing releases the lock if we took it
	return lockExclusive(f) != nil
}
