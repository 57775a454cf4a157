package actors

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/pb"
	"fano/wal"
)

// journal is the persist step of decide -> persist -> apply for one WAL
// owner. Batches are enqueued in the WAL in the order they were given, by
// one loop that never waits for an fsync (wal.AppendAsync), and handed
// back to the owning actor's mailbox once durable, in that same order, by
// a second loop; so the actor applies its events in sequence order and
// its applied state is always a prefix of its log, while several of its
// appends share the WAL's group commits.
type journal struct {
	// pending counts batches from persist until their pb.Persisted is
	// posted (the system's offActor).
	pending *atomic.Int64
	log     Store
	owner   string
	root    *actor.RootContext
	self    *actor.PID
	box     *outbox

	mu       sync.Mutex
	queue    []*batch
	closed   bool // the loop took its last queue: offer refuses batches
	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	inflight chan pending // enqueued appends, oldest first

	// The loop's scratch: the payload sizes and archive records of a
	// flush, and flush buffers that deliver gives back once their append
	// is durable.
	sizes     []int
	archives  []*wal.ArchiveRecord
	kept      chan flushBuffers
	keptBytes atomic.Int64 // held by the kept buffers
}

// flushBuffers are a flush's payload buffer and entries, which the log
// holds until the append's wait returns (the Journal contract): deliver
// then gives them back for a later flush.
type flushBuffers struct {
	payloads []byte
	entries  []wal.Entry
}

// Flush buffers kept for reuse: how many at most (a journal has up to a
// hundred or so appends in flight) and how many bytes. New ones are made a
// power of two larger than asked, so that the next flushes, a little
// larger or smaller, fit in them.
const (
	keptFlushBuffers = 256
	maxKeptBytes     = 1 << 20
	minPayloadBuffer = 512
	minEntryBuffer   = 8
)

// size is about what f holds in memory (a wal.Entry is about 128 bytes).
func (f flushBuffers) size() int64 {
	return int64(cap(f.payloads)) + int64(cap(f.entries))*128
}

// buffers gives a flush n payload bytes and room for entries entries: the
// next kept buffers if they are large enough, else new ones in their
// place, so that the kept ones grow to what flushes need.
func (j *journal) buffers(n, entries int) flushBuffers {
	var f flushBuffers
	select {
	case f = <-j.kept:
		j.keptBytes.Add(-f.size())
		if cap(f.payloads) < n || cap(f.entries) < entries {
			f = flushBuffers{} // too small: a new one takes its place
		}
	default:
	}
	if f.payloads == nil {
		f = flushBuffers{payloads: make([]byte, roomFor(n, minPayloadBuffer)), entries: make([]wal.Entry, 0, roomFor(entries, minEntryBuffer))}
	}
	f.payloads, f.entries = f.payloads[:n], f.entries[:0]
	return f
}

// roomFor is the power of two at least n and at least least.
func roomFor(n, least int) int {
	if n <= least {
		return least
	}
	return 1 << bits.Len(uint(n-1))
}

// keep offers a flush's buffers for reuse once its append is durable; the
// entries are cleared first (they point at payloads and archive records).
func (j *journal) keep(f flushBuffers) {
	n := f.size()
	if j.keptBytes.Add(n) > maxKeptBytes {
		j.keptBytes.Add(-n)
		return
	}
	clear(f.entries)
	select {
	case j.kept <- f:
	default:
		j.keptBytes.Add(-n)
	}
}

// pending is one enqueued append and the batches it carries.
type pending struct {
	batches []*batch
	ok      []*batch // the batches that were encoded and enqueued
	wait    func() ([]uint64, error)
	buffers flushBuffers // the entries and their payloads, free once wait returns
}

// batch is one decision's events and what to do once they are applied.
type batch struct {
	events []*pb.Event
	// archive, if set, makes the record written in the same transaction
	// as the events. It runs on the journal's loop goroutine, before the
	// events are encoded (it may set fields of them): its encoding, a
	// whole task at a completion, is off the owner's goroutine.
	archive func() *wal.ArchiveRecord
	seqs    []uint64
	err     error
	then    func(seqs []uint64, err error) // runs in the actor after apply
	// queued, if set, runs once the events are queued in the WAL (err:
	// they could not be encoded), on the journal's loop goroutine: it may
	// only send messages. What anyone queues after it can never be
	// durable without these events (the log keeps call order: a crash
	// leaves a prefix), so a sender may go on at once with a write that
	// depends on them, and skip the wait for their fsync.
	queued func(err error)
	// durable, if set, runs once the events are durable (err: they could
	// not be written), on the journal's delivery goroutine, after their
	// pb.Persisted is posted to the owner: it may only send messages. An
	// answer sent from it reaches its asker two hand-offs sooner than one
	// sent by then (the owner's mailbox, then the apply of the whole
	// group), and whatever the asker sends the owner next is queued
	// behind that pb.Persisted, so the owner still applies these events
	// first (etcd raft's order: save, then send, then apply). Only for
	// answers that need nothing of the owner's state after the apply.
	durable func(seqs []uint64, err error)
}

