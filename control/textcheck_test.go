package control

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckText(t *testing.T) {
	require.NoError(t, CheckText("text", "Why does the Fano plane have 7 points?\n\tIndented.", 100))
	for _, bad := range []string{"", "   \n", "nul\x00inside", "esc \x1b[31m red", "bell\a", "line\u2028sep", string([]byte{0xff, 0xfe}), strings.Repeat("x", 101)} {
		err := CheckText("text", bad, 100)
		require.Error(t, err, "%q", bad)
		require.ErrorContains(t, err, `"text"`)
	}
}

func TestRecentTextsCountOncePerMinute(t *testing.T) {
	r := newRecentTexts(time.Minute)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	key := commentKey("s1", "Please  cite\nthe source.")
	require.False(t, r.seen(key, t0))
	r.remember(key, t0)
	require.True(t, r.seen(commentKey("s1", "Please cite the source."), t0.Add(59*time.Second)), "white space does not make it new")
	require.False(t, r.seen(commentKey("s2", "Please cite the source."), t0.Add(time.Second)), "another section")
	require.False(t, r.seen(key, t0.Add(time.Minute)), "a minute later it is a new comment")
}
