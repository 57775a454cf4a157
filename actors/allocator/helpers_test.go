package allocator

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"fano/pb"
)

// rig is a book, a fake clock and the log of every event applied to it,
// as the actor would persist them.
type rig struct {
	t     *testing.T
	book  *Book
	clock *clockwork.FakeClock
	cfg   Config
	log   []*pb.Event
}

func newRig(t *testing.T, cfg Config, start time.Time) *rig {
	t.Helper()
	r := &rig{t: t, book: New(cfg), clock: clockwork.NewFakeClockAt(start), cfg: cfg}
	r.tick()
	return r
}

func (r *rig) now() time.Time { return r.clock.Now() }

// persist "writes" e to the log and applies it.
func (r *rig) persist(e *pb.Event) {
	r.t.Helper()
	r.log = append(r.log, proto.Clone(e).(*pb.Event))
	require.NoError(r.t, r.book.Apply(e))
}

// tick decides and persists the window resets due now; it returns them.
func (r *rig) tick() []*pb.Event {
	r.t.Helper()
	evs := r.book.DecideTick(r.now())
	for _, e := range evs {
		r.persist(e)
	}
	return evs
}

// use decides and persists one use; it fails the test if refused.
func (r *rig) use(backend string, deep bool) {
	r.t.Helper()
	e, err := r.book.DecideUse(backend, deep, "task", r.now())
	require.NoError(r.t, err)
	r.persist(e)
}

func (r *rig) useN(backend string, deep bool, n int) {
	r.t.Helper()
	for range n {
		r.use(backend, deep)
	}
}

func (r *rig) rateLimit(backend string, retryAfter time.Duration) {
	r.t.Helper()
	r.persist(r.book.DecideRateLimit(backend, RateLimit{RetryAfter: retryAfter}, "task", r.now()))
}

// usageCap records a usage cap that the provider said ends at until.
func (r *rig) usageCap(backend string, until time.Time) {
	r.t.Helper()
	r.persist(r.book.DecideRateLimit(backend, RateLimit{Until: until, Cap: true}, "task", r.now()))
}

func (r *rig) advanceTo(t time.Time) {
	r.t.Helper()
	require.False(r.t, t.Before(r.now()), "time goes forward only")
	r.clock.Advance(t.Sub(r.now()))
}

func (r *rig) status(backend string) BackendStatus {
	r.t.Helper()
	for _, s := range r.book.Status(r.now()) {
		if s.Name == backend {
			return s
		}
	}
	r.t.Fatalf("no status for %q", backend)
	return BackendStatus{}
}

// one is a config with a single sim backend.
func one(hourly, deep int) Config {
	return Config{
		Backends:            []BackendConfig{{Name: "sim", Kind: KindSim, HourlyLimit: hourly, DeepDailyLimit: deep}},
		BufferPercent:       10,
		RecoveryCleanHours:  1,
		RecoveryStepPercent: 10,
	}
}

func at(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }

func kinds(evs []*pb.Event) []string {
	var out []string
	for _, e := range evs {
		switch e.GetBody().(type) {
		case *pb.Event_HourWindowReset:
			out = append(out, "hour")
		case *pb.Event_DayWindowReset:
			out = append(out, "day")
		default:
			out = append(out, "other")
		}
	}
	return out
}