// outbox holds the groups of batches a journal delivered until the owning
// actor takes them on their pb.Persisted. It belongs to the owner, not to
// one actor instance: an instance restarted after a panic takes the
// groups its predecessor's journal delivered.
type outbox struct {
	mu     sync.Mutex
	next   uint64
	groups map[uint64][]*batch
}

func (o *outbox) put(batches []*batch) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups == nil {
		o.groups = map[uint64][]*batch{}
	}
	o.next++
	o.groups[o.next] = batches
	return o.next
}

func (o *outbox) take(group uint64) []*batch {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.groups[group]
	delete(o.groups, group)
	return b
}

// takeAll takes every group still held, in the order they were delivered.
func (o *outbox) takeAll() [][]*batch {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]uint64, 0, len(o.groups))
	for id := range o.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([][]*batch, len(ids))
	for i, id := range ids {
		out[i] = o.groups[id]
		delete(o.groups, id)
	}
	return out
}

// desk is what an owner of state keeps beyond one actor instance: the
// guard its actor holds while it handles a message (so a reader outside
// the actors, see withScheduler and WithModule, looks at the state
// between two messages), and its journal's outbox.
type desk struct {
	guard sync.Mutex
	box   outbox
}

// desks holds every owner's desk and applies, in the owner's actor, what
// its journal delivered. desk is safe from any goroutine (readers outside
// the actors take a guard from it); applyPersisted and applyLeft run in
// the owning actor's goroutine only, one owner's calls never overlapping.
type desks struct {
	byOwner sync.Map // owner -> *desk
	logger  zerolog.Logger
	notices *notices // told of every event applied
}

// desk is owner's desk.
func (d *desks) desk(owner string) *desk {
	if x, ok := d.byOwner.Load(owner); ok {
		return x.(*desk)
	}
	x, _ := d.byOwner.LoadOrStore(owner, &desk{})
	return x.(*desk)
}

func newJournal(s *System, owner string, self *actor.PID) *journal {
	j := &journal{
		pending: &s.offActor, log: s.log, owner: owner, root: s.root, self: self, box: &s.desks.desk(owner).box,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		inflight: make(chan pending, 1024), kept: make(chan flushBuffers, keptFlushBuffers),
	}
	go j.loop()
	go j.deliver()
	return j
}

// persist queues events; then runs in the actor once they are applied (or
// with the error if they could not be written, in which case nothing was
// applied).
func (j *journal) persist(events []*pb.Event, then func([]uint64, error)) {
	j.persistArchiving(events, nil, then)
}

// persistArchiving is persist with an archive record that is written
// exactly when the events are (see batch.archive).
func (j *journal) persistArchiving(events []*pb.Event, archive func() *wal.ArchiveRecord, then func([]uint64, error)) {
	j.enqueue(&batch{events: events, archive: archive, then: then})
}

// persistQueued is persistArchiving with a queued callback (see batch).
func (j *journal) persistQueued(events []*pb.Event, archive func() *wal.ArchiveRecord, queued func(error), then func([]uint64, error)) {
	j.enqueue(&batch{events: events, archive: archive, queued: queued, then: then})
}

// persistDurable is persist with a durable callback (see batch): durable
// runs on the journal's goroutine once the events are durable, then in
// the actor once they are applied.
func (j *journal) persistDurable(events []*pb.Event, durable, then func([]uint64, error)) {
	j.enqueue(&batch{events: events, durable: durable, then: then})
}

func (j *journal) enqueue(b *batch) {
	j.pending.Add(1)
	j.mu.Lock()
	j.queue = append(j.queue, b)
	j.mu.Unlock()
	j.poke()
}

// offer is enqueue for a writer other than the owner, from any goroutine:
// false, and nothing queued, once the journal is closing (the owner
// stopped or is restarting), when the writer must go through the owner's
// mailbox instead. A batch it takes is written and delivered like the
// owner's own, in the order they were queued.
func (j *journal) offer(b *batch) bool {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return false
	}
	j.pending.Add(1)
	j.queue = append(j.queue, b)
	j.mu.Unlock()
	j.poke()
	return true
}

