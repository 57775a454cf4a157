package wal

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// startWriterThread pins the writer goroutine to its thread and asks the
// kernel for a short slice on it (slice > 0).
//
// The writer spends most of a commit blocked in fdatasync. When the disk
// answers, the kernel wakes its thread; under EEVDF, Linux's scheduler
// since 6.6, a woken thread with the default slice (1.4 ms on two cores)
// may wait behind the threads already running until their slices end.
// In fano's end-to-end benchmark, every core busy with the executors and
// actors that run between two commits, a commit took 645-777 µs on the
// kernel's slice and 569-597 µs on the short one, and fano made 11-15 %
// more tasks a second. A thread that asked for a short slice
// (sched_attr.sched_runtime, honoured since Linux 6.12; older kernels
// ignore it; no privilege needed) gets an earlier deadline and runs on
// waking. It costs nothing while the writer sleeps, and the slice bounds
// how long it runs before others may.
//
// The goroutine never unlocks the thread: when the writer ends, the
// thread ends with it, and the slice never passes to another goroutine.
// A realtime policy someone gave the process is left alone.
func startWriterThread(slice time.Duration) writerThread {
	if slice <= 0 {
		return writerThread{}
	}
	runtime.LockOSThread()
	w := writerThread{tid: unix.Gettid()}
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		w.err = fmt.Errorf("wal: writer thread: sched_getattr: %w", err)
		return w
	}
	if attr.Policy != unix.SCHED_NORMAL && attr.Policy != unix.SCHED_BATCH {
		return w
	}
	attr.Runtime = uint64(slice)
	if err := unix.SchedSetAttr(0, attr, 0); err != nil {
		w.err = fmt.Errorf("wal: writer thread: slice of %v: %w", slice, err)
		return w
	}
	w.slice = slice
	return w
}
