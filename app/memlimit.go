package app

import (
	"os"
	"runtime/debug"
)

// memoryLimit is the soft memory limit `fano run` sets for the Go runtime
// from orchestrator.state.memory_limit_mb: past it the collector runs more
// often rather than letting the heap double (GOGC). A GOMEMLIMIT in the
// environment was already applied by the runtime and wins, as does 0 (no
// limit). It returns the limit in bytes and who set it.
func memoryLimit(limitMB int) (bytes int64, source string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	}
	if limitMB <= 0 {
		return 0, "none"
	}
	b := int64(limitMB) << 20
	debug.SetMemoryLimit(b)
	return b, "orchestrator.state.memory_limit_mb"
}

// SetMemoryLimit sets the config's soft memory limit for this process,
// as `fano run` does; `fano pipeline run` calls it. It returns the limit
// in bytes (0: none) and who set it.
func SetMemoryLimit(limitMB int) (bytes int64, source string) { return memoryLimit(limitMB) }
