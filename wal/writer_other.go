//go:build !linux

package wal

import "time"

// startWriterThread: only Linux's scheduler takes a slice per thread.
func startWriterThread(time.Duration) writerThread { return writerThread{} }
