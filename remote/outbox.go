package remote

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pr "github.com/asynkron/protoactor-go/remote"

	"fano/pb"
)

// outbox coalesces what one side sends the other's inbox. The first
// message queued while none is on its way hands protoactor's writer for
// that peer a flush, once the goroutines already runnable have had their
// turn; the writer turns the flush into one batch when it serializes it,
// so whatever was queued by then (while the writer sent the batch
// before) goes as one message. An idle link sends each message at once:
// no timer, nothing waits to be joined.
//
// A flush the writer drops (no link: dead letters) would leave the
// outbox waiting; kick sends another once the first has waited a tick.
type outbox struct {
	send    func(target *actor.PID, flush any) // hands a flush to the writer
	answers bool                               // a host's answers, not an orchestrator's calls

	mu      sync.Mutex
	target  *actor.PID
	calls   []*pb.RemoteCall
	cancels []*pb.RemoteCancel
	replies []*pb.RemoteAnswer
	flushAt time.Time // when the flush on its way was handed over; zero: none is
	// held counts the batches of calls being started (hold): the
	// answers they give at once wait for the batch's release and go
	// together.
	held int
}

// callsOutbox carries an orchestrator's calls and cancels to a host's
// inbox; answersOutbox a host's answers back.
// The peer answers calls to sender.
func callsOutbox(r *pr.Remote, target, sender *actor.PID) *outbox {
	return &outbox{target: target, send: func(t *actor.PID, m any) { r.SendMessage(t, nil, m, sender, -1) }}
}

func answersOutbox(r *pr.Remote, target *actor.PID) *outbox {
	return &outbox{target: target, answers: true, send: func(t *actor.PID, m any) { r.SendMessage(t, nil, m, nil, -1) }}
}

func (o *outbox) call(m *pb.RemoteCall, now time.Time) {
	o.mu.Lock()
	o.calls = append(o.calls, m)
	o.queued(now)
}

// cancel ends a call: one still queued is not sent at all, and the
// cancel goes all the same (an earlier delivery of the call, before a
// lost link, may be running).
func (o *outbox) cancel(m *pb.RemoteCancel, now time.Time) {
	o.mu.Lock()
	o.calls = slices.DeleteFunc(o.calls, func(c *pb.RemoteCall) bool { return c.Call == m.Call })
	o.cancels = append(o.cancels, m)
	o.queued(now)
}

func (o *outbox) answer(m *pb.RemoteAnswer, now time.Time) {
	o.mu.Lock()
	o.replies = append(o.replies, m)
	o.queued(now)
}

// hold keeps what is queued from now until the matching release: a
// batch of calls is being started, and the answers its quick calls give
// at once go as one message when it has started.
func (o *outbox) hold() {
	o.mu.Lock()
	o.held++
	o.mu.Unlock()
}

// release ends a hold; the last one hands over a flush at once if
// anything waits (the batch's calls have run or are waiting on their
// backends: nothing more is coming soon).
func (o *outbox) release(now time.Time) {
	o.mu.Lock()
	o.held--
	if o.held > 0 || !o.flushAt.IsZero() || o.emptyLocked() {
		o.mu.Unlock()
		return
	}
	o.handOver(now)
}

// queued hands over a flush if none is on its way and nothing holds the
// outbox; o.mu is held and is released.
func (o *outbox) queued(now time.Time) {
	if !o.flushAt.IsZero() || o.held > 0 {
		o.mu.Unlock()
		return
	}
	o.flushAt = now
	target := o.target
	o.mu.Unlock()
	// The goroutines already waiting for a processor (the other calls
	// of a WAL commit, the answers of calls that blocked for a while)
	// queue theirs before the flush goes: fewer, larger messages on a
	// busy process. On an idle one nothing waits, and the flush goes at
	// once.
	runtime.Gosched()
	o.send(target, outboxFlush{o})
}

// handOver hands over a flush now; o.mu is held and is released.
func (o *outbox) handOver(now time.Time) {
	o.flushAt = now
	target := o.target
	o.mu.Unlock()
	o.send(target, outboxFlush{o})
}

// retarget points the outbox at the peer's inbox as it registered again
// and sends what waits, or drops it (the peer is a new process).
func (o *outbox) retarget(target *actor.PID, drop bool, now time.Time) {
	o.mu.Lock()
	o.target = target
	if drop {
		o.calls, o.cancels, o.replies = nil, nil, nil
	}
	o.reflushLocked(now)
}

// drop forgets what waits (the peer was lost: what is still wanted is
// sent again when it is back, and nothing given up on meanwhile is).
func (o *outbox) drop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls, o.cancels, o.replies = nil, nil, nil
}

// reflush sends what waits now: the peer is back, and a flush handed
// over while it was away may have been dropped.
func (o *outbox) reflush(now time.Time) {
	o.mu.Lock()
	o.reflushLocked(now)
}

// reflushLocked: o.mu is held and is released.
func (o *outbox) reflushLocked(now time.Time) {
	o.flushAt = time.Time{}
	if o.emptyLocked() {
		o.mu.Unlock()
		return
	}
	o.queued(now)
}

// kick hands over another flush when the one on its way has waited
// since before staleBefore with messages queued (the writer dropped it).
func (o *outbox) kick(staleBefore, now time.Time) {
	o.mu.Lock()
	if o.flushAt.IsZero() || !o.flushAt.Before(staleBefore) || o.emptyLocked() {
		o.mu.Unlock()
		return
	}
	o.flushAt = time.Time{}
	o.queued(now)
}

func (o *outbox) emptyLocked() bool {
	return len(o.calls)+len(o.cancels)+len(o.replies) == 0
}

// take is what is queued, as one message, and frees the outbox for the
// next flush.
func (o *outbox) take() pr.RootSerialized {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushAt = time.Time{}
	if o.answers {
		m := &pb.RemoteAnswers{Answers: o.replies}
		o.replies = nil
		return wireAnswers{m}
	}
	m := &pb.RemoteCalls{Calls: o.calls, Cancels: o.cancels}
	o.calls, o.cancels = nil, nil
	return wireCalls{m}
}

// outboxFlush is handed to protoactor's writer in place of a message:
// the writer asks it for its wire form when it sends (RootSerializable).
type outboxFlush struct{ o *outbox }

func (f outboxFlush) Serialize() (pr.RootSerialized, error) { return f.o.take(), nil }

// wireCalls and wireAnswers are the batches as they are serialized (the
// protobuf message itself crosses); the receiver gets the plain message.
type wireCalls struct{ *pb.RemoteCalls }

type wireAnswers struct{ *pb.RemoteAnswers }

var errNotInProcess = errors.New("a batch is read as its protobuf message, not back into a flush")

func (wireCalls) Deserialize() (pr.RootSerializable, error)   { return nil, errNotInProcess }
func (wireAnswers) Deserialize() (pr.RootSerializable, error) { return nil, errNotInProcess }
