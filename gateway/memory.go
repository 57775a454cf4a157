package gateway

// MemoryReporter is implemented by backends that run a local process
// whose memory is worth watching over weeks (a browser backend's
// Chromium); status and /metrics report it.
type MemoryReporter interface {
	// MemoryBytes is the memory in use now; 0 when nothing runs.
	MemoryBytes() int64
}

// Wrapper is implemented by backends that guard another one (the circuit
// breaker); As looks through them.
type Wrapper interface {
	Unwrap() Backend
}

// As returns the first backend in b's chain of wrappers (b itself first)
// that is a T, like a Conditioner or a MemoryReporter.
func As[T any](b Backend) (T, bool) {
	for b != nil {
		if t, ok := b.(T); ok {
			return t, true
		}
		w, ok := b.(Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	var zero T
	return zero, false
}
