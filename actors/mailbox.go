package actors

import (
	"sort"
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
// id the actor is spawned with (set with track once it is known).
func counted(producer actor.Producer, opts ...actor.PropsOption) (*actor.Props, *mailboxCount) {
	c := &mailboxCount{}
	opts = append(opts, actor.WithMailbox(actor.Unbounded(c)))
	return actor.PropsFromProducer(producer, opts...), c
}

func (s *System) track(id string, c *mailboxCount) { s.mailboxes.Store(id, c) }
func (s *System) untrack(id string)                { s.mailboxes.Delete(id) }

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
	var out []MailboxDepth
	s.mailboxes.Range(func(k, v any) bool {
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