func (j *journal) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// close stops the journal after everything queued so far is delivered.
func (j *journal) close() {
	select {
	case <-j.stop:
	default:
		close(j.stop)
	}
	<-j.stopped
}

func (j *journal) loop() {
	defer close(j.inflight) // deliver ends after the last append
	for {
		select {
		case <-j.wake:
		case <-j.stop:
			// What was queued before the stop goes out too; nothing
			// offered after it is taken.
			j.mu.Lock()
			j.closed = true
			j.mu.Unlock()
			j.flush()
			return
		}
		j.flush()
	}
}

// deliver waits for each append in order and hands its batches to the
// actor.
func (j *journal) deliver() {
	defer close(j.stopped)
	for p := range j.inflight {
		seqs, err := p.wait()
		j.keep(p.buffers)
		i := 0
		for _, b := range p.ok {
			if err != nil {
				b.err = fmt.Errorf("%s: persist %d events: %w", j.owner, len(b.events), err)
				continue
			}
			b.seqs = seqs[i : i+len(b.events)]
			i += len(b.events)
		}
		j.root.Send(j.self, &pb.Persisted{Group: j.box.put(p.batches)})
		// After the post: the owner takes these events before anything
		// an answer below leads to.
		for _, b := range p.batches {
			if b.durable != nil {
				b.durable(b.seqs, b.err)
			}
		}
		j.pending.Add(-int64(len(p.batches)))
	}
}

func (j *journal) flush() {
	j.mu.Lock()
	batches := j.queue
	j.queue = nil
	j.mu.Unlock()
	if len(batches) == 0 {
		return
	}
	// A batch that fails to encode fails alone; the others go out. The
	// entries of all are encoded into one slice, their payloads into one
	// buffer, both reused once the append is durable.
	// A batch's archive record is made before its events are sized: it
	// marks their completion archived.
	n, total := 0, 0
	sizes, archives := j.sizes[:0], j.archives[:0]
	for _, b := range batches {
		var archive *wal.ArchiveRecord
		if b.archive != nil {
			archive = b.archive()
		}
		archives = append(archives, archive)
		n += len(b.events)
		for _, e := range b.events {
			sizes = append(sizes, pb.EventSize(e))
			total += sizes[len(sizes)-1]
		}
	}
	j.sizes = sizes
	bufs := j.buffers(total, n)
	buf, entries := bufs.payloads, bufs.entries
	ok := make([]*batch, 0, len(batches))
	for i, b := range batches {
		archive := archives[i]
		first := len(entries)
		own := sizes[:len(b.events)]
		sizes = sizes[len(b.events):]
		var rest []byte
		entries, rest, b.err = encodeEventsInto(j.owner, b.events, own, buf, entries)
		if b.err != nil {
			for _, sz := range own {
				buf = buf[sz:]
			}
			continue
		}
		buf = rest
		if len(entries) > first {
			entries[len(entries)-1].Archive = archive
		}
		ok = append(ok, b)
	}
	wait := func() ([]uint64, error) { return nil, nil }
	if len(entries) > 0 {
		wait = j.log.AppendAsync(entries...)
	}
	for _, b := range batches {
		if b.queued != nil {
			b.queued(b.err)
		}
	}
	clear(archives)
	j.archives = archives
	bufs.entries = entries // the same array: it had room for all
	j.inflight <- pending{batches: batches, ok: ok, wait: wait, buffers: bufs}
}

// encodeEvent turns an event into a WAL entry of owner.
func encodeEvent(owner string, e *pb.Event) (wal.Entry, error) {
	return encodeInto(make([]byte, pb.EventSize(e)), owner, e)
}

// encodeEvents appends the WAL entries of owner's events to ents. Their
// payloads share one buffer, allocated once: the WAL is done with a
// payload once its append is durable. On an error ents is returned as it
// was.
func encodeEvents(owner string, events []*pb.Event, ents []wal.Entry) ([]wal.Entry, error) {
	if len(events) == 1 {
		ent, err := encodeEvent(owner, events[0])
		if err != nil {
			return ents, err
		}
		return append(ents, ent), nil
	}
	sizes := make([]int, len(events))
	total := 0
	for i, e := range events {
		sizes[i] = pb.EventSize(e)
		total += sizes[i]
	}
	ents, _, err := encodeEventsInto(owner, events, sizes, make([]byte, total), ents)
	return ents, err
}

