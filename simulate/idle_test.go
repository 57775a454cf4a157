package simulate

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The scheduler's count: goroutines blocked on a channel do not keep an
// instant open; one that runs (or waits for a processor) does.
func TestGoroutineStatesTellBlockedFromRunning(t *testing.T) {
	g := newGoroutineStates()
	floor := g.syscallFloor()
	block := make(chan struct{})
	defer close(block)
	for range 4 {
		go func() { <-block }()
	}
	// A collection under way runs its workers on idle processors: let it
	// end first.
	runtime.GC()
	blocked := false
	for deadline := time.Now().Add(10 * time.Second); !blocked && time.Now().Before(deadline); {
		runtime.Gosched()
		blocked = g.read().othersBlocked(floor)
	}
	require.True(t, blocked, "goroutines blocked on a channel are not work: %+v", g.read())

	var stop atomic.Bool
	started := make(chan struct{})
	go func() {
		close(started)
		for !stop.Load() {
		}
	}()
	<-started
	c := g.read()
	stop.Store(true)
	require.False(t, c.othersBlocked(floor), "a goroutine spinning is work: %+v", c)
}

// A goroutine in a system call (a file write, an fsync) is at work: the
// instant is not over until it is back.
func TestGoroutineStatesCountSystemCallsAboveTheFloor(t *testing.T) {
	g := newGoroutineStates()
	floor := g.syscallFloor()
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:])) // blocking: a read waits in the kernel
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	read := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := syscall.Read(fds[0], b[:])
		read <- err
	}()
	seen, blocked := 0, 0
	for deadline := time.Now().Add(10 * time.Second); seen < 100 && time.Now().Before(deadline); runtime.Gosched() {
		if c := g.read(); c.notInGo > floor {
			seen++
			if c.othersBlocked(floor) {
				blocked++
			}
		}
	}
	require.Equal(t, 100, seen, "the read never showed in a system call: %+v, floor %d", g.read(), floor)
	require.Zero(t, blocked, "a read waiting in the kernel is work")
	_, err := syscall.Write(fds[1], []byte{1})
	require.NoError(t, err)
	require.NoError(t, <-read)
}
