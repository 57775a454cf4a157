package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
)

// unmarshalAnswer parses a JSON answer, unwrapping a ```json fence as a
// module would.
func unmarshalAnswer(content string, v any) error {
	s := strings.TrimSpace(content)
	if rest, ok := strings.CutPrefix(s, "```json"); ok {
		body, ok := strings.CutSuffix(strings.TrimSpace(rest), "```")
		if !ok {
			return fmt.Errorf("unterminated fence")
		}
		s = body
	}
	return json.Unmarshal([]byte(s), v)
}

var styles = []string{"chatgpt", "gemini", "claude", "api", ""}

func send(t *testing.T, b *Backend, r gateway.Request) string {
	t.Helper()
	resp, err := b.Send(context.Background(), r)
	require.NoError(t, err)
	return resp.Content
}

func claims() map[string]bool {
	m := map[string]bool{}
	for _, f := range Facts() {
		m[f.Claim] = true
	}
	return m
}

func TestInsightExtractionParses(t *testing.T) {
	known := claims()
	fenced := 0
	for _, style := range styles {
		b, _ := fakeBackend(Config{Style: style, Seed: 11})
		for i := range 30 {
			r := req(fmt.Sprint("x", i), "Insights about octonions, the Hamming code and Desarguesian planes")
			r.TaskType = "insight_extraction"
			content := send(t, b, r)
			if strings.HasPrefix(content, "```json") {
				fenced++
			}
			var items []Insight
			require.NoError(t, unmarshalAnswer(content, &items), content)
			require.GreaterOrEqual(t, len(items), 2)
			require.LessOrEqual(t, len(items), 4)
			for _, it := range items {
				assert.True(t, known[it.Text], "not a fact: %q", it.Text)
				assert.NotEmpty(t, it.Tags)
				assert.Greater(t, it.Confidence, 0.0)
				assert.LessOrEqual(t, it.Confidence, 1.0)
			}
		}
	}
	assert.Greater(t, fenced, 0, "chat styles sometimes fence JSON")
}

func TestReviewFormatsParse(t *testing.T) {
	counts := map[string]int{}
	n := 0
	for _, tt := range []string{"insight_review", "math_evaluation", "exposition_evaluation", "evaluate_source"} {
		for _, style := range styles {
			b, _ := fakeBackend(Config{Style: style, Seed: 2})
			for i := range 40 {
				r := req(fmt.Sprint("r", i), fmt.Sprintf("Review insight %d: the Fano plane is self-dual.", i))
				r.TaskType = tt
				content := send(t, b, r)
				var v Verdict
				require.NoError(t, unmarshalAnswer(content, &v), content)
				require.Contains(t, []string{"bless", "revise", "reject"}, v.Verdict)
				assert.NotEmpty(t, v.Rationale)
				assert.Equal(t, v.Verdict == "revise", v.Revision != "", "revision only with revise")
				counts[v.Verdict]++
				n++
			}
		}
	}
	bless := float64(counts["bless"]) / float64(n)
	assert.InDelta(t, 0.75, bless, 0.08, "counts %v", counts)
	assert.Positive(t, counts["revise"])
	assert.Positive(t, counts["reject"])
}

func TestDedupConfirm(t *testing.T) {
	b, _ := fakeBackend(Config{Style: "claude", Seed: 4})
	given := [][2]int{{1, 2}, {3, 7}, {4, 5}, {10, 12}, {0, 6}}
	var prompt strings.Builder
	prompt.WriteString("Which candidate pairs are duplicates?\n")
	for _, p := range given {
		fmt.Fprintf(&prompt, "- (%d, %d)\n", p[0], p[1])
	}
	confirmed := 0
	for i := range 20 {
		r := req(fmt.Sprint("d", i), prompt.String())
		r.TaskType = "dedup_confirm"
		var out struct{ Duplicates [][2]int }
		require.NoError(t, unmarshalAnswer(send(t, b, r), &out))
		for _, p := range out.Duplicates {
			assert.Contains(t, given, p)
		}
		confirmed += len(out.Duplicates)
	}
	assert.Greater(t, confirmed, 0)

	r := req("none", "No pairs here at all.")
	r.TaskType = "dedup_confirm"
	content := send(t, b, r)
	var raw map[string]json.RawMessage
	require.NoError(t, unmarshalAnswer(content, &raw))
	assert.JSONEq(t, `[]`, string(raw["duplicates"]))
}