// encodeEventsInto is encodeEvents with the payloads written back to back
// at the start of buf, event i's sizes[i] (pb.EventSize) bytes; it returns
// the rest of buf. On an error ents is returned as it was.
func encodeEventsInto(owner string, events []*pb.Event, sizes []int, buf []byte, ents []wal.Entry) ([]wal.Entry, []byte, error) {
	first := len(ents)
	ents = slices.Grow(ents, len(events))
	for i, e := range events {
		n := sizes[i]
		ent, err := encodeInto(buf[:n:n], owner, e)
		if err != nil {
			clear(ents[first:])
			return ents[:first], buf, err
		}
		buf = buf[n:]
		ents = append(ents, ent)
	}
	return ents, buf, nil
}

// encodeInto encodes e into buf, exactly pb.EventSize(e) bytes, which
// becomes the entry's payload.
func encodeInto(buf []byte, owner string, e *pb.Event) (wal.Entry, error) {
	kind, err := pb.MarshalEventTo(buf, e)
	if err != nil {
		return wal.Entry{}, fmt.Errorf("%s: encode %s: %w", owner, eventType(e), err)
	}
	_, intent := e.Body.(*pb.Event_LlmRequestStarted)
	return wal.Entry{Time: timeOf(e.At), Type: kind, Owner: owner, Intent: intent, Closes: closes(e), Payload: buf}, nil
}

// closes is the request intent e closes, 0 for none: an answer or a
// failure closes its request in the transaction that makes it durable
// (intent, then commit), so no commit of its own waits for a writer.
func closes(e *pb.Event) uint64 {
	switch x := e.Body.(type) {
	case *pb.Event_LlmResponseReceived:
		return x.LlmResponseReceived.RequestSeq
	case *pb.Event_LlmRequestFailed:
		return x.LlmRequestFailed.RequestSeq
	}
	return 0
}

// decodeEvent reads a WAL entry back; an entry that does not decode is an
// error naming its sequence number, never skipped.
func decodeEvent(ent wal.Entry) (*pb.Event, error) {
	var e pb.Event
	if err := proto.Unmarshal(ent.Payload, &e); err != nil {
		return nil, fmt.Errorf("wal entry %d (%s, owner %s): decode: %w", ent.Seq, ent.Type, ent.Owner, err)
	}
	if e.Body == nil {
		return nil, fmt.Errorf("wal entry %d (%s, owner %s): unknown event type", ent.Seq, ent.Type, ent.Owner)
	}
	return &e, nil
}

// eventType names an event by its oneof field, e.g. "task_submitted".
func eventType(e *pb.Event) string {
	if e == nil || e.Body == nil {
		return "unknown"
	}
	fd := e.ProtoReflect().WhichOneof(e.ProtoReflect().Descriptor().Oneofs().ByName("body"))
	if fd == nil {
		return "unknown"
	}
	return string(fd.Name())
}

// applyPersisted applies a delivered group of batches in order and runs
// their continuations. Events at or below *last were already replayed
// (after a restart) and are skipped. It returns the events of the batches
// that were written.
func (d *desks) applyPersisted(owner string, last *uint64, m *pb.Persisted, apply func(*pb.Event) error) []*pb.Event {
	return d.applyBatches(owner, last, d.desk(owner).box.take(m.Group), apply, true)
}

// applyLeft applies what owner's journal delivered and its stopping actor
// will not take: the pb.Persisted messages still in its mailbox are
// dropped with it, and the live state would lag the WAL it wrote (a
// checkpoint or a look at the state after the stop would miss them).
// Call it after the journal is closed. The batches' continuations do not
// run: whoever waits for them is told fano is stopping.
func (d *desks) applyLeft(owner string, last *uint64, apply func(*pb.Event) error) {
	for _, group := range d.desk(owner).box.takeAll() {
		d.applyBatches(owner, last, group, apply, false)
	}
}

func (d *desks) applyBatches(owner string, last *uint64, batches []*batch, apply func(*pb.Event) error, then bool) []*pb.Event {
	var written []*pb.Event
	for _, b := range batches {
		if b.err == nil {
			written = append(written, b.events...)
			for i, e := range b.events {
				if b.seqs[i] <= *last {
					continue
				}
				if err := apply(e); err != nil {
					// Apply refuses only events that do not fit the state
					// (e.g. for a task it does not know); the event stays
					// in the WAL and verify reports it.
					d.logger.Error().Err(err).Str("event", "actors."+owner+".apply_failed").Uint64("seq", b.seqs[i]).Msg("apply")
				}
				*last = b.seqs[i]
				d.notices.applied(owner, e)
			}
		}
		if then && b.then != nil {
			b.then(b.seqs, b.err)
		}
	}
	return written
}
