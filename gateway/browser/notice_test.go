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
		"a few minutes":        3 * time.Minute,
		"several hours":        5 * time.Hour,
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

// parseReset reads the reset times sites print, with dates, weekdays,
// "tomorrow", durations and zones (examples from the notes' sources).
func TestParseReset(t *testing.T) {
	la := time.FixedZone("PDT", -7*3600)
	// Monday 23 November 2026, 20:30 in the site's (browser's) zone.
	now := time.Date(2026, 11, 23, 20, 30, 0, 0, la)
	mdt := time.FixedZone("MDT", -6*3600)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"7:13 PM", time.Date(2026, 11, 24, 19, 13, 0, 0, la)},                                 // ChatGPT free plan (U7): passed today, so tomorrow
		{"9:30 PM", time.Date(2026, 11, 23, 21, 30, 0, 0, la)},                                 // Claude (U7)
		{"3 PM", time.Date(2026, 11, 24, 15, 0, 0, 0, la)},                                     // Claude 2023 (I8)
		{"Jul 19, 3:12 PM", time.Date(2027, 7, 19, 15, 12, 0, 0, la)},                          // Gemini (U7): July passed this year
		{"May 9, 8:08 am", time.Date(2027, 5, 9, 8, 8, 0, 0, la)},                              // Gemini (U7)
		{"Nov 24, 12:24 AM", time.Date(2026, 11, 24, 0, 24, 0, 0, la)},                         // like "Sep 22, 12:24 AM" (U7)
		{"5:00 PM MDT on Nov 25", time.Date(2026, 11, 25, 17, 0, 0, 0, mdt)},                   // Claude 5-hour limit (U6) with its zone
		{"5:00 PM MDT on Sep 9", time.Date(2027, 9, 9, 17, 0, 0, 0, mdt)},                      // the same, date passed
		{"on Dec 2", time.Date(2026, 12, 2, 0, 0, 0, 0, la)},                                   // "Your limit resets on {date}" (U5)
		{"on December 2, 2026", time.Date(2026, 12, 2, 0, 0, 0, 0, la)},                        // with a year
		{"2 December 2026 at 09:00", time.Date(2026, 12, 2, 9, 0, 0, 0, la)},                   // day first
		{"2026-12-02 09:00 UTC", time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)},                 // ISO with zone
		{"in 4 hours", now.Add(4 * time.Hour)},                                                 // "Your limit resets {relative_time}" (U5)
		{"tomorrow at 9 AM", time.Date(2026, 11, 24, 9, 0, 0, 0, la)},                          // Gemini
		{"tomorrow", time.Date(2026, 11, 24, 0, 0, 0, 0, la)},                                  // no clock: the day's start
		{"Thu 9:00 AM", time.Date(2026, 11, 26, 9, 0, 0, 0, la)},                               // weekday
		{"Monday 10 PM", time.Date(2026, 11, 23, 22, 0, 0, 0, la)},                             // today's weekday, later
		{"3:45 PM (GMT+2)", time.Date(2026, 11, 24, 15, 45, 0, 0, time.FixedZone("", 2*3600))}, // offset zone
		{"11:00 PM UTC-07:00", time.Date(2026, 11, 23, 23, 0, 0, 0, la)},
		{"5:00 PM XYZ", time.Date(2026, 11, 24, 17, 0, 0, 0, la)}, // unknown zone: the site's
	} {
		got, ok := parseReset(tc.in, now)
		if assert.True(t, ok, tc.in) {
			assert.True(t, tc.want.Equal(got), "%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"later", "next week", "Feb 30, 3 PM", "19", "13 PM", ""} {
		_, ok := parseReset(in, now)
		assert.False(t, ok, in)
	}
}

// The built-in profiles classify the notices of their sites: kind, time,
// and "not a limit" for other messages in the same containers.
func TestBuiltinNotices(t *testing.T) {
	builtin, err := Builtin()
	require.NoError(t, err)
	now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.Local)
	at := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2026, mo, d, h, mi, 0, 0, time.Local) }
	for _, tc := range []struct {
		profile, text string
		kind          string
		until         time.Time
		after         time.Duration
		model         string
	}{
		// ChatGPT
		{"chatgpt", "You’ve hit the Free plan limit for GPT-5. Responses will use another model until your limit resets after 7:13 PM.", NoticeDegraded, at(11, 23, 19, 13), 0, "GPT-5"},
		{"chatgpt", "You’ve hit the Free plan limit for GPT-4o. You need GPT-4o to continue this chat because it has images. Your limit resets after 8:33 PM.", NoticeCap, at(11, 23, 20, 33), 0, ""},
		{"chatgpt", "You've reached the current usage cap for GPT-4. You can continue with the default model now, or try again after 7:06 PM.", NoticeCap, at(11, 23, 19, 6), 0, ""},
		{"chatgpt", "You've reached our limit of messages per hour. Please try again later.", NoticeCap, time.Time{}, 0, ""},
		{"chatgpt", "Too many requests. You're making requests too quickly. We've temporarily limited access to your conversations to protect your data. Please wait a few minutes before trying again. Got it", NoticeRate, time.Time{}, 3 * time.Minute, ""},
		{"chatgpt", "Too many requests. You're making requests too quickly. Please try again later.", NoticeRate, time.Time{}, 0, ""},
		{"chatgpt", "You've reached the current usage cap for GPT-5. Please try again in 2 hours and 10 minutes.", NoticeRate, time.Time{}, 130 * time.Minute, ""},
		{"chatgpt", "Something went wrong while generating the response. If this issue persists please contact us.", NoticeTransient, time.Time{}, 0, ""},
		{"chatgpt", "Network connection lost. Attempting to reconnect…", NoticeTransient, time.Time{}, 0, ""},
		// Claude
		{"claude", "You’ve hit your limit for Claude messages. Limits will reset at 9:30 AM. View your usage details.", NoticeCap, at(11, 24, 9, 30), 0, ""},
		{"claude", "You’ve hit your limit for Claude messages. Limits will reset at 1:00 AM. For higher limits, explore our Pro plan.", NoticeCap, at(11, 24, 1, 0), 0, ""},
		{"claude", "Need more usage? You've reached your 5-hour limit. It resets at 5:00 PM MDT on Nov 24.", NoticeCap, time.Date(2026, 11, 24, 17, 0, 0, 0, time.FixedZone("MDT", -6*3600)), 0, ""},
		{"claude", "You've hit your limit for Claude messages. Your limit resets in 3 hours.", NoticeCap, now.Add(3 * time.Hour), 0, ""},
		{"claude", "You've hit your limit for Claude messages. Your limit resets on Dec 1.", NoticeCap, at(12, 1, 0, 0), 0, ""},
		{"claude", "You are out of free messages until 4 PM", NoticeCap, at(11, 23, 16, 0), 0, ""},
		{"claude", "You've reached your weekly limit for thinking messages. Please try again next week.", NoticeCap, time.Time{}, 0, ""},
		{"claude", "Looks like you have too many chats going. Please close a tab to continue.", NoticeTransient, time.Time{}, 0, ""},
		{"claude", "Due to unexpected capacity constraints, Claude is unable to respond to your message. Please try again soon.", NoticeTransient, time.Time{}, 0, ""},
		{"claude", "Copied to clipboard", NoticeTransient, time.Time{}, 0, ""},
		// Gemini
		{"gemini", "You’ve reached your limit on 2.5 Pro until Jul 19, 3:12 PM. Try Google AI Pro for higher limits.", NoticeCap, time.Date(2027, 7, 19, 15, 12, 0, 0, time.Local), 0, ""},
		{"gemini", "You've reached your limit on 2.5 Pro (experimental) until Nov 24, 8:08 am. Try Gemini Advanced for higher limits.", NoticeCap, at(11, 24, 8, 8), 0, ""},
		{"gemini", "You’ve reached your limit on 3 Pro until Nov 25, 12:24 AM.", NoticeCap, at(11, 25, 0, 24), 0, ""},
		{"gemini", "You've reached your limit. Your limit resets tomorrow at 9 AM.", NoticeCap, at(11, 24, 9, 0), 0, ""},
		{"gemini", "You've reached your limit for Deep Think. Try again in 27 minutes.", NoticeRate, time.Time{}, 27 * time.Minute, ""},
		{"gemini", "Something went wrong. Try again later.", NoticeTransient, time.Time{}, 0, ""},
	} {
		n := builtin[tc.profile].ClassifyNotice(tc.text, now)
		msg := tc.profile + ": " + tc.text
		assert.Equal(t, tc.kind, n.Kind, msg)
		assert.True(t, tc.until.Equal(n.Until), "%s: until %s, want %s", msg, n.Until, tc.until)
		want := tc.after
		if !tc.until.IsZero() {
			want = tc.until.Sub(now)
		}
		assert.Equal(t, want, n.RetryAfter, msg)
		assert.Equal(t, tc.model, n.Model, msg)
		assert.Contains(t, n.Reason, tc.text[:15], msg)
	}
}
