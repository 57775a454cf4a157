package wal

import (
	"sync/atomic"
	"time"
)

// Duty is what the writer goroutine has done since Open: how many group
// commits it wrote, for how many requests (appends, commits and
// checkpoints), how long it spent writing them, and how long it waited
// with nothing queued. Between the two lies the time it yields for
// callers to join the next commit. A writer that often waits for work
// is held back by its callers, not by the disk.
type Duty struct {
	Commits  int64         // group commits written (failed ones too)
	Requests int64         // requests they carried
	Bytes    int64         // entry blocks, archive records and checkpoints they wrote
	Writing  time.Duration // in write transactions, fsync included
	Idle     time.Duration // waiting with an empty queue
}

// writerDuty counts Duty: written only by the writer goroutine, read by
// anyone.
type writerDuty struct {
	commits, requests, bytes, writing, idle atomic.Int64
}

func (d *writerDuty) wrote(requests, bytes int, took time.Duration) {
	d.commits.Add(1)
	d.requests.Add(int64(requests))
	d.bytes.Add(int64(bytes))
	d.writing.Add(int64(took))
}

// Duty returns the writer's counts so far. Safe from any goroutine; the
// counts are read one by one, so a commit ending meanwhile may show in
// some and not in others. A commit is counted before its requests are
// answered: once an Append has returned, its commit shows here.
func (l *Log) Duty() Duty {
	return Duty{
		Commits:  l.duty.commits.Load(),
		Requests: l.duty.requests.Load(),
		Bytes:    l.duty.bytes.Load(),
		Writing:  time.Duration(l.duty.writing.Load()),
		Idle:     time.Duration(l.duty.idle.Load()),
	}
}
