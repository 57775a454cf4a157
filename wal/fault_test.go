package wal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/internal/disktest"
)

// On a real full disk, appends wait while the writer retries; when space
// comes back they go through by themselves, in order, each once.
func TestFullDiskRetriesAndResumes(t *testing.T) {
	dir := disktest.Small(t, "4m")
	path := filepath.Join(dir, "fano.db")
	faults := make(chan error, 1000)
	recovered := make(chan int, 10)
	opts := Options{
		RetryWrites:      100 * time.Millisecond,
		OnWriteFault:     func(err error, _ int) { faults <- err },
		OnWriteRecovered: func(_ time.Duration, attempts int) { recovered <- attempts },
	}
	l, err := Open(path, opts)
	require.NoError(t, err)
	defer l.Close()
	appendT(t, l, ent("a", "t", "before"))
	filler := filepath.Join(dir, "filler")
	disktest.Fill(t, filler)

	const n = 200
	payload := strings.Repeat("x", 8<<10)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := l.Append(context.Background(), ent("a", "t", fmt.Sprintf("%04d %s", i, payload))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-faults:
		require.ErrorIs(t, err, syscall.ENOSPC)
	case err := <-done:
		t.Fatalf("all appends went through on a full disk: %v", err)
	}
	require.ErrorIs(t, l.Fault(), syscall.ENOSPC)

	require.NoError(t, os.Remove(filler))
	require.NoError(t, <-done)
	require.Positive(t, <-recovered)
	require.NoError(t, l.Fault())
	require.NoError(t, l.Close())

	l = openTest(t, path, Options{ReadOnly: true})
	got := replayAll(t, l, 1)
	require.Len(t, got, n+1)
	for i, e := range got {
		require.Equal(t, uint64(i+1), e.Seq)
		if i > 0 {
			require.True(t, strings.HasPrefix(string(e.Payload), fmt.Sprintf("%04d ", i-1)), "seq %d", e.Seq)
		}
	}
}

// Close during a retry ends it: the waiting appends fail (ErrFailed),
// nothing half-written stays.
func TestCloseEndsRetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fano.db")
	faults := make(chan struct{}, 100)
	l, err := Open(path, Options{NoSync: true, RetryWrites: time.Hour, OnWriteFault: func(error, int) { faults <- struct{}{} }})
	require.NoError(t, err)
	appendT(t, l, ent("a", "t", "ok"))
	l.hookBeforeCommit = func(int) { panic("disk on fire") }
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), ent("a", "t", "never"))
		done <- err
	}()
	<-faults
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-done, ErrFailed)
	l = openTest(t, path, testOptions())
	require.Len(t, replayAll(t, l, 1), 1)
}
