package browser

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRelative(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"27 minutes":           27 * time.Minute,
		"1 hour and 5 minutes": 65 * time.Minute,
		"an hour":              time.Hour,
		"2h 30m":               150 * time.Minute,
		"45 sec":               45 * time.Second,
		"1 day":                24 * time.Hour,
		"3 hrs, 10 mins":       190 * time.Minute,
		"1.5 hours":            90 * time.Minute,
		"a minute":             time.Minute,
		"about 2 hours or so":  2 * time.Hour,
		"extra minute":         0, // "a" inside a word is no count
		"later":                0,
		"some time":            0,
		"0 minutes":            0,
		"":                     0,
	} {
		got, ok := parseRelative(in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, want > 0, ok, in)
	}
}

func TestUntilClock(t *testing.T) {
	// Tuesday 10 March 2026, 15:00 local.
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.Local)
	for in, want := range map[string]time.Duration{
		"3:45 PM":          45 * time.Minute,
		"3:45PM":           45 * time.Minute,
		"3:45 p.m.":        45 * time.Minute,
		"4 PM":             time.Hour,
		"4pm":              time.Hour,
		"15:30":            30 * time.Minute,
		"2:00 PM":          23 * time.Hour, // passed today: tomorrow
		"12:30 AM":         9*time.Hour + 30*time.Minute,
		"12 PM":            21 * time.Hour,
		"tomorrow at 3 PM": 24 * time.Hour,
		"Thu 9:00 AM":      42 * time.Hour,
		"Tuesday 4 PM":     time.Hour,
		"Tue 2 PM":         7*24*time.Hour - time.Hour,
	} {
		got, ok := untilClock(in, now)
		require.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"later", "15", "13 PM", "25:00", "3:75 PM", ""} {
		_, ok := untilClock(in, now)
		assert.False(t, ok, in)
	}
}

// The built-in profiles read the banners of their sites.
func TestBuiltinBannerPatterns(t *testing.T) {
	builtin, err := Builtin()
	require.NoError(t, err)
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		profile, banner string
		want            time.Duration
	}{
		{"chatgpt", "You've hit your limit. Please try again after 3:45 PM.", 45 * time.Minute},
		{"chatgpt", "You've reached the current usage cap for GPT-5. Please try again in 2 hours and 10 minutes.", 130 * time.Minute},
		{"chatgpt", "You've reached our limit of messages per hour. Please try again later.", 0},
		{"gemini", "You've reached your limit for Deep Think. Try again in 27 minutes.", 27 * time.Minute},
		{"gemini", "You've reached your limit. Your limit resets tomorrow at 9 AM.", 18 * time.Hour},
		{"gemini", "Something went wrong. Try again later.", 0},
		{"claude", "You are out of free messages until 4 PM", time.Hour},
		{"claude", "Message limit reached for Claude. Your limit resets Thu 9:00 AM.", 42 * time.Hour},
		{"claude", "You are out of free messages. Please try again later.", 0},
	} {
		got, reason := builtin[tc.profile].BannerRetry(tc.banner, now)
		assert.Equal(t, tc.want, got, "%s: %s", tc.profile, tc.banner)
		assert.Contains(t, reason, tc.banner)
	}
}
