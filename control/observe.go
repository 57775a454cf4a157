package control

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"fano/pb"
	"fano/wal"
)

// Archive keys of what the panel keeps beyond the WAL's compaction.
const (
	archiveHistory = "control/history"
	archiveAlerts  = "control/alerts"
)

// journal is what the observer reads and keeps in fano's WAL.
type journal interface {
	Replay(from uint64, fn func(wal.Entry) error) error
	LastSeq() uint64
	Archive(ctx context.Context, items map[string][]byte) error
	Archived(key string) ([]byte, bool, error)
}

// observer keeps what the panel derives from fano's events: the hourly
// history, the alerts and the recent tasks' timelines. At start it reads
// what the archive kept and then the WAL (in the background); live
// events that arrive meanwhile wait, and those the WAL already held are
// counted once.
type observer struct {
	log    journal
	logger zerolog.Logger
	now    func() time.Time
	notify func(change) // alerts raised and resolved (the webhook); may be nil

	mu        sync.Mutex
	hist      *history
	alerts    *alertBook
	tl        *timelines
	replaying bool
	waiting   []*pb.Event      // live events held while the WAL is read
	replayed  map[[32]byte]int // events near the start read from the WAL, to count once
	savedAt   int64            // the hour up to which the history was archived
	stopping  bool
	complete  bool          // the WAL was read to its end: the hours are whole
	done      chan struct{} // closed when the WAL has been read

	in       chan liveNotice
	quit     chan struct{}
	loopDone chan struct{}
	lost     int // notices dropped because the queue was full (under mu)
}

// liveNotice is an applied event or a notification, as the system's
// callback hands it over.
type liveNotice struct {
	event  *pb.Event
	update *pb.StateUpdate
}

// observeQueue bounds the notices waiting for the observer: a burst of
// events larger than this loses history counts, never blocks an actor.
const observeQueue = 1 << 16

// dedupSpan is how far before the start the WAL's entries are remembered
// for matching live events: an event durable before the subscription may
// be applied (and seen live) after it.
const dedupSpan = 4096

func newObserver(log journal, now func() time.Time, logger zerolog.Logger, notify func(change)) *observer {
	o := &observer{log: log, logger: logger, now: now, notify: notify,
		hist: newHistory(), alerts: newAlertBook(), tl: newTimelines(), done: make(chan struct{}),
		in: make(chan liveNotice, observeQueue), quit: make(chan struct{}), loopDone: make(chan struct{})}
	go o.loop()
	if log == nil {
		close(o.done)
		return o
	}
	o.replaying = true
	o.loadArchive()
	return o
}

// start reads the WAL up to its end in the background; since marks the
// last seq durable before the panel subscribed.
func (o *observer) start(since uint64) {
	if o.log == nil {
		return
	}
	go func() {
		defer close(o.done)
		err := o.replay(since)
		o.mu.Lock()
		defer o.mu.Unlock()
		if err != nil && !o.stopping {
			o.logger.Warn().Err(err).Str("event", "control.panel.history_replay_failed").Msg("history: reading the WAL stopped; history and timelines start from now")
		}
		for _, e := range o.waiting {
			if k := eventKey(e); o.replayed[k] > 0 {
				o.replayed[k]--
				continue
			}
			o.applyLocked(e, true)
		}
		o.waiting, o.replayed, o.replaying = nil, nil, false
		o.archiveAlertsLocked()
		o.complete = err == nil
	}()
}

var errStopping = errors.New("the panel is stopping")

func (o *observer) replay(since uint64) error {
	o.mu.Lock()
	o.replayed = map[[32]byte]int{}
	o.mu.Unlock()
	from := o.now().Add(-historyKeep)
	return o.log.Replay(1, func(ent wal.Entry) error {
		if ent.Time.Before(from) {
			return nil
		}
		var e pb.Event
		if err := proto.Unmarshal(ent.Payload, &e); err != nil || e.Body == nil {
			return nil // the system's own recovery reports damaged entries
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.stopping {
			return errStopping
		}
		if ent.Seq+dedupSpan > since {
			o.replayed[eventKey(&e)]++
		}
		o.applyLocked(&e, false)
		return nil
	})
}

// eventKey identifies an event by its content (its time in nanoseconds
// included): the WAL's copy and the live one have the same.
func eventKey(e *pb.Event) [32]byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(e)
	return sha256.Sum256(b)
}

