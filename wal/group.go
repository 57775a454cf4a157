package wal

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Request states: the writer takes a pending request (pendingState ->
// takenState) before writing it; a waiter whose ctx ends cancels it
// (pendingState -> cancelledState) only if the writer has not taken it.
const (
	pendingState int32 = iota
	takenState
	cancelledState
)

// gatherMaxYields bounds the yields of gather.
const gatherMaxYields = 16

// request is one call of Append, Commit or SaveCheckpoint waiting for the
// writer. Requests are pooled: a request goes back to the pool once its
// waiter has its outcome, unless the waiter cancelled it (then the writer
// may still look at it).
type request struct {
	ctx   context.Context
	state atomic.Int32

	entries []Entry   // Append: the caller's entries, read only
	now     time.Time // Append: time for entries with a zero Time
	size    int       // Append: encoded size of entries
	commits []uint64  // Commit
	cpOwner string    // SaveCheckpoint
	cpSeq   uint64
	cpValue []byte // encoded checkpoint

	first uint64        // result: seq of entries[0]
	seqs  []uint64      // result: the seqs of entries, in a slice shared by the batch
	err   error         // result
	done  chan struct{} // capacity 1: the writer sends once
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newRequest(ctx context.Context) *request {
	r := requestPool.Get().(*request)
	r.ctx = ctx
	return r
}

// release returns r to the pool when nobody can look at it any more.
func (r *request) release() {
	if r.state.Load() == cancelledState {
		return
	}
	done := r.done
	*r = request{done: done}
	requestPool.Put(r)
}

// finish hands the outcome to the waiter. The writer does not touch r
// afterwards.
func (r *request) finish(err error) {
	r.err = err
	r.done <- struct{}{}
}

// submit queues r for the writer and waits for its outcome.
func (l *Log) submit(r *request) error {
	if err := l.enqueue(r); err != nil {
		return err
	}
	return l.await(r)
}

// enqueue puts r at the end of the writer's queue: requests are written in
// the order they were enqueued.
func (l *Log) enqueue(r *request) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	l.queue = append(l.queue, r)
	l.cond.Signal()
	l.mu.Unlock()
	if l.hookEnqueued != nil {
		l.hookEnqueued()
	}
	return nil
}

// await waits for the outcome of an enqueued request.
func (l *Log) await(r *request) error {
	select {
	case <-r.done:
		return r.err
	case <-r.ctx.Done():
		if r.state.CompareAndSwap(pendingState, cancelledState) {
			return r.ctx.Err()
		}
		<-r.done // the writer has it: the outcome is the write's
		return r.err
	}
}

// run is the writer goroutine: it takes every request waiting, writes them
// in one transaction, and answers them, until Close with an empty queue.
func (l *Log) run(started chan<- struct{}) {
	defer close(l.done)
	l.writer = startWriterThread(l.opts.WriterSlice)
	close(started)
	var (
		batch []*request
		buf   []byte
		// The requests answered by the last batch, and those that queued
		// while it was written.
		answered, waiting int
	)
	for {
		if answered > 0 {
			l.gather(waiting + answered)
		}
		l.mu.Lock()
		if len(l.queue) == 0 && !l.closed {
			idle := time.Now()
			for len(l.queue) == 0 && !l.closed {
				if l.hookIdle != nil {
					l.hookIdle()
				}
				l.cond.Wait()
			}
			l.duty.idle.Add(int64(time.Since(idle)))
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return
		}
		batch = l.takeBatch(batch[:0])
		failed := l.failed
		l.mu.Unlock()

		answered = len(batch)
		buf, waiting = l.writeBatch(batch, buf, failed, time.Now())
		clear(batch)
		if cap(buf) > maxBatchBytes {
			buf = nil
		}
	}
}

// gather runs right after a group commit has answered its callers. Those
// callers usually append again at once; yielding the processor while the
// queue keeps growing lets them join the next group commit instead of
// waiting a whole commit for the one after. It waits for as many requests
// as were queued while the commit was written plus those it answered:
// waiting only for as many as it answered, concurrent writers settle
// into two halves that alternate (the half queued during a commit is
// enough to start the next one), each commit carrying half of them, and
// every commit costs two fsyncs whatever it carries. It never waits for
// time to pass: it stops once that many are queued, or at the first
// yield that brings no new request.
func (l *Log) gather(want int) {
	n := l.queued()
	for i := 0; i < gatherMaxYields && n < want; i++ {
		runtime.Gosched()
		m := l.queued()
		if m == n {
			return
		}
		n = m
	}
}

func (l *Log) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// takeBatch moves requests from the head of the queue to batch while they
// fit in MaxBatch entries and maxBatchBytes (always at least one).
// l.mu is held.
func (l *Log) takeBatch(batch []*request) []*request {
	entries, bytes := 0, 0
	n := 0
	for _, r := range l.queue {
		size := r.size + len(r.cpValue)
		if n > 0 && (entries+len(r.entries) > l.opts.MaxBatch || bytes+size > maxBatchBytes) {
			break
		}
		entries += len(r.entries)
		bytes += size
		n++
	}
	batch = append(batch, l.queue[:n]...)
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	return batch
}

// writeBatch writes the live requests of batch in one transaction and
// answers every request. It returns buf for reuse and how many requests
// were queued when it answered. It counts the batch in the writer's Duty
// (its time from start; the bytes it wrote: entries, archive records,
// checkpoints, 0 when the write failed) before it answers the requests
// it writes, so a caller that got its answer finds its commit counted.
func (l *Log) writeBatch(batch []*request, buf []byte, failed error, start time.Time) (_ []byte, waiting int) {
	live := batch[:0]
	for _, r := range batch {
		if !r.state.CompareAndSwap(pendingState, takenState) {
			continue // cancelled by its waiter, who has returned already
		}
		if err := r.ctx.Err(); err != nil {
			r.finish(err)
			continue
		}
		if failed != nil {
			r.finish(failed)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		l.duty.wrote(len(batch), 0, time.Since(start))
		return buf, l.queued()
	}

	// Validate each request against the seqs known once the requests
	// before it are written (a failed one takes none), then assign seqs
	// and encode its entries into the one block.
	buf = buf[:0]
	first := l.lastSeq.Load() + 1
	next := first
	nEntries, archived := 0, 0
	write := live[:0]
	for _, r := range live {
		if err := r.check(next); err != nil {
			r.finish(err)
			continue
		}
		if len(r.entries) > 0 {
			r.first = next
			for i := range r.entries {
				e := r.entries[i]
				e.Seq = next
				if e.Time.IsZero() {
					e.Time = r.now
				}
				next++
				buf = encodeEntry(buf, &e)
				if e.Archive != nil {
					archived += len(e.Archive.Value)
				}
			}
			nEntries += len(r.entries)
		}
		write = append(write, r)
	}
	if len(write) == 0 {
		l.duty.wrote(len(batch), 0, time.Since(start))
		return buf, l.queued()
	}

	err := l.writeTx(write, first, buf, nEntries)
	if err != nil && l.opts.RetryWrites > 0 && !l.retriesStopped() {
		err = l.retryTx(write, first, buf, nEntries, err)
	}
	if err != nil {
		err = fmt.Errorf("wal: write seqs %d-%d to %s: %w: %w", first, next-1, l.path, ErrFailed, err)
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
	} else {
		l.lastSeq.Store(next - 1)
		if len(buf) > 0 {
			l.blockCounts.wrote(first, nEntries) // Stats need not read it back
		}
	}
	waiting = l.queued()
	wrote, checkpointed := 0, false
	if err == nil {
		// Counted before the answers: a waiter answered may put its
		// request back in the pool at once (request.release), and finds
		// its commit in Duty.
		wrote = len(buf) + archived
		for _, r := range write {
			wrote += len(r.cpValue)
			checkpointed = checkpointed || r.cpValue != nil
		}
	}
	l.duty.wrote(len(batch), wrote, time.Since(start))
	// The seqs of all the batch's appends, in one allocation.
	var seqs []uint64
	if err == nil {
		seqs = make([]uint64, 0, nEntries)
	}
	for _, r := range write {
		if err == nil && len(r.entries) > 0 {
			k := len(seqs)
			for i := range r.entries {
				seqs = append(seqs, r.first+uint64(i))
			}
			r.seqs = seqs[k:len(seqs):len(seqs)]
		}
		r.finish(err)
	}
	if l.hookAnswered != nil {
		l.hookAnswered()
	}
	if err == nil {
		l.noteTouched(wrote) // after the answers: no writer waits on it
		if checkpointed && l.opts.ReleasePagesEvery > 0 {
			// bbolt rewrote the checkpoints beside it in their page and
			// read them through the mapping to do so: a small checkpoint
			// beside a large run's held tens of megabytes resident.
			l.ReleasePages()
		}
	}
	return buf, waiting
}

// check validates r's commits, checkpoint and closed intents when its
// first entry would take seq next.
func (r *request) check(next uint64) error {
	for i := range r.entries {
		if c := r.entries[i].Closes; c >= next+uint64(i) {
			return fmt.Errorf("wal: entry %d (%s) closes seq %d: %w (not below its own seq %d)", i, r.entries[i].Type, c, ErrUnknownSeq, next+uint64(i))
		}
	}
	for _, s := range r.commits {
		if s == 0 || s >= next {
			return fmt.Errorf("wal: commit seq %d: %w (last seq %d)", s, ErrUnknownSeq, next-1)
		}
	}
	if r.cpValue != nil && r.cpSeq >= next {
		return fmt.Errorf("wal: checkpoint %q at seq %d: %w (last seq %d)", r.cpOwner, r.cpSeq, ErrUnknownSeq, next-1)
	}
	return nil
}

// writeTx is the one bbolt transaction of a group commit.
func (l *Log) writeTx(reqs []*request, first uint64, block []byte, nEntries int) (err error) {
	tx, err := l.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt panicked: %v", r)
		}
		if err != nil {
			_ = tx.Rollback() // releases bbolt's writer lock; harmless after a failed Commit
		}
	}()
	if len(block) > 0 {
		blocks := tx.Bucket(bucketBlocks)
		blocks.FillPercent = blocksFill
		if err := putBlock(blocks, first, block); err != nil {
			return err
		}
	}
	// Buckets are opened when first needed: most commits write no
	// checkpoint, and opening one costs a search and a few allocations.
	var intents, cps, archive *bolt.Bucket
	var key [8]byte
	// intent opens (put) or closes (delete) the intent at seq.
	intent := func(seq uint64, open bool) error {
		binary.BigEndian.PutUint64(key[:], seq)
		if intents == nil {
			intents = tx.Bucket(bucketIntents)
		}
		if open {
			return intents.Put(key[:], []byte{})
		}
		return intents.Delete(key[:])
	}
	for _, r := range reqs {
		for i := range r.entries {
			if a := r.entries[i].Archive; a != nil {
				if archive == nil {
					if archive, err = tx.CreateBucketIfNotExists(bucketArchive); err != nil {
						return err
					}
					// Completion keys grow with time: appended too.
					archive.FillPercent = blocksFill
				}
				if err := archive.Put([]byte(a.Key), a.Value); err != nil {
					return fmt.Errorf("archive %q: %w", a.Key, err)
				}
			}
			if r.entries[i].Intent {
				if err := intent(r.first+uint64(i), true); err != nil {
					return err
				}
			}
			if c := r.entries[i].Closes; c > 0 {
				if err := intent(c, false); err != nil {
					return err
				}
			}
		}
		for _, s := range r.commits {
			if err := intent(s, false); err != nil {
				return err
			}
		}
		if r.cpValue != nil {
			if cps == nil {
				cps = tx.Bucket(bucketCheckpoints)
			}
			if err := cps.Put([]byte(r.cpOwner), r.cpValue); err != nil {
				return err
			}
		}
	}
	if l.hookBeforeCommit != nil {
		l.hookBeforeCommit(nEntries)
	}
	return tx.Commit()
}

