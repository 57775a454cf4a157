package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/modules/probe"
	"fano/pb"
)

// A fault retried every few milliseconds for minutes logs a line when it
// begins and then at most one a minute; recovery is reported once.
func TestStorageWatchLogsAtMostOncePerMinute(t *testing.T) {
	w := NewStorageWatch()
	var changes []StorageChange
	w.Subscribe(func(c StorageChange) { changes = append(changes, c) })
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	full := errors.New("no space left on device")
	logged := 0
	for i := 0; i < 3000; i++ { // every 50 ms for 150 s
		w.Failed(full, i+1, t0.Add(time.Duration(i)*50*time.Millisecond))
	}
	for _, c := range changes {
		if c.Log {
			logged++
		}
	}
	require.True(t, changes[0].Began)
	require.Equal(t, 3, logged, "at 0 s, 60 s and 120 s")
	since, attempts, err := w.Fault()
	require.Equal(t, t0, since)
	require.Equal(t, 3000, attempts)
	require.ErrorIs(t, err, full)

	w.Recovered(150*time.Second, 3001)
	last := changes[len(changes)-1]
	require.True(t, last.Ended)
	_, _, err = w.Fault()
	require.NoError(t, err)
	w.Recovered(time.Second, 1) // no fault: nothing to report
	require.Equal(t, last, changes[len(changes)-1])
}

// While the WAL cannot be written no task starts; when writes succeed
// again the system resumes by itself and finishes the work.
func TestStorageFaultHoldsNewWorkThenResumes(t *testing.T) {
	watch := NewStorageWatch()
	watch.Failed(errors.New("no space left on device"), 1, time.Now())
	b := setup(t, setupOpts{probe: probe.Config{Questions: questions(4), Turns: 1}, mutate: func(o *Options) { o.Storage = watch }})
	sys := b.start()
	require.False(t, sys.Accepting())
	// Held work: the module proposes nothing and no task starts (break
	// the hold and tasks run at once: latency is zero).
	for i := 0; i < 5; i++ {
		sys.Tick()
	}
	// Tasks answers after the ticks above in the scheduler's mailbox.
	for _, tk := range sys.Tasks(nil, 0) {
		require.Equal(t, pb.TaskState_TASK_STATE_PENDING, tk.State, tk.Id)
	}
	_, err := sys.StorageFault()
	require.Error(t, err)

	watch.Recovered(time.Second, 2)
	require.True(t, sys.Accepting())
	b.waitCompleted(4)
}
