package remote

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A batch's calls are handed on one by one, but each runs on its own
// goroutine: a call that blocks (a browser waiting for its answer) does
// not hold back the ones after it, nor what runs once all have started.
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
	then := make(chan struct{})
	w.GoEach(fns, func() { close(then) })
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
	select {
	case <-then:
	case <-deadline.C:
		t.Fatal("what follows the batch did not run while its calls blocked")
	}
	close(release)
	assert.Len(t, seen, n)
	empty := false
	w.GoEach(nil, func() { empty = true })
	assert.True(t, empty, "an empty batch has started at once")
}
