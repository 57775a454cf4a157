package explorer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway"
	"fano/gateway/sim"
	"fano/modules"
	"fano/pb"
)

// Spec §13.2 test_exploration_to_blessing: a seed added to a running fano
// goes through exploration, critique, synthesis, extraction and review on
// the sim backends, and ends as a blessed insight with its output file.
func TestExplorationToBlessing(t *testing.T) {
	b := setup(t, setupOpts{explorer: func(c *Config) {
		// One bless of three suffices: the sim's verdicts are random, the
		// pipeline is what is under test.
		c.MinBless, c.MaxReject = 1, 3
	}})
	b.start()
	b.addSeed("How many points and lines does the Fano plane have?", 1)
	b.waitFor("a blessed insight", func(m *Module) bool { return len(m.Blessed()) > 0 })

	var blessed Insight
	var thread Thread
	require.NoError(t, b.Sys.WithModule(Name, func(mm modules.Module) {
		m := mm.(*Module)
		blessed = m.Blessed()[0]
		thread = m.Threads()[0]
	}))
	assert.Equal(t, "How many points and lines does the Fano plane have?", thread.Seed)
	assert.NotEmpty(t, blessed.Text)
	assert.GreaterOrEqual(t, len(blessed.Reviews), 3)

	data, err := os.ReadFile(filepath.Join(b.Dir, "output", "blessed", blessed.ID+".json"))
	require.NoError(t, err, "the blessed store's file is written")
	var f BlessedFile
	require.NoError(t, json.Unmarshal(data, &f))
	assert.Equal(t, blessed.ID, f.ID)
	assert.Equal(t, StatusBlessed, f.Status)
	assert.Equal(t, thread.Seed, f.Seed)
}

// The same insight phrased two ways by two threads is blessed once: the
// second is recorded as a duplicate of the first.
func TestSameInsightPhrasedTwiceIsBlessedOnce(t *testing.T) {
	seedA, seedB := "Count the points of the Fano plane.", "Count the lines of the Fano plane."
	chunkA := chunkID(threadID(seedID(seedA)))
	sim.RegisterFormat(TypeExtraction, func(req gateway.Request, _ *rand.Rand, _ string) string {
		if strings.HasSuffix(req.TaskID, chunkA) {
			return `[{"text": "The Fano plane has exactly 7 points and 7 lines.", "tags": ["fano"], "confidence": 0.9}]`
		}
		return "```json\n[{\"text\": \"In the Fano plane there are exactly seven points and seven lines.\", \"tags\": [], \"confidence\": 0.8}]\n```"
	})
	sim.RegisterFormat(TypeReview, func(gateway.Request, *rand.Rand, string) string {
		return `{"verdict": "bless", "rationale": "A standard fact."}`
	})
	t.Cleanup(func() {
		sim.RegisterFormat(TypeExtraction, sim.InsightExtraction)
		sim.RegisterFormat(TypeReview, sim.Review)
	})

	b := setup(t, setupOpts{explorer: func(c *Config) {
		c.Seeds = []SeedSpec{{Text: seedA}, {Text: seedB}}
	}})
	b.start()
	b.waitFor("both threads extracted and every insight decided", settled)

	var all []Insight
	require.NoError(t, b.Sys.WithModule(Name, func(m modules.Module) { all = m.(*Module).Insights() }))
	require.Len(t, all, 2)
	var blessed, dup []Insight
	for _, ins := range all {
		switch ins.Status {
		case StatusBlessed:
			blessed = append(blessed, ins)
		case StatusDuplicate:
			dup = append(dup, ins)
		}
	}
	require.Len(t, blessed, 1, "blessed once")
	require.Len(t, dup, 1)
	assert.Equal(t, blessed[0].ID, dup[0].DuplicateOf, "the duplicate names what it duplicates")
	assert.GreaterOrEqual(t, dup[0].Similarity, 0.6)
	files, err := os.ReadDir(filepath.Join(b.Dir, "output", "blessed"))
	require.NoError(t, err)
	assert.Len(t, files, 1)
}

