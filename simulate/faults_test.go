package simulate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultScheduleOverAFortnight(t *testing.T) {
	s := DefaultSchedule()
	faults, err := s.Expand(Epoch, 14, []string{"gemini", "chatgpt", "claude", "openrouter-sim"})
	require.NoError(t, err)
	count := map[string]int{}
	var days = map[string][]int{}
	for _, f := range faults {
		count[f.Kind]++
		days[f.Kind] = append(days[f.Kind], int(f.Start.Sub(Epoch)/(24*time.Hour))+1)
	}
	require.Equal(t, 14*4, count[KindBrowserCrash], "a browser crash every 6 h")
	require.Equal(t, []int{5}, days[KindLoginExpired])
	require.Equal(t, []int{6}, days[KindLogin])
	require.Equal(t, 14, count[KindStorm], "a 429 storm daily")
	require.Equal(t, []int{3}, days[KindTransient])
	require.Equal(t, 14, count[KindHang], "a hang every day")
	require.Equal(t, 14, count[KindRestart], "a restart daily")
	require.Equal(t, []int{9}, days[KindKill])
	require.Equal(t, []int{11}, days[KindDiskFull])
	for _, f := range faults {
		if f.Kind == KindDiskFull {
			require.Equal(t, time.Hour, f.End.Sub(f.Start), "an hour of full disk")
		}
		if f.Kind == KindTransient {
			require.InDelta(t, 0.2, f.Rate, 1e-9)
			require.Equal(t, []string{"chatgpt", "claude", "gemini", "openrouter-sim"}, f.Backends)
		}
		if f.Kind == KindLoginExpired {
			require.Equal(t, []string{"claude"}, f.Backends, "@2 is the second backend by name")
		}
	}
	require.Equal(t, 10, s.SeedsPerDay)
}

func TestScheduleErrorsNameLineAndField(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"faults:\n  - kind: hang\n    backend: x\n", "f.yaml:2: faults[0].for: hang lasts a period"},
		{"faults:\n  - kind: hang\n    for: 5m\n", "f.yaml:2: faults[0].backend: hang needs a backend"},
		{"faults:\n  - kind: restart\n    backend: x\n", "f.yaml:2: faults[0].backend: restart is a fault of fano itself"},
		{"faults:\n  - kind: kill\n  - kind: melt\n", "f.yaml:3: faults[1].kind: unknown kind \"melt\""},
		{"faults:\n  - kind: kill\n    at: \"25:00\"\n", "f.yaml:2: faults[0].at: \"25:00\": a time of day as HH:MM"},
		{"faults:\n  - kind: transient\n    backend: all\n    for: 1h\n    rate: 1.5\n", "f.yaml:2: faults[0].rate: 1.5"},
		{"faults:\n  - kind: hang\n    backend: all\n    for: 7h\n    every: 6h\n", "f.yaml:2: faults[0].for: 7h is not shorter than every"},
		{"faults:\n  - kind: kill\n    day: -1\n", "f.yaml:2: faults[0].day: -1"},
		{"faults:\n  - kind: kill\n    colour: red\n", "field colour not found"},
		{"seeds_per_day: -2\n", "f.yaml:1: seeds_per_day: -2 is negative"},
	}
	for _, c := range cases {
		_, err := ParseSchedule("f.yaml", []byte(c.yaml))
		require.Error(t, err, c.yaml)
		require.Contains(t, err.Error(), c.want, c.yaml)
	}
	s, err := ParseSchedule("f.yaml", []byte("faults:\n  - kind: hang\n    backend: nosuch\n    for: 5m\n"))
	require.NoError(t, err)
	_, err = s.Expand(Epoch, 1, []string{"a"})
	require.ErrorContains(t, err, "f.yaml:2: backend: \"nosuch\" is not an enabled backend")
}

// The health monitor's disk reading follows the schedule at the virtual
// now, start included and end excluded, whatever the driver has acted on.
func TestDiskFreeFollowsTheSchedule(t *testing.T) {
	s := &Schedule{Name: "test", Entries: []Entry{{Kind: KindDiskFull, Day: 2, At: 2 * time.Hour, For: time.Hour}}}
	faults, err := s.Expand(Epoch, 3, nil)
	require.NoError(t, err)
	d := &driver{clock: NewClock(Epoch), faults: faults}
	start := Epoch.Add(26 * time.Hour)
	for at, full := range map[time.Time]bool{
		start.Add(-time.Nanosecond):              false,
		start:                                    true,
		start.Add(time.Hour - time.Nanosecond):   true,
		start.Add(time.Hour):                     false,
		Epoch.Add(2 * time.Hour):                 false, // day 1
		Epoch.Add(50*time.Hour + 30*time.Minute): false, // day 3
	} {
		require.Equal(t, full, d.diskFullAt(at), "at %s", at)
	}
	d.clock.AdvanceTo(start.Add(30 * time.Minute))
	free, err := d.diskFree("")
	require.NoError(t, err)
	require.Zero(t, free, "the driver has not acted on the fault: the schedule says full")
}
