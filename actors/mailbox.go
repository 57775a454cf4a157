package actors

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailboxCount counts the user messages waiting in one actor's mailbox
// (the one being handled included): the mailbox counts them itself as
// they are posted and handled, no reflection into protoactor.
type mailboxCount struct {
	n atomic.Int64
	// posted counts every user message ever posted: the hops between
	// actors, for the benchmarks (messagesPosted).
	posted atomic.Int64
	box    atomic.Pointer[mailboxes] // set by track: told when the mailbox drains
}

// drained: the actor handled all it had (see idleSignal).
func (c *mailboxCount) drained() {
	if b := c.box.Load(); b != nil {
		b.idle.poke()
	}
}

// counted gives props a mailbox whose depth Mailboxes reports under the
// id the actor is spawned with (set with track once it is known). Its
// messages are handled on warm goroutines unless opts name a dispatcher.
func counted(producer actor.Producer, opts ...actor.PropsOption) (*actor.Props, *mailboxCount) {
	c := &mailboxCount{}
	opts = append([]actor.PropsOption{actor.WithDispatcher(warmDispatcher)}, opts...)
	opts = append(opts, actor.WithMailbox(func() actor.Mailbox { return newMailbox(c) }))
	return actor.PropsFromProducer(producer, opts...), c
}

// mailbox is an unbounded actor mailbox: system messages first, user
// messages in the order they were posted, at most one goroutine handling
// them at a time, as protoactor's own. Unlike protoactor's it allocates
// nothing per message: protoactor's made a closure each time it scheduled
// its run and a list node per system message (about 25 allocations per
// task of BenchmarkEndToEnd). A protoactor MessageBatch is handed to the
// actor as one message (fano sends none; protoactor's mailbox unpacked it).
type mailbox struct {
	mu           sync.Mutex
	user, system fifo

	users, systems atomic.Int32 // messages in each queue
	running        atomic.Bool  // a goroutine is handling messages (or about to)
	suspended      atomic.Bool  // a supervisor holds the user messages back
	depth          *mailboxCount

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	handle     func() // m.handleMessages, bound once
	// ending, if set, runs as a run ends, before it lets go (tests post
	// there: the moment a wake-up can be lost).
	ending func()
}

func newMailbox(depth *mailboxCount) *mailbox {
	m := &mailbox{depth: depth}
	m.handle = m.handleMessages
	return m
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

func (m *mailbox) Start()                {}
func (m *mailbox) UserMessageCount() int { return int(m.users.Load()) }

func (m *mailbox) PostUserMessage(msg any) {
	m.depth.n.Add(1)
	m.depth.posted.Add(1)
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.users.Add(1)
	m.schedule()
}

func (m *mailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.mu.Unlock()
	m.systems.Add(1)
	m.schedule()
}

// schedule starts a run unless one is under way: the count was raised
// before, so a run that is ending sees the message (handleMessages).
func (m *mailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.handle)
	}
}

// handleMessages runs until the queues are empty, then checks again after
// it let go: a message posted as it ended found it running and did not
// schedule another run.
func (m *mailbox) handleMessages() {
	for {
		m.run()
		m.depth.drained()
		if m.ending != nil {
			m.ending()
		}
		m.running.Store(false)
		if m.systems.Load() == 0 && (m.suspended.Load() || m.users.Load() == 0) {
			return
		}
		if !m.running.CompareAndSwap(false, true) {
			return // a poster scheduled a run of its own
		}
	}
}

// run handles messages until none waits that may be handled now, yielding
// the processor every throughput messages. A panic in the actor goes to
// its supervisor, as with protoactor's mailbox.
func (m *mailbox) run() {
	var (
		msg  any
		user bool
	)
	defer func() {
		if r := recover(); r != nil {
			if user {
				m.depth.n.Add(-1)
			}
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	throughput := m.dispatcher.Throughput()
	for i := 1; ; i++ {
		if i > throughput {
			i = 1
			runtime.Gosched()
		}
		var ok bool
		if msg, ok = m.pop(&m.system); ok {
			m.systems.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if msg, ok = m.pop(&m.user); !ok {
			return
		}
		m.users.Add(-1)
		user = true
		m.invoker.InvokeUserMessage(msg)
		user = false
		m.depth.n.Add(-1)
	}
}

func (m *mailbox) pop(q *fifo) (any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return q.pop()
}

// fifo is a queue in one slice that reuses its room: emptied, it starts
// over; full, it moves what waits to the front before it grows.
type fifo struct {
	items []any
	head  int
}

func (q *fifo) push(x any) {
	if len(q.items) == cap(q.items) && q.head > 0 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, x)
}

func (q *fifo) pop() (any, bool) {
	if q.head == len(q.items) {
		return nil, false
	}
	x := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return x, true
}

// warmDispatcher runs mailboxes on warm goroutines, with protoactor's
// default throughput, and gateway calls. Up to 128 wait: room for the
// long-lived actors and a full set of running tasks (64 by default) if
// executors run their loops here too.
var warmDispatcher = &warmGoroutines{throughput: 300, maxParked: 128, work: make(chan func())}

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
	live       atomic.Int32 // goroutines started and not ended
	work       chan func()  // unbuffered: a send succeeds only into a waiting goroutine
}

// Schedule runs fn on a waiting goroutine, or on a new one if none waits.
func (w *warmGoroutines) Schedule(fn func()) {
	select {
	case w.work <- fn:
	default:
		w.live.Add(1)
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
			w.live.Add(-1)
			return
		}
		fn = <-w.work
		w.parked.Add(-1)
	}
}

// mailboxes holds the mailbox counter of every actor alive, by the id it
// was spawned with. track is called by whoever spawns an actor (Start,
// the orchestrator); depths and queued only read
// the counters, from any goroutine, without sending a message.
type mailboxes struct {
	byActor sync.Map
	idle    idleSignal
}

func (b *mailboxes) track(id string, c *mailboxCount) {
	c.box.Store(b)
	b.byActor.Store(id, c)
}

// posted is the number of user messages posted to the actors ids, ever.
func (b *mailboxes) posted(ids ...string) int64 {
	var n int64
	for _, id := range ids {
		if v, ok := b.byActor.Load(id); ok {
			n += v.(*mailboxCount).posted.Load()
		}
	}
	return n
}

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
