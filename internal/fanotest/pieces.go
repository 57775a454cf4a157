package fanotest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/actors/allocator"
	"fano/gateway"
	"fano/gateway/sim"
	"fano/pb"
	"fano/wal"
)

// The pieces below are what every in-process test of fano builds: the
// WAL, sim backends with the allocator's view of them, and reading the
// persisted events back. They import nothing of package actors, so its
// own tests use them too; internal/testbundle puts them together.

// OpenWAL opens a real bbolt WAL at dir/fano.db, closed when t ends;
// noSync skips fsync (benchmarks and tests of logic, not durability).
func OpenWAL(t testing.TB, dir string, noSync bool) *wal.Log {
	t.Helper()
	return OpenWALWith(t, dir, wal.Options{NoSync: noSync})
}

// OpenWALWith is OpenWAL with opts (a lock timeout of 5 s if none).
func OpenWALWith(t testing.TB, dir string, opts wal.Options) *wal.Log {
	t.Helper()
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 5 * time.Second
	}
	log, err := wal.Open(filepath.Join(dir, "fano.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	return log
}

// Sims describes the sim backends of a test.
type Sims struct {
	Names     []string       // default chatgpt, claude, gemini
	Hourly    int            // the allocator's hourly limit (default 1000)
	SimHourly int            // the simulated service's own limit (0 = Hourly)
	Deep      map[string]int // daily deep-mode limit by backend name
	DeepAll   int            // daily deep-mode limit of the backends not in Deep
	Conc      int            // requests at once per backend (default 1)
	Latency   time.Duration  // per request, on the clock
	Malformed float64        // rate of malformed answers
}

// Build makes one sim backend per name (seeds 1, 2, …, style "api") on
// clock, and the allocator config that lists them.
func (s Sims) Build(clock clockwork.Clock) ([]gateway.Backend, []*sim.Backend, allocator.Config) {
	if len(s.Names) == 0 {
		s.Names = []string{"chatgpt", "claude", "gemini"}
	}
	if s.Hourly == 0 {
		s.Hourly = 1000
	}
	if s.SimHourly == 0 {
		s.SimHourly = s.Hourly
	}
	if s.Conc == 0 {
		s.Conc = 1
	}
	var (
		backends []gateway.Backend
		sims     []*sim.Backend
	)
	ac := allocator.Config{BufferPercent: 10}
	for i, name := range s.Names {
		deep, ok := s.Deep[name]
		if !ok {
			deep = s.DeepAll
		}
		b := sim.New(sim.Config{Name: name, Style: "api", Seed: int64(i + 1), Latency: s.Latency,
			HourlyLimit: s.SimHourly, DeepDailyLimit: deep, MalformedRate: s.Malformed}, clock)
		sims = append(sims, b)
		backends = append(backends, b)
		ac.Backends = append(ac.Backends, allocator.BackendConfig{Name: name, Kind: "sim",
			HourlyLimit: s.Hourly, DeepDailyLimit: deep, MaxConcurrency: s.Conc})
	}
	return backends, sims, ac
}

// Replayer is the part of a WAL (bbolt or in memory) that Events reads.
type Replayer interface {
	Replay(from uint64, fn func(wal.Entry) error) error
}

// Events decodes the WAL's events of owner ("" = every owner), in
// sequence order.
func Events(t testing.TB, log Replayer, owner string) []*pb.Event {
	t.Helper()
	var out []*pb.Event
	require.NoError(t, log.Replay(1, func(ent wal.Entry) error {
		if owner == "" || ent.Owner == owner {
			var e pb.Event
			require.NoError(t, proto.Unmarshal(ent.Payload, &e), "wal entry %d", ent.Seq)
			out = append(out, &e)
		}
		return nil
	}))
	return out
}
