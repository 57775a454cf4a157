package allocator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

// With one request left in the hour, a slot granted at an instant keeps
// it for its task: a second task is not given the backend at that
// instant, and another task's charge is refused while the granted one's
// goes through, whatever order the charges come in. At a later instant
// the grant is gone.
func TestGrantReservesTheRequestForItsTask(t *testing.T) {
	r := newRig(t, three(), at(10, 0))
	now := r.now()
	r.useN("openrouter", false, 44) // usable 45 (50 less 10 %): one left
	only := []string{"openrouter"}

	got, ok := r.book.Choose(&pb.Task{Id: "a"}, only, now)
	require.True(t, ok)
	require.Equal(t, "openrouter", got)
	require.True(t, r.book.Acquire(got))
	r.book.Grant("a", got, false, now)

	_, ok = r.book.Choose(&pb.Task{Id: "b"}, only, now)
	assert.False(t, ok, "the last request is granted to a")
	_, err := r.book.DecideUse("openrouter", false, "b", now)
	require.Error(t, err, "b may not take a's request")
	ev, err := r.book.DecideUse("openrouter", false, "a", now)
	require.NoError(t, err, "a charges the request it was granted")
	r.persist(ev)

	// A grant lasts the instant it was made in.
	r2 := newRig(t, three(), at(10, 0))
	r2.useN("openrouter", false, 44)
	r2.book.Grant("a", "openrouter", false, r2.now())
	later := r2.now().Add(time.Millisecond)
	_, ok = r2.book.Choose(&pb.Task{Id: "b"}, only, later)
	assert.True(t, ok, "a grant of an earlier instant reserves nothing")
}
