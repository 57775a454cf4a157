package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"fano/actors/allocator"
	"fano/modules/probe"
	"fano/pb"
	"fano/wal"
)

// failingStore fails the appends of one owner while failing is set, as a
// log that stopped taking writes does.
type failingStore struct {
	Store
	owner   string
	failing atomic.Bool
}

var errWriteRefused = errors.New("write refused by the test")

func (s *failingStore) AppendAsync(entries ...wal.Entry) func() ([]uint64, error) {
	if s.failing.Load() && entries[0].Owner == s.owner {
		return func() ([]uint64, error) { return nil, errWriteRefused }
	}
	return s.Store.AppendAsync(entries...)
}

// A quota charge whose write fails is refused to its asker and leaves
// nothing in flight: the backend's hourly budget is whole again, not one
// request short until the next start (Book.Abandon).
func TestFailedQuotaWriteLeavesNoChargeInFlight(t *testing.T) {
	b := setup(t, setupOpts{memory: true, backends: []string{"api"}, hourly: 10, probe: probe.Config{NoPropose: true}})
	store := &failingStore{Store: b.log, owner: ownerAllocator}
	b.log, b.opts.Log = store, store
	sys := b.start()
	use := func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := request[*pb.Done](sys.asks, ctx, sys.allocatorPID, &pb.UseQuota{Backend: "api", TaskId: id})
		require.NoError(t, err)
		return errorFromWire(r.GetError())
	}
	store.failing.Store(true)
	for i := range 3 {
		require.ErrorContains(t, use(fmt.Sprintf("failed%d", i)), errWriteRefused.Error())
	}
	store.failing.Store(false)
	usable := 9 // 10 an hour less the 10 % buffer
	for i := range usable {
		require.NoError(t, use(fmt.Sprintf("t%d", i)), "request %d of %d", i+1, usable)
	}
	var nq *allocator.NoQuotaError
	require.ErrorAs(t, use("one-too-many"), &nq)
}
