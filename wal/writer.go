package wal

import "time"

// defaultWriterSlice is Options.WriterSlice's default: the shortest slice
// Linux takes.
const defaultWriterSlice = 100 * time.Microsecond

// writerThread is what the writer goroutine's thread was given at its
// start (startWriterThread).
type writerThread struct {
	tid   int           // its thread id; 0 where threads are not pinned
	slice time.Duration // the slice asked for and taken; 0: the kernel's own
	err   error         // why the slice was not taken
}

// WriterSlice is the CPU slice the writer's thread runs with (0: the
// kernel's own), or why the one asked for (Options.WriterSlice) was not
// taken: the log works the same, its commits only wait longer for a CPU
// once the disk answers while every core is busy.
func (l *Log) WriterSlice() (time.Duration, error) { return l.writer.slice, l.writer.err }
