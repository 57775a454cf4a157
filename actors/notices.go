package actors

import (
	"sync"
	"sync/atomic"

	"fano/pb"
)

// Notice is what subscribers see: an applied event (Owner + Event) or a
// notification that is not state (Update: health alerts, call timings).
type Notice struct {
	Owner  string
	Event  *pb.Event
	Update *pb.StateUpdate
}

// Subscribe calls fn for every applied event and published update, in the
// goroutine of the actor that applied it: fn must not block (hand off to a
// buffered channel and drop when full). The returned func unsubscribes.
// The panel's live feed, the metrics, the pipeline CLI's progress and the
// module flows of app/ subscribe; a func, not a channel, so that a slow
// reader drops its own notices and never holds an actor.
func (s *System) Subscribe(fn func(Notice)) (cancel func()) { return s.notices.subscribe(fn) }

// Publish sends a notification that is not a state change to subscribers.
func (s *System) Publish(u *pb.StateUpdate) {
	if u.At == 0 {
		u.At = nanos(s.clock.Now())
	}
	s.notices.notify(Notice{Update: u})
}

// notices fans applied events and published updates out to subscribers.
// subscribe and its cancel take a lock and swap in a new list; notify
// reads the list without a lock, in the goroutine of whoever notifies (an
// actor applying an event, the facade publishing), so a subscriber must
// not block.
type notices struct {
	// observe is Options.Observe (nil if unset): told of every applied
	// event before the subscribers.
	observe func(owner string, e *pb.Event)

	mu   sync.Mutex
	subs atomic.Pointer[[]*subscriber]
}

type subscriber struct{ fn func(Notice) }

// applied tells the observer and every subscriber that owner applied e.
func (n *notices) applied(owner string, e *pb.Event) {
	if n.observe != nil {
		n.observe(owner, e)
	}
	n.notify(Notice{Owner: owner, Event: e})
}

func (n *notices) subscribe(fn func(Notice)) (cancel func()) {
	sub := &subscriber{fn: fn}
	n.mu.Lock()
	defer n.mu.Unlock()
	var cur []*subscriber
	if p := n.subs.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*subscriber(nil), cur...), sub)
	n.subs.Store(&next)
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		var keep []*subscriber
		for _, x := range *n.subs.Load() {
			if x != sub {
				keep = append(keep, x)
			}
		}
		n.subs.Store(&keep)
	}
}

func (n *notices) notify(x Notice) {
	p := n.subs.Load()
	if p == nil {
		return
	}
	for _, sub := range *p {
		sub.fn(x)
	}
}
