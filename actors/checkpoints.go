package actors

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"fano/metrics"
	"fano/pb"
)

// checkpoints writes an owner's snapshot to the WAL at the sequence number
// it covers and tells subscribers (the metrics count them). Each owner's
// actor calls it from its own goroutine on pb.Checkpoint; the marks are
// guarded by mu, and the Store is safe for concurrent use.
//
// It remembers the seq of each owner's last checkpoint, so that an owner
// with nothing applied since is not written again: a periodic checkpoint
// then costs only the owners that changed (a quiet explorer's snapshot is
// the largest, and would be encoded and rewritten every interval for
// nothing).
type checkpoints struct {
	log     Store
	publish func(*pb.StateUpdate)

	mu    sync.Mutex
	marks map[string]uint64 // owner -> seq of its last checkpoint
}

// due reports whether owner has applied anything (seq) past its last
// checkpoint.
func (c *checkpoints) due(owner string, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	saved, ok := c.marks[owner]
	return !ok || seq != saved
}

// save encodes snap and saves it as owner's checkpoint at seq.
func (c *checkpoints) save(owner string, seq uint64, snap proto.Message) error {
	data, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("checkpoint %s: encode: %w", owner, err)
	}
	return c.saveBytes(owner, seq, data)
}

// saveBytes is save for a snapshot already encoded (a module's).
func (c *checkpoints) saveBytes(owner string, seq uint64, data []byte) error {
	if seq == 0 {
		return nil // nothing applied yet
	}
	if err := c.log.SaveCheckpoint(owner, seq, data); err != nil {
		return fmt.Errorf("checkpoint %s at seq %d: %w", owner, seq, err)
	}
	c.mu.Lock()
	if c.marks == nil {
		c.marks = map[string]uint64{}
	}
	c.marks[owner] = seq
	c.mu.Unlock()
	c.publish(&pb.StateUpdate{Component: metrics.UpdateWAL, UpdateType: metrics.UpdateCheckpoint, Data: map[string]string{"owner": owner}})
	return nil
}
