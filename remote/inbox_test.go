package remote

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A batch's calls are handed on one by one, but each runs on its own
// goroutine: a call that blocks (a browser waiting for its answer) does
// not hold back the ones after it.
func TestGoEachRunsEveryCallOnItsOwnGoroutine(t *testing.T) {
	w := newWarmPool(4)
	const n = 6
	started := make(chan int, n)
	release := make(chan struct{})
	fns := make([]func(), n)
	for i := range fns {
		fns[i] = func() {
			started <- i
			<-release
		}
	}
	w.GoEach(fns)
	seen := map[int]bool{}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for len(seen) < n {
		select {
		case i := <-started:
			seen[i] = true
		case <-deadline.C:
			t.Fatalf("only calls %v started while they blocked", seen)
		}
	}
	close(release)
	assert.Len(t, seen, n)
	w.GoEach(nil) // nothing to run: nothing starts
}
