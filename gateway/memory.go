package gateway

// MemoryReporter is implemented by backends that run a local process
// whose memory is worth watching over weeks (a browser backend's
// Chromium); status and /metrics report it.
type MemoryReporter interface {
	// MemoryBytes is the memory in use now; 0 when nothing runs.
	MemoryBytes() int64
}
