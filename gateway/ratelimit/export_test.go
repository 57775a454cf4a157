package ratelimit

import "context"

// SetHooks lets the simulation benchmark account for waiters: queued runs
// when a Wait joins the queue, granted when a queued waiter is granted,
// before it wakes. Test builds only.
func SetHooks(l *Limiter, queued, granted func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onQueue = func(context.Context) { queued() }
	l.onGrant = granted
}

// PaceByRequestsOnly makes l ignore the token budget it learns: the
// baseline of the tokens-per-minute scenario, as fano paced before it
// read the -tokens headers.
func PaceByRequestsOnly(l *Limiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.blindTokens = true
}
