package simulate

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The scheduler's count: goroutines blocked on a channel do not keep an
// instant open; one that runs (or waits for a processor) does.
func TestGoroutineStatesTellBlockedFromRunning(t *testing.T) {
	g := newGoroutineStates()
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
		blocked = g.read().othersBlocked()
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
	require.False(t, c.othersBlocked(), "a goroutine spinning is work: %+v", c)
}
