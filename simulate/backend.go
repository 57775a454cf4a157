package simulate

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"fano/actors"
	"fano/gateway"
	"fano/gateway/sim"
)

// Backend is a simulated backend (gateway/sim, with the config's limits)
// and the faults the schedule puts on it. The driver switches faults on
// and off; the backend's Inject hook applies them to each request.
type Backend struct {
	*sim.Backend
	kind  string // the config type it stands in for: browser, api, sim
	clock clockwork.Clock
	seed  int64

	mu        sync.Mutex
	cap       time.Time // usage cap until
	storm     time.Time // 429 storm until
	stormPer  int
	stormMin  time.Time // the storm's current minute
	stormUsed int
	transient time.Time
	rate      float64
	hang      time.Time
	crashed   time.Time         // page gone until
	login     bool              // behind a login wall
	revoked   bool              // key refused
	draws     map[string]uint64 // per request (task, turn): how often it drew
	counts    FaultCounts
}

// wait tells the system whose task made the call that it is blocked on
// the clock or on its context (actors.CallWaiting): the driver moves the
// clock only while every running task waits so. A call counted from its
// start could be held by the OS between its start and its timer, and the
// clock jump past a deadline nobody had set yet; a count shared by all
// calls took a health probe's wait, or one of a stopped fano, for a
// task's.
func (b *Backend) wait(ctx context.Context, waiting bool) { actors.CallWaiting(ctx, waiting) }

// FaultCounts are the requests each fault refused.
type FaultCounts struct {
	Capped, Stormed, Transient, Hung, Crashed int64
}

// NewBackend wraps a simulated backend standing in for a backend of kind.
func NewBackend(s *sim.Backend, kind string, clock clockwork.Clock, seed int64) *Backend {
	b := &Backend{Backend: s, kind: kind, clock: clock, seed: seed}
	s.Inject(b.inject)
	s.OnWait(b.wait)
	return b
}

// Unwrap lets gateway.As reach the simulated backend.
func (b *Backend) Unwrap() gateway.Backend { return b.Backend }

// Kind is the config type the backend stands in for.
func (b *Backend) Kind() string { return b.kind }

// Counts returns what the faults refused.
func (b *Backend) Counts() FaultCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts
}

// Condition tells the system what a person would see: a login wall or a
// refused key (it parks the backend before any quota is charged).
func (b *Backend) Condition() gateway.Condition {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.login:
		return gateway.Condition{State: gateway.StateLogin, Reason: "simulated: login expired; run fano login"}
	case b.revoked:
		return gateway.Condition{State: gateway.StateCredentials, Reason: "simulated: the key was revoked"}
	case b.clock.Now().Before(b.crashed):
		return gateway.Condition{State: gateway.StatePageGone, Reason: "simulated: the browser crashed; restarting", Until: b.crashed}
	}
	return gateway.Condition{State: gateway.StateReady}
}

// Health fails behind a login wall or with a revoked key.
func (b *Backend) Health(ctx context.Context) error {
	b.mu.Lock()
	login, revoked := b.login, b.revoked
	b.mu.Unlock()
	switch {
	case login:
		return gateway.Unavailable(b.Name(), "login required (simulated)")
	case revoked:
		return gateway.Classified(b.Name(), gateway.ErrCredentials, "401 unauthorized: the key was revoked (simulated)")
	}
	return b.Backend.Health(ctx)
}

var _ gateway.Conditioner = (*Backend)(nil)

// Apply switches fault f on (on) or off for this backend.
func (b *Backend) Apply(f Fault, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch f.Kind {
	case KindUsageCap:
		b.cap = endOr(on, f.End)
	case KindStorm:
		b.storm, b.stormPer = endOr(on, f.End), f.PerMin
	case KindTransient:
		b.transient, b.rate = endOr(on, f.End), f.Rate
	case KindHang:
		b.hang = endOr(on, f.End)
	case KindBrowserCrash:
		end := f.End
		if end.Equal(f.Start) {
			end = f.Start.Add(time.Minute)
		}
		b.crashed = endOr(on, end)
	case KindLoginExpired:
		b.login = on
	case KindLogin:
		b.login = false
	case KindKeyRevoked:
		b.revoked = on
	case KindKeyRestored:
		b.revoked = false
	}
}

func endOr(on bool, end time.Time) time.Time {
	if on {
		return end
	}
	return time.Time{}
}

// inject runs before the simulated service sees a request.
func (b *Backend) inject(ctx context.Context, req gateway.Request) error {
	now := b.clock.Now()
	b.mu.Lock()
	switch {
	case b.login:
		b.mu.Unlock()
		return gateway.PersonFault(b.Name(), gateway.StateLogin, "login required (simulated)", time.Time{})
	case b.revoked:
		b.mu.Unlock()
		return gateway.PersonFault(b.Name(), gateway.StateCredentials, "401 unauthorized: the key was revoked (simulated)", time.Time{})
	case now.Before(b.crashed):
		b.counts.Crashed++
		until := b.crashed
		b.mu.Unlock()
		return &gateway.Fault{Backend: b.Name(), Condition: gateway.Condition{State: gateway.StatePageGone,
			Reason: "page crashed (simulated browser crash)", Until: until}}
	case now.Before(b.cap):
		b.counts.Capped++
		until := b.cap
		b.mu.Unlock()
		return gateway.QuotaFault(b.Name(), "usage cap", "You've reached the usage cap (simulated); continue after "+until.Format("15:04"), now, until)
	case now.Before(b.storm):
		minute := now.Truncate(time.Minute)
		if !minute.Equal(b.stormMin) {
			b.stormMin, b.stormUsed = minute, 0
		}
		if b.stormUsed >= b.stormPer {
			b.counts.Stormed++
			b.mu.Unlock()
			return gateway.RateFault(b.Name(), "requests", "429 Too Many Requests (simulated storm)", now, minute.Add(time.Minute))
		}
		b.stormUsed++
	case now.Before(b.hang):
		b.counts.Hung++
		b.mu.Unlock()
		b.wait(ctx, true)
		<-ctx.Done()
		b.wait(ctx, false)
		return fmt.Errorf("%s: no answer (simulated hang): %w", b.Name(), ctx.Err())
	case now.Before(b.transient) && b.draw(req) < b.rate:
		b.counts.Transient++
		b.mu.Unlock()
		return gateway.TransientFault(b.Name(), "502 bad gateway (simulated)", now.Add(gateway.TransientPause), nil)
	}
	b.mu.Unlock()
	return nil
}

// draw is a number in [0,1) from the seed, the request and how often
// this request drew before: a retry draws afresh, and the draws do not
// depend on the order in which tasks reach the backend.
func (b *Backend) draw(req gateway.Request) float64 {
	if b.draws == nil {
		b.draws = map[string]uint64{}
	}
	key := fmt.Sprintf("%s\x00%d", req.TaskID, len(req.History))
	b.draws[key]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%d", b.seed, b.Name(), key, b.draws[key])
	// FNV's last bytes (the draw's count) barely reach its top bits: on
	// their own they gave a request that failed once the same failure
	// on every retry. Mixed, every draw is a fresh one.
	return float64(mix64(h.Sum64())>>11) / float64(1<<53)
}

// mix64 is splitmix64's finalizer: every input bit reaches every output
// bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
