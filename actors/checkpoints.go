package actors

import "sync"

// checkpointMarks remember the seq each owner's last checkpoint was
// written at, so that a checkpoint with nothing applied since is not
// written again: a periodic checkpoint then costs only the owners that
// changed (a quiet explorer's snapshot is the largest, and would be
// encoded and rewritten every interval for nothing).
type checkpointMarks struct {
	mu  sync.Mutex
	seq map[string]uint64
}

// due reports whether owner has applied anything (seq) past its last
// checkpoint.
func (m *checkpointMarks) due(owner string, seq uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	saved, ok := m.seq[owner]
	return !ok || seq != saved
}

// saved records owner's checkpoint at seq.
func (m *checkpointMarks) saved(owner string, seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seq == nil {
		m.seq = map[string]uint64{}
	}
	m.seq[owner] = seq
}
