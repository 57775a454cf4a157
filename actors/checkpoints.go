package actors

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"fano/metrics"
	"fano/pb"
)

// checkpoints writes an owner's snapshot to the WAL at the sequence number
// it covers and tells subscribers (the metrics count them). Each owner's
// actor calls it from its own goroutine on pb.Checkpoint; it holds no
// state of its own, and the Store is safe for concurrent use.
type checkpoints struct {
	log     Store
	publish func(*pb.StateUpdate)
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
	c.publish(&pb.StateUpdate{Component: metrics.UpdateWAL, UpdateType: metrics.UpdateCheckpoint, Data: map[string]string{"owner": owner}})
	return nil
}
