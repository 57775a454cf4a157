package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/modules/dedup"
)

// The open fact space is large, and the real duplicate checker sees its
// statements as distinct: below the borderline, so none even asks an LLM
// to confirm. The closest pairs are a template at neighbouring parameters
// and two templates at one parameter; both are checked.
func TestOpenFactsAreManyAndDistinct(t *testing.T) {
	n := OpenFactCount()
	require.Greater(t, n, 50000)
	low := dedup.DefaultConfig().BorderlineLow
	ids := map[string]bool{}
	worst, pair := 0.0, [2]string{}
	for i := 0; i < n; i++ {
		f := OpenFact(i)
		require.False(t, ids[f.ID], "id %s twice", f.ID)
		ids[f.ID] = true
		require.LessOrEqual(t, len(f.Claim), 600, f.ID)
		if i > 2000 && i%97 != 0 && i < n-50 {
			continue // the smallest parameters, the largest, and a sample between
		}
		// Every other template at the same parameter, and the same
		// template at the next three parameters.
		block := i - i%len(planeTemplates)
		var near []int
		for k := 1; k < len(planeTemplates); k++ {
			near = append(near, block+(i+k)%len(planeTemplates))
		}
		for _, j := range append(near, i+1, i+len(planeTemplates), i+2*len(planeTemplates), i+3*len(planeTemplates)) {
			if j >= n || j == i {
				continue
			}
			if s := dedup.Similarity(f.Claim, OpenFact(j).Claim); s > worst {
				worst, pair = s, [2]string{f.Claim, OpenFact(j).Claim}
			}
		}
	}
	require.Less(t, worst, low, "%q and %q", pair[0], pair[1])
	t.Logf("%d statements; closest pair %.2f: %q / %q", n, worst, pair[0], pair[1])
}

// A backend with open facts extracts new statements from each request;
// one without keeps to the built-in facts.
func TestOpenFactsExtraction(t *testing.T) {
	extract := func(open bool, prompt string) []Insight {
		b := New(Config{Name: "x", OpenFacts: open}, nil)
		resp, err := b.Send(t.Context(), gateway.Request{TaskType: "insight_extraction", Prompt: prompt})
		require.NoError(t, err)
		var items []Insight
		require.NoError(t, unmarshalAnswer(resp.Content, &items), resp.Content)
		return items
	}
	builtin := map[string]bool{}
	for _, f := range Facts() {
		builtin[f.Claim] = true
	}
	seen := map[string]bool{}
	for i := range 50 {
		items := extract(true, "Extract insights. Statement: chunk "+string(rune('a'+i%26))+num(int64(i)))
		require.Len(t, items, openFactsPerAnswer)
		for _, it := range items {
			require.False(t, builtin[it.Text], "an open backend answered a built-in fact: %s", it.Text)
			seen[it.Text] = true
		}
	}
	require.Greater(t, len(seen), 140, "150 statements drawn, nearly all new")
	for _, it := range extract(false, "Extract insights about the Fano plane.") {
		require.True(t, builtin[it.Text], it.Text)
	}

	// A revision restates the statement under review.
	r := rand.New(rand.NewPCG(1, 2))
	stmt := OpenFact(42).Claim
	for range 40 {
		var v Verdict
		require.NoError(t, unmarshalAnswer(OpenReview(gateway.Request{Prompt: "Review.\nStatement: " + stmt}, r, "api"), &v))
		if v.Verdict == "revise" {
			require.Contains(t, v.Revision, stmt[:len(stmt)-1])
		}
	}
}
