package browser

import (
	"sync"
	"sync/atomic"

	"github.com/playwright-community/playwright-go"
)

// closedPages follows pages' close events ourselves: playwright-go's
// Page.IsClosed reads a field that its connection goroutine writes without
// synchronisation, a data race when a browser dies under a running request.
// The close handler runs on that goroutine and stores into an atomic.
var closedPages sync.Map // playwright.Page -> *atomic.Bool

// watchClose starts following p's close event (idempotent) and returns
// its flag.
func watchClose(p playwright.Page) *atomic.Bool {
	v, loaded := closedPages.LoadOrStore(p, new(atomic.Bool))
	f := v.(*atomic.Bool)
	if !loaded {
		p.OnClose(func(playwright.Page) { f.Store(true) })
	}
	return f
}

// isClosed reports whether p was closed since it was first watched (every
// page fano uses is watched from when it is opened or adopted).
func isClosed(p playwright.Page) bool { return watchClose(p).Load() }

// forget stops following p (it was dropped).
func forget(p playwright.Page) { closedPages.Delete(p) }
