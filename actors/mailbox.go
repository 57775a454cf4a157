package actors

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailboxCount counts the user messages waiting in one actor's mailbox
// (the one being handled included), as protoactor's mailbox middleware
// sees them posted and received: no reflection into protoactor.
type mailboxCount struct{ n atomic.Int64 }

func (c *mailboxCount) MailboxStarted() {}
func (c *mailboxCount) MailboxEmpty()   {}

func (c *mailboxCount) MessagePosted(m any) {
	if _, sys := m.(actor.SystemMessage); !sys {
		c.n.Add(1)
	}
}

func (c *mailboxCount) MessageReceived(m any) {
	if _, sys := m.(actor.SystemMessage); !sys {
		c.n.Add(-1)
	}
}

// counted gives props a mailbox whose depth Mailboxes reports under the
// id the actor is spawned with (set with track once it is known). Its
// messages are handled on warm goroutines unless opts name a dispatcher.
func counted(producer actor.Producer, opts ...actor.PropsOption) (*actor.Props, *mailboxCount) {
	c := &mailboxCount{}
	opts = append([]actor.PropsOption{actor.WithDispatcher(warmDispatcher)}, opts...)
	opts = append(opts, actor.WithMailbox(actor.Unbounded(c)))
	return actor.PropsFromProducer(producer, opts...), c
}

// warmDispatcher runs mailboxes on warm goroutines, with protoactor's
// default throughput.
var warmDispatcher = &warmGoroutines{throughput: 300, maxParked: 64, work: make(chan func())}

// warmGoroutines is a protoactor dispatcher, and a way to start any
// short-lived work, whose goroutines outlive the work they run. The
// default dispatcher starts a new goroutine each time an idle mailbox
// gets a message; it starts with a small stack, and a handler that goes
// deep copies its stack a few times over before it is done (8 % of the
// CPU of BenchmarkEndToEnd went to that). A goroutine that waits here for
// its next work keeps the stack it grew (the collector halves an unused
// one now and then). At most maxParked wait; the others end.
type warmGoroutines struct {
	throughput int
	maxParked  int32
	parked     atomic.Int32
	work       chan func() // unbuffered: a send succeeds only into a waiting goroutine
}

// Schedule runs fn on a waiting goroutine, or on a new one if none waits.
func (w *warmGoroutines) Schedule(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.run(fn)
	}
}

// Go is Schedule under the name of what it does for work that is not a
// mailbox.
func (w *warmGoroutines) Go(fn func()) { w.Schedule(fn) }

// Throughput is the number of messages a mailbox handles before it
// yields the processor.
func (w *warmGoroutines) Throughput() int { return w.throughput }

func (w *warmGoroutines) run(fn func()) {
	for {
		fn()
		fn = nil // what it held is garbage while the goroutine waits
		if w.parked.Add(1) > w.maxParked {
			w.parked.Add(-1)
			return
		}
		fn = <-w.work
		w.parked.Add(-1)
	}
}

// mailboxes holds the mailbox counter of every actor alive, by the id it
// was spawned with. track and untrack are called by whoever spawns and
// stops an actor (Start, the orchestrator); depths and queued only read
// the counters, from any goroutine, without sending a message.
type mailboxes struct{ byActor sync.Map }

func (b *mailboxes) track(id string, c *mailboxCount) { b.byActor.Store(id, c) }
func (b *mailboxes) untrack(id string)                { b.byActor.Delete(id) }

// queued is the depth of one actor's mailbox (0 for one not tracked).
func (b *mailboxes) queued(id string) int {
	if v, ok := b.byActor.Load(id); ok {
		return int(v.(*mailboxCount).n.Load())
	}
	return 0
}

// depths lists every tracked mailbox, deepest first (ties by name).
func (b *mailboxes) depths() []MailboxDepth {
	var out []MailboxDepth
	b.byActor.Range(func(k, v any) bool {
		out = append(out, MailboxDepth{Actor: k.(string), Depth: int(v.(*mailboxCount).n.Load())})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Depth != out[j].Depth {
			return out[i].Depth > out[j].Depth
		}
		return out[i].Actor < out[j].Actor
	})
	return out
}

// MailboxDepth is the number of user messages waiting in one actor's
// mailbox, the one it is handling included.
type MailboxDepth struct {
	Actor string `json:"actor"`
	Depth int    `json:"depth"`
}

// Mailboxes returns the depth of every actor's mailbox, deepest first
// (ties by name). It never sends a message, so it answers even when an
// actor is wedged: what a SIGUSR1 dump needs.
func (s *System) Mailboxes() []MailboxDepth {
	select {
	case <-s.dead:
		return nil
	default:
	}
	return s.mailboxes.depths()
}