// retryTx retries a failed write transaction (the same entries with the
// same seqs: a failed bbolt commit leaves the file as of the last good
// one) on a doubling backoff up to Options.RetryWrites, until it succeeds
// or Close begins. Callers of the batch, and everyone queued behind it,
// wait meanwhile; OnWriteFault and OnWriteRecovered report the episode.
func (l *Log) retryTx(reqs []*request, first uint64, block []byte, nEntries int, err error) error {
	start := l.opts.Now()
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		l.mu.Lock()
		l.fault = err
		l.mu.Unlock()
		if l.opts.OnWriteFault != nil {
			l.opts.OnWriteFault(err, attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.closing:
			t.Stop()
			return err
		}
		wait = min(2*wait, l.opts.RetryWrites)
		if err = l.writeTx(reqs, first, block, nEntries); err == nil {
			l.mu.Lock()
			l.fault = nil
			l.mu.Unlock()
			if l.opts.OnWriteRecovered != nil {
				l.opts.OnWriteRecovered(l.opts.Now().Sub(start), attempt)
			}
			return nil
		}
	}
}

// StopRetrying ends a retry going on and any later one: the failed write
// fails its callers, and every later write fails (ErrFailed), so a
// program can stop while its disk is full.
func (l *Log) StopRetrying() {
	l.closingOnce.Do(func() { close(l.closing) })
}

// Fault returns the error of the write transaction being retried, nil
// when writes go through.
func (l *Log) Fault() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fault
}

func (l *Log) retriesStopped() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}
