package clean

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Answers in the style of each chat service (the openers and closers are
// those the services use, as the simulator reproduces them), and what
// must remain of them.
func TestCleanStripsEachServicesFiller(t *testing.T) {
	cases := []struct {
		name, in, want string
		removed        int
	}{
		{
			name: "chatgpt",
			in: "## The size of the Fano plane\n\nGreat question! This section introduces **the size of the Fano plane**. The Fano plane has exactly $7$ points and $7$ lines.\n\n" +
				"**Incidence:**\n- Every line contains exactly 3 points.\n- Every point lies on exactly 3 lines.\n\n" +
				"A question this leaves open: which properties are forced by the count? Want me to turn this into a short proof sketch?\n",
			want: "## The size of the Fano plane\n\nThis section introduces **the size of the Fano plane**. The Fano plane has exactly $7$ points and $7$ lines.\n\n" +
				"**Incidence:**\n- Every line contains exactly 3 points.\n- Every point lies on exactly 3 lines.\n\n" +
				"A question this leaves open: which properties are forced by the count?",
			removed: 2,
		},
		{
			name: "chatgpt sure",
			in:   "Sure — here's a structured look at it. PSL(2,7) has order 168.\n\nIf you'd like, I can work through a concrete example next.",
			want: "PSL(2,7) has order 168.", removed: 2,
		},
		{
			name: "gemini",
			in: "Here's a breakdown of the key ideas. We now turn to the Heawood graph. It has 14 vertices.\n\n" +
				"Additionally, the Fano plane is self-dual.\n\nI can also compare this with the situation in other finite geometries. Would you like to explore how this generalises to planes of higher order?",
			want:    "We now turn to the Heawood graph. It has 14 vertices.\n\nAdditionally, the Fano plane is self-dual.",
			removed: 3,
		},
		{
			name:    "gemini break down",
			in:      "Let's break this down. The Fano plane is $\\mathrm{PG}(2,2)$.\nLet me know which direction you'd like to take this.",
			want:    "The Fano plane is $\\mathrm{PG}(2,2)$.",
			removed: 2,
		},
		{
			name: "claude",
			in: "I'll take this in steps. A projective plane of order $n$ has $n^2+n+1$ points.\n\n" +
				"It follows by counting. I'm fairly confident in the statements above, but the references are worth double-checking.",
			want:    "A projective plane of order $n$ has $n^2+n+1$ points.\n\nIt follows by counting.",
			removed: 2,
		},
		{
			name:    "claude caveat",
			in:      "This is a nice question, and the answer has a few layers. There is no plane of order 6.\n\nOne caveat: I'd want to check the edge cases before relying on this in a proof.",
			want:    "There is no plane of order 6.",
			removed: 2,
		},
		{
			name:    "comment answer",
			in:      "Thank you for the comment. I have revised the passage on duality accordingly. The dual of a projective plane is a projective plane.",
			want:    "The dual of a projective plane is a projective plane.",
			removed: 2,
		},
		{
			name: "content kept",
			in: "Certainly the most striking fact is that the automorphism group of the Fano plane, $\\mathrm{PSL}(2,7)$, acts transitively on flags, and this property, together with the order $168$, determines a great deal of the plane's structure and its relation to the Klein quartic.\n\n" +
				"Would you like a different proof? Then consider the dual plane.",
			want: "Certainly the most striking fact is that the automorphism group of the Fano plane, $\\mathrm{PSL}(2,7)$, acts transitively on flags, and this property, together with the order $168$, determines a great deal of the plane's structure and its relation to the Klein quartic.\n\n" +
				"Would you like a different proof? Then consider the dual plane.",
		},
	}
	c := Default()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, removed := c.Clean(tc.in)
			assert.Equal(t, tc.want, got)
			assert.Len(t, removed, tc.removed, "%+v", removed)
		})
	}
}

func TestSplitSentences(t *testing.T) {
	assert.Equal(t, []string{"It is PG(2,2).", "Its order is 2.5 times… no!", "Really?", "**Yes.**", "Done"},
		SplitSentences("It is PG(2,2). Its order is 2.5 times… no! Really? **Yes.** Done"))
}

func TestLoadOverrideAndBadFile(t *testing.T) {
	dir := t.TempDir()
	c, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, "embedded "+FileName, c.Source())

	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("# mine\nopener behold[.!]\n"), 0o644))
	c, err = Load(dir)
	require.NoError(t, err)
	got, _ := c.Clean("Behold! Seven points.\n\nGreat question!")
	assert.Equal(t, "Seven points.\n\nGreat question!", got, "the override replaces the embedded patterns")

	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("opener ok\ncloser (unclosed\n"), 0o644))
	_, err = Load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), FileName+":2")

	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("middle x\n"), 0o644))
	_, err = Load(dir)
	require.ErrorContains(t, err, `:1: unknown kind "middle"`)
	assert.True(t, strings.Contains(err.Error(), dir))
}
