package allocator

import "time"

// Grants: a slot handed out by Choose reserves one request of its
// backend's budget for its task until the task charges it (DecideUse) or
// the clock moves on. Without it every task given a slot at one instant
// raced the others for the last requests of the hour, and which of them
// won depended on goroutine timing: the losers paused for quota right
// after their start, and a simulated run of one seed told different
// stories. On a real clock instants rarely repeat, so a grant only
// matters between decisions taken at the same moment.

// grant is a reservation: the instant of the grant and whether it is for
// deep mode.
type grant struct {
	at   int64
	deep bool
}

// Grant reserves one request of backend for task at now (call it when the
// task gets a slot of backend).
func (b *Book) Grant(task, backend string, deep bool, now time.Time) {
	q, ok := b.backends[backend]
	if !ok || task == "" {
		return
	}
	if q.grants == nil {
		q.grants = map[string]grant{}
	}
	q.grants[task] = grant{at: now.UnixNano(), deep: deep}
}

// reserved counts the grants of q at now (normal and deep), forgetting
// those of earlier instants.
func (q *quota) reserved(now time.Time) (n, deep int) {
	at := now.UnixNano()
	for task, g := range q.grants {
		if g.at != at {
			delete(q.grants, task)
			continue
		}
		n++
		if g.deep {
			deep++
		}
	}
	return n, deep
}

// charge ends task's grant on q: it is charging now.
func (q *quota) charge(task string) { delete(q.grants, task) }
