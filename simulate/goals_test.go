package simulate

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func goalsOf(r *Report) map[string]Goal {
	r.CheckGoals()
	out := map[string]Goal{}
	for _, g := range r.Goals {
		out[g.Name] = g
	}
	return out
}

func day(n, blessed int, outage bool, used int, usable float64, workHours int) DayReport {
	return DayReport{Day: n, Blessed: blessed, Outage: outage, WorkHours: workHours, WorkHoursBy: map[string]int{"a": workHours, "b": 3},
		QuotaUsed: map[string]int{"a": used, "b": 1}, Usable: map[string]float64{"a": usable, "b": 100}}
}

func TestGoalsOnAReport(t *testing.T) {
	r := &Report{Days: []DayReport{
		day(1, 20, false, 95, 100, 24),
		day(2, 18, false, 96, 100, 24), // within 10 %
		day(3, 5, true, 40, 100, 24),   // an outage day: not held to day 1 ...
		day(4, 19, false, 50, 100, 10), // ... the next day is; work not waiting all day: quota not checked
	}}
	g := goalsOf(r)
	require.True(t, g[goalBlessed].OK, g[goalBlessed].Detail)
	require.True(t, g[goalRecover].OK, g[goalRecover].Detail)
	require.False(t, g[goalQuota].OK, "day 3 had work all day and used 40 %%")
	require.Contains(t, g[goalQuota].Detail, "day 3 a: 40.0 %")
	require.NotContains(t, g[goalQuota].Detail, " b:", "b had no work waiting all day: its 1 %% is not held against it")

	r.Days[2].Outage = false
	r.Days[2].Blessed = 17 // 15 % below day 1
	r.Days[2].QuotaUsed["a"] = 95
	g = goalsOf(r)
	require.False(t, g[goalBlessed].OK)
	require.Contains(t, g[goalBlessed].Detail, "day 3: 17")
	require.True(t, g[goalQuota].OK, g[goalQuota].Detail)

	r.Days[2].Outage, r.Days[3].Blessed = true, 12
	g = goalsOf(r)
	require.False(t, g[goalRecover].OK, "the day after an outage is not back within 10 %%")
	require.True(t, g[goalBlessed].OK, "the day after an outage is held by the recovery goal: %s", g[goalBlessed].Detail)
	r.Days[3].Blessed = 31 // clears the outage's backlog: above day 1 is recovered
	g = goalsOf(r)
	require.True(t, g[goalRecover].OK, g[goalRecover].Detail)
	require.True(t, g[goalBlessed].OK, g[goalBlessed].Detail)
	r.Days = append(r.Days, day(5, 23, false, 50, 100, 10)) // an ordinary day above 10 %
	require.False(t, goalsOf(r)[goalBlessed].OK)
	r.Days = r.Days[:4]

	r.Alerts = []Alert{{Day: 2, Kind: "backend_login", State: "login", Action: true}}
	require.True(t, goalsOf(r)[goalHuman].OK, "a login alert is the one allowed")
	r.Alerts = append(r.Alerts, Alert{Day: 3, Kind: "backend_credentials", State: "credentials", Action: true})
	require.False(t, goalsOf(r)[goalHuman].OK)

	r.Failed = []FailedTask{{Day: 2, Task: "t1", Reason: "validation: no insights", BackendLevel: false}}
	require.True(t, goalsOf(r)[goalFailed].OK)
	r.Failed = append(r.Failed, FailedTask{Day: 2, Task: "t2", Reason: "chatgpt: rate limited", BackendLevel: backendLevel("chatgpt: rate limited")})
	require.False(t, goalsOf(r)[goalFailed].OK)

	r.Runtime.Days = []RuntimeDay{{Day: 1, HeapMB: 30}, {Day: 2, HeapMB: 20, Goroutines: 20}, {Day: 3, HeapMB: 24, Goroutines: 22}}
	require.True(t, goalsOf(r)[goalFlat].OK)
	r.Runtime.Days = append(r.Runtime.Days, RuntimeDay{Day: 4, HeapMB: 40, Goroutines: 20})
	require.False(t, goalsOf(r)[goalFlat].OK)

	// The heap may grow with the output (the document, the blessed
	// insights), heapPerOutputMB per MB, and with nothing else.
	r.Runtime.Days = []RuntimeDay{{Day: 1, HeapMB: 30}, {Day: 2, HeapMB: 20, Goroutines: 20, OutputMB: 1},
		{Day: 3, HeapMB: 24, Goroutines: 22, OutputMB: 2}, {Day: 4, HeapMB: 40, Goroutines: 20, OutputMB: 6}}
	require.True(t, goalsOf(r)[goalFlat].OK, goalsOf(r)[goalFlat].Detail) // limit 25+4+3×5 = 44
	r.Runtime.Days[3].OutputMB = 3
	flat := goalsOf(r)[goalFlat]
	require.False(t, flat.OK) // limit 25+4+3×2 = 35
	require.Contains(t, flat.Detail, "day 4 heap 40.0 MB above 35.0")
}

func TestDeterministicLeavesOutRuntime(t *testing.T) {
	a := &Report{Seed: 1, Days: []DayReport{day(1, 3, false, 1, 2, 0)}}
	b := *a
	a.Runtime.WallSeconds, b.Runtime.WallSeconds = 1, 2
	require.Equal(t, string(a.Deterministic()), string(b.Deterministic()))
	b.Days = []DayReport{day(1, 4, false, 1, 2, 0)}
	require.NotEqual(t, string(a.Deterministic()), string(b.Deterministic()))
}
