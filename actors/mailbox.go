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
type mailboxCount struct {
	n   atomic.Int64
	box atomic.Pointer[mailboxes] // set by track: told when the mailbox drains
}

func (c *mailboxCount) MailboxStarted() {}

// MailboxEmpty: the actor handled all it had (see idleSignal).
func (c *mailboxCount) MailboxEmpty() {
	if b := c.box.Load(); b != nil {
		b.idle.poke()
	}
}

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
// id the actor is spawned with (set with track once it is known).
func counted(producer actor.Producer, opts ...actor.PropsOption) (*actor.Props, *mailboxCount) {
	c := &mailboxCount{}
	opts = append(opts, actor.WithMailbox(actor.Unbounded(c)))
	return actor.PropsFromProducer(producer, opts...), c
}

// mailboxes holds the mailbox counter of every actor alive, by the id it
// was spawned with. track and untrack are called by whoever spawns and
// stops an actor (Start, the orchestrator); depths and queued only read
// the counters, from any goroutine, without sending a message.
type mailboxes struct {
	byActor sync.Map
	idle    idleSignal
}

func (b *mailboxes) track(id string, c *mailboxCount) {
	c.box.Store(b)
	b.byActor.Store(id, c)
}
func (b *mailboxes) untrack(id string) { b.byActor.Delete(id) }

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
