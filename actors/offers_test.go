package actors

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/modules/probe"
	"fano/pb"
)

// openOffers reads a module host's open offers under its desk guard.
func openOffers(b *bundle, module string) int {
	g := &b.sys.desks.desk(moduleOwner(module)).guard
	g.Lock()
	defer g.Unlock()
	return b.sys.moduleOffers[module].len()
}

// An offer leaves the module host's set once its task ended, done or
// failed (the module stops proposing it): over weeks of proposals the set
// holds the open tasks, not every task ever proposed.
func TestOffersLeaveWhenTheirTasksEnd(t *testing.T) {
	for _, failing := range []bool{false, true} {
		name := map[bool]string{false: "done", true: "failed"}[failing]
		t.Run(name, func(t *testing.T) {
			b := setup(t, setupOpts{probe: probe.Config{Questions: questions(3), Turns: 1}})
			if failing {
				b.opts.ValidationRetries = -1
				b.sims[0].Refuse(func(gateway.Request) (string, bool) { return "Sorry, I can't help with that.", true })
			}
			b.start()
			// The module's end events, applied: the host forgets an offer
			// in the same turn, under the desk guard openOffers takes.
			for range 3 {
				b.waitEvent("the module's end of a task", func(n Notice) bool {
					me := n.Event.GetModuleEvent()
					return n.Owner == moduleOwner(probe.Name) && (me.GetType() == "question_done" || me.GetType() == "question_failed")
				})
			}
			// A proposal round after the ends, then a barrier behind it:
			// the ended tasks are not offered again.
			b.sys.tickModules(&pb.Tick{Now: nanos(b.clock.Now())})
			_, err := request[*pb.BarrierReply](b.sys.asks, context.Background(), b.sys.modulePIDs[probe.Name], &pb.Barrier{})
			require.NoError(t, err)
			assert.Zero(t, openOffers(b, probe.Name), "offers of ended tasks")
		})
	}
}
