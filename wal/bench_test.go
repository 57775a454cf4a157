//go:build linux

package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// BenchmarkAppend measures durable appends (real fsync) of ~200-byte
// entries by 1 and 64 goroutines, each Append carrying one entry, beside
// the raw-file baseline measured in the same run: 200-byte records
// appended to a plain file with one fdatasync per record or per 64
// records. Each fano case runs right before its baseline so both see the
// same machine. Goal: fano/writers=64 >= 50% of raw/per-sync=64.
func BenchmarkAppend(b *testing.B) {
	payload := make([]byte, 200)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("fano/writers=%d", n), func(b *testing.B) { benchFano(b, n, payload) })
		b.Run(fmt.Sprintf("raw/per-sync=%d", n), func(b *testing.B) { benchRaw(b, n, payload) })
	}
}

func benchFano(b *testing.B, writers int, payload []byte) {
	l, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	var batches, entries atomic.Int64
	l.hookBeforeCommit = func(n int) {
		batches.Add(1)
		entries.Add(int64(n))
	}
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := Entry{Type: "bench", Owner: "bench", Payload: payload}
			for next.Add(1) <= int64(b.N) {
				if _, err := l.Append(context.Background(), e); err != nil {
					failed.Store(&err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(entries.Load())/float64(max(batches.Load(), 1)), "entries/commit")
}

func benchRaw(b *testing.B, perSync int, payload []byte) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.Write(payload); err != nil {
			b.Fatal(err)
		}
		if (i+1)%perSync == 0 || i == b.N-1 {
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