func TestProseFormats(t *testing.T) {
	for _, tt := range []string{"", "exploration", "critique", "synthesis", "draft_section", "review_section",
		"address_comment", "generate_questions", "synthesize_findings", "unknown_type"} {
		for _, style := range styles {
			b, _ := fakeBackend(Config{Style: style, Seed: 8, DeepDailyLimit: 1000})
			for i := range 10 {
				r := req(fmt.Sprint("p", i), "What does the Heawood graph say about the Fano plane?")
				r.TaskType = tt
				r.DeepMode = i%2 == 0
				content := send(t, b, r)
				blocks := strings.Split(strings.TrimSpace(content), "\n\n")
				if tt == "draft_section" {
					require.True(t, strings.HasPrefix(blocks[0], "## "), content)
					blocks = blocks[1:]
				}
				assert.GreaterOrEqual(t, len(blocks), 2, content)
				assert.LessOrEqual(t, len(blocks), 5, content)
				assert.Contains(t, content, "Heawood", "the most relevant fact leads")
				if tt == "generate_questions" {
					assert.Contains(t, content, "?\n")
				}
			}
		}
	}
}

func TestRelevantFactsFallBackToSeededChoice(t *testing.T) {
	a := relevantFacts("zzz nothing matches", rand.New(rand.NewPCG(1, 2)), 3)
	b := relevantFacts("zzz nothing matches", rand.New(rand.NewPCG(1, 2)), 3)
	assert.Equal(t, a, b)
	c := relevantFacts("zzz nothing matches", rand.New(rand.NewPCG(3, 4)), 3)
	assert.NotEqual(t, a, c)

	top := relevantFacts("Is there a plane of order 10? Lam's computer search", rand.New(rand.NewPCG(1, 2)), 1)
	assert.Equal(t, "order-10", top[0].ID)
}

func TestFactsAreWellFormed(t *testing.T) {
	require.GreaterOrEqual(t, len(facts), 25)
	ids := map[string]bool{}
	for _, f := range facts {
		assert.False(t, ids[f.ID], "duplicate id %s", f.ID)
		ids[f.ID] = true
		assert.NotEmpty(t, f.Keywords, f.ID)
		assert.NotEmpty(t, f.Tags, f.ID)
		assert.True(t, strings.HasSuffix(f.Claim, "."), f.ID)
		assert.True(t, strings.HasSuffix(f.Question, "?"), f.ID)
	}
}

func TestRegisterFormat(t *testing.T) {
	b, _ := fakeBackend(Config{})
	r := req("t", "hello")
	r.TaskType = "test_custom"
	RegisterFormat("test_custom", func(req gateway.Request, r *rand.Rand, style string) string {
		return "custom:" + req.Prompt
	})
	assert.Equal(t, "custom:hello", send(t, b, r))

	RegisterFormat("test_custom", nil)
	content := send(t, b, r)
	assert.NotEqual(t, "custom:hello", content)
	assert.Greater(t, len(strings.Split(content, "\n\n")), 1, "falls back to prose")
}

func TestEcho(t *testing.T) {
	b, _ := fakeBackend(Config{Style: "chatgpt"})
	r := req("t", "  {\"exact\": true}\n")
	r.TaskType = "echo"
	assert.Equal(t, r.Prompt, send(t, b, r))
}

func TestLowerFirst(t *testing.T) {
	for in, want := range map[string]string{
		"The Fano plane.":      "the Fano plane.",
		"A projective plane.":  "a projective plane.",
		"PSL(2,7) is simple.":  "PSL(2,7) is simple.",
		"Segre's theorem: x.":  "Segre's theorem: x.",
		"Bruck–Ryser theorem.": "Bruck–Ryser theorem.",
	} {
		assert.Equal(t, want, lowerFirst(in))
	}
}