// offer hands a live notice over without blocking (it runs in actor
// goroutines).
func (o *observer) offer(n liveNotice) {
	select {
	case o.in <- n:
	default:
		o.mu.Lock()
		o.lost++
		o.mu.Unlock()
	}
}

// saveEvery is how often the observer looks for hours to archive.
const saveEvery = time.Minute

func (o *observer) loop() {
	defer close(o.loopDone)
	tick := time.NewTicker(saveEvery)
	defer tick.Stop()
	for {
		select {
		case n := <-o.in:
			if n.event != nil {
				o.event(n.event)
			} else if n.update != nil {
				o.update(n.update)
			}
		case <-tick.C:
			o.saveHistory()
		case <-o.quit:
			return
		}
	}
}

// event takes a live applied event.
func (o *observer) event(e *pb.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.replaying {
		o.waiting = append(o.waiting, e)
		return
	}
	o.applyLocked(e, true)
}

// applyLocked counts an event; live is false for events read from the
// WAL, whose alerts were posted when they happened.
func (o *observer) applyLocked(e *pb.Event, live bool) {
	o.hist.observe(e)
	o.tl.observe(e)
	if c := e.GetBackendConditionRecorded(); c != nil {
		at := time.Unix(0, e.GetAt()).UTC()
		if o.alerts.has("backend_"+c.GetState(), c.GetBackend(), at) {
			return // archived already
		}
		o.changed(o.alerts.observeCondition(c, at), live)
	}
}

// update takes a live notification (health alerts).
func (o *observer) update(u *pb.StateUpdate) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changed(o.alerts.observeHealth(u), true)
}

func (o *observer) changed(c *change, live bool) {
	if c == nil {
		return
	}
	if o.notify != nil && live {
		o.notify(*c)
	}
	if !o.replaying {
		o.archiveAlertsLocked()
	}
}

// archiveAlertsLocked keeps the alerts in the WAL's archive.
func (o *observer) archiveAlertsLocked() {
	if o.log == nil {
		return
	}
	data, err := json.Marshal(o.alerts.snapshot())
	if err == nil {
		err = o.log.Archive(context.Background(), map[string][]byte{archiveAlerts: data})
	}
	if err != nil {
		o.logger.Warn().Err(err).Str("event", "control.panel.alerts_archive_failed").Msg("alerts not kept in the archive")
	}
}

// loadArchive restores the history hours and alerts kept before.
func (o *observer) loadArchive() {
	if data, ok, err := o.log.Archived(archiveHistory); err == nil && ok {
		var a archivedHistory
		if json.Unmarshal(data, &a) == nil {
			o.hist.restore(a)
			o.savedAt = o.hist.archivedThrough
		}
	}
	if data, ok, err := o.log.Archived(archiveAlerts); err == nil && ok {
		var a archivedAlerts
		if json.Unmarshal(data, &a) == nil {
			o.alerts.restore(a)
		}
	}
}

// archiveGrace is how long after an hour ends its figures are archived:
// the events of its last moments are applied by then.
const archiveGrace = 2 * time.Minute

// saveHistory archives the hours that ended (at least archiveGrace ago),
// once each, and forgets hours older than the fortnight.
func (o *observer) saveHistory() {
	o.mu.Lock()
	if !o.complete {
		o.mu.Unlock()
		return
	}
	now := o.now()
	cutoff := now.Add(-archiveGrace)
	if hourOf(cutoff) <= o.savedAt {
		o.mu.Unlock()
		return
	}
	o.hist.prune(now)
	a := o.hist.closedHours(cutoff)
	o.savedAt = hourOf(cutoff)
	o.mu.Unlock()
	data, err := json.Marshal(a)
	if err == nil {
		err = o.log.Archive(context.Background(), map[string][]byte{archiveHistory: data})
	}
	if err != nil {
		o.logger.Warn().Err(err).Str("event", "control.panel.history_archive_failed").Msg("history hours not kept in the archive")
	}
}

// stop ends the WAL reading and the loop, and archives the hours that ended.
func (o *observer) stop() {
	o.mu.Lock()
	o.stopping = true
	o.mu.Unlock()
	<-o.done
	close(o.quit)
	<-o.loopDone
	o.saveHistory()
}

func (o *observer) historyView(hours int, backends []string) History {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.hist.view(o.now(), hours, backends)
	v.Complete = o.complete || o.log == nil
	v.Reading = o.replaying
	return v
}

func (o *observer) alertList(openOnly bool) Alerts {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.alerts.list(openOnly)
}

func (o *observer) timeline(id string) ([]Step, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tl.steps(id)
}