// The review panel of an insight is three different backends, each its
// own task pinned to its backend, never the insight's author when others
// are free; and replaying the module's WAL rebuilds the same state.
func TestReviewPanelIsThreeDifferentBackendsAndReplayRebuildsState(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"chatgpt", "claude", "gemini", "openrouter"}, deep: []string{"chatgpt", "gemini"},
		explorer: func(c *Config) {
			c.Seeds = []SeedSpec{{Text: "What is the automorphism group of the Fano plane?"}, {Text: "Why is there no projective plane of order 6?"}}
		}})
	b.start()
	b.waitFor("every insight decided", settled)

	var ins []Insight
	require.NoError(t, b.Sys.WithModule(Name, func(m modules.Module) { ins = m.(*Module).Insights() }))
	reviewed := 0
	for _, in := range ins {
		for round := 1; round <= in.Round; round++ {
			rs := in.roundReviews(round)
			if len(rs) == 0 {
				continue
			}
			reviewed++
			require.Len(t, rs, 3, "insight %s round %d", in.ID, round)
			seats := map[string]bool{}
			for _, r := range rs {
				seats[r.Reviewer] = true
				assert.NotEqual(t, in.Author, r.Reviewer, "insight %s: the author reviews its own insight", in.ID)
				if r.Verdict != VerdictAbstain {
					assert.Equal(t, r.Reviewer, r.LLM, "the reviewer's task ran on its backend")
				}
				task, ok := b.Sys.Task(r.Task)
				require.True(t, ok, r.Task)
				assert.Equal(t, r.Reviewer, task.LlmPreference)
				assert.Equal(t, r.Reviewer, task.LlmAssigned)
			}
			assert.Len(t, seats, 3, "three different backends")
		}
	}
	require.Positive(t, reviewed)
	tasks := b.Sys.Tasks(func(t *pb.Task) bool { return t.TaskType == TypeSynthesis }, 0)
	require.Len(t, tasks, 2)
	for _, tk := range tasks {
		assert.True(t, tk.RequiresDeepMode)
		assert.Equal(t, "gemini", tk.LlmAssigned, "synthesis prefers gemini's deep mode")
	}

	// Replay of the module's events rebuilds the same state.
	live := b.snapshot()
	b.stop()
	assert.Equal(t, live, snapshot(t, replayModule(t, b.Log, b.cfg)), "replay from seq 1")
	// And a restart (checkpoint + replay) too.
	b.restart()
	assert.Equal(t, live, b.snapshot(), "after a restart")
}

// An extraction answer that is not valid JSON is a validation failure:
// retried, then the task fails, every raw answer kept in the task's
// conversation and the last one in the chunk.
func TestExtractionNotJSONIsRetriedThenFailedWithRawKept(t *testing.T) {
	b := setup(t, setupOpts{backends: []string{"solo"}, deep: []string{}, malformed: 1, explorer: func(c *Config) {
		c.Seeds = []SeedSpec{{Text: "How many points does the Fano plane have?"}}
	}})
	b.start()
	b.waitFor("the thread to fail", func(m *Module) bool {
		ths := m.Threads()
		return len(ths) == 1 && ths[0].Status == ThreadFailed
	})
	var ch Chunk
	require.NoError(t, b.Sys.WithModule(Name, func(m modules.Module) { ch = m.(*Module).Chunks()[0] }))
	id := "explorer/" + TypeExtraction + "/" + ch.ID
	var task *pb.Task
	b.WaitFor("task "+id+" to fail", func() bool {
		tk, ok := b.Sys.Task(id)
		require.True(t, ok)
		task = tk
		return tk.State == pb.TaskState_TASK_STATE_FAILED
	})
	assert.Equal(t, int32(3), task.ValidationAttempts, "three retries, on the validation budget")
	assert.Zero(t, task.Attempts, "no request failed")
	assert.Contains(t, task.Error, "gave up after 4 answers failed validation")
	assert.Contains(t, task.Error, "validation")
	var answers []string
	for _, msg := range task.Conversation.Messages {
		if msg.Role == "assistant" {
			answers = append(answers, msg.Content)
		}
	}
	require.Len(t, answers, 4, "every raw answer is in the conversation")
	for _, a := range answers {
		_, _, verr := parseInsights(id, a, 20, 600, 12)
		assert.NotNil(t, verr, "the sim answered malformed: %q", a)
	}
	assert.Equal(t, chunkFailed, ch.Status)
	assert.Equal(t, answers[3], ch.Raw, "the last raw answer is kept in the chunk")
	assert.Contains(t, ch.Error, "validation")
	assert.True(t, slices.ContainsFunc(task.Conversation.Messages, func(m *pb.Message) bool {
		return m.Role == "user" && strings.Contains(m.Content, "could not be used")
	}), "a retry says why the answer was refused")
}
