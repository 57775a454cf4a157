package explorer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/modules"
	"fano/pb"
)

func baseConfig() Config {
	return Config{
		Backends: []string{"chatgpt", "claude", "gemini", "openrouter"}, DeepBackends: []string{"chatgpt", "gemini"},
		PreferDeep: "gemini", ExplorationTurns: 2, ReviewPanelSize: 3, MinBless: 2,
		Dedup: DedupConfig{Enabled: true, UseBatchLLM: true, BatchSize: 20, Threshold: 0.6, BorderlineLow: 0.4},
	}
}

// The whole pipeline on plain calls: seed -> thread -> critique by
// another backend -> deep synthesis on gemini -> extraction -> a panel
// of three different backends -> blessed store and output files.
func TestPipelineOnPlainCalls(t *testing.T) {
	h := newHarness(t, baseConfig())
	sid := mustSeed(t, h, "How many points does the Fano plane have?", 2)
	ran := h.runAll()

	// Spawn = exploration task of the seed's thread, with the seed's priority.
	ex := byType(ran, TypeExploration)
	require.Len(t, ex, 1)
	assert.Equal(t, "explorer/exploration/"+threadID(sid), ex[0].Id)
	assert.Equal(t, int32(70), ex[0].BasePriority)
	assert.Equal(t, int32(2), ex[0].RequestCount, "exploration_turns")

	crit := byType(ran, TypeCritique)
	require.Len(t, crit, 1)
	assert.Equal(t, []string{"chatgpt"}, crit[0].LlmExclude, "the critic is not the author")
	assert.NotEqual(t, "chatgpt", crit[0].LlmAssigned)

	syn := byType(ran, TypeSynthesis)
	require.Len(t, syn, 1)
	assert.True(t, syn[0].RequiresDeepMode)
	assert.Equal(t, "gemini", syn[0].LlmPreference)

	th := h.m.Threads()[0]
	assert.Equal(t, ThreadDone, th.Status)
	assert.Empty(t, th.Exchanges, "a finished thread keeps no exchanges (its chunk and insights carry what came of it)")
	assert.Equal(t, 3, th.Exchanged, "two explorations and a critique")
	assert.Contains(t, lastMessage(ex[0], "user"), "What happens next?", "the follow-up is built from the thread")
	assert.Equal(t, "claude", crit[0].LlmAssigned)
	// A late exchange (a task that completed after the thread finished)
	// changes nothing: finished stays finished, with no exchanges.
	require.NoError(t, h.m.Apply(event(evExchange, "late", exchangeData{Thread: th.ID, Index: 0, Kind: TypeExploration, Task: "late", Answer: "late"}), h.now))
	assert.Empty(t, h.m.Threads()[0].Exchanges)
	ch := h.m.Chunks()[0]
	assert.Equal(t, chunkDone, ch.Status)
	assert.Empty(t, ch.Text, "an extracted chunk keeps its insights' ids, not its text")
	assert.Len(t, ch.Insights, 2)

	blessed := h.m.Blessed()
	require.Len(t, blessed, 2)
	for _, ins := range blessed {
		assert.Equal(t, "chatgpt", ins.Author)
		rev := ins.roundReviews(1)
		require.Len(t, rev, 3)
		seen := map[string]bool{}
		for _, r := range rev {
			assert.NotEqual(t, "chatgpt", r.Reviewer, "the author does not review its own insight")
			assert.Equal(t, r.Reviewer, r.LLM)
			seen[r.Reviewer] = true
		}
		assert.Len(t, seen, 3, "three different reviewers")
	}
	for _, rt := range byType(ran, TypeReview) {
		assert.Equal(t, rt.LlmPreference, rt.Context[ctxReviewer])
		assert.True(t, strings.HasPrefix(rt.Subject, rt.Context[ctxInsight]+"/r1/"), rt.Id)
	}

	// Output files.
	paths := h.m.ExportPaths()
	require.Len(t, paths, 2)
	data, err := h.m.Export(paths[0])
	require.NoError(t, err)
	var f BlessedFile
	require.NoError(t, json.Unmarshal(data, &f))
	assert.Equal(t, StatusBlessed, f.Status)
	assert.Equal(t, "How many points does the Fano plane have?", f.Seed)
	assert.Len(t, f.Reviews, 3)
	_, err = h.m.Export("blessed/nope.json")
	assert.Error(t, err)

	// Replay of the events rebuilds the same state; apply is idempotent.
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed(baseConfig())))
	again := h.replayed(baseConfig())
	for i, e := range h.log {
		require.NoError(t, again.Apply(e, h.at[i]))
	}
	assert.Equal(t, snapshot(t, h.m), snapshot(t, again), "every event applied twice")
	restored, err := New(baseConfig())
	require.NoError(t, err)
	require.NoError(t, restored.Restore([]byte(snapshot(t, h.m))))
	assert.Equal(t, snapshot(t, h.m), snapshot(t, restored))
	assert.Equal(t, 2, restored.Checker().Len())
	assert.Empty(t, h.m.Verify())
}

func TestRevisedInsightIsReviewedOnceMore(t *testing.T) {
	h := newHarness(t, baseConfig())
	h.answer = func(t *pb.Task, llm, prompt string) string {
		if t.TaskType == TypeReview && t.Context[ctxRound] == "1" {
			if llm == "claude" { // first of the panel claude, gemini, openrouter (chatgpt is the author)
				return `{"verdict": "revise", "rationale": "imprecise", "revision": "The Fano plane has exactly seven points and seven lines, three on each."}`
			}
			return `{"verdict": "revise", "rationale": "vague", "revision": "Some other revision of enough length here."}`
		}
		if t.TaskType == TypeExtraction {
			return `[{"text": "The Fano plane has 7 points.", "tags": [], "confidence": 0.5}]`
		}
		return simpleAnswer(t)
	}
	mustSeed(t, h, "Fano plane size", 0)
	ran := h.runAll()
	ins := h.m.Insights()
	require.Len(t, ins, 1)
	assert.Equal(t, StatusBlessed, ins[0].Status)
	assert.Equal(t, 2, ins[0].Round)
	assert.Equal(t, []string{"The Fano plane has 7 points."}, ins[0].History)
	assert.Contains(t, ins[0].Text, "three on each", "the first reviser by name gives the text")
	var r1, r2 int
	for _, rt := range byType(ran, TypeReview) {
		switch {
		case strings.Contains(rt.Id, "/r1/"):
			r1++
		case strings.Contains(rt.Id, "/r2/"):
			r2++
		}
	}
	assert.Equal(t, 3, r1)
	assert.Equal(t, 3, r2)
	assert.Len(t, ins[0].Reviews, 6)
}

func TestRejectAndAbstain(t *testing.T) {
	cfg := baseConfig()
	cfg.ReviewRounds = 1
	h := newHarness(t, cfg)
	h.answer = func(t *pb.Task, llm, prompt string) string {
		switch {
		case t.TaskType == TypeReview && llm == "claude":
			return `{"verdict": "reject", "rationale": "wrong"}`
		case t.TaskType == TypeReview && llm == "openrouter":
			return "not json at all" // fails validation until the reviewer abstains
		case t.TaskType == TypeExtraction:
			return `[{"text": "The Fano plane has 8 points, which is wrong.", "confidence": 0.1}]`
		}
		return simpleAnswer(t)
	}
	mustSeed(t, h, "q", 0)
	h.runAll()
	ins := h.m.Insights()[0]
	assert.Equal(t, StatusRejected, ins.Status)
	verdicts := map[string]string{}
	for _, r := range ins.Reviews {
		verdicts[r.Reviewer] = r.Verdict
	}
	assert.Equal(t, map[string]string{"gemini": "bless", "claude": "reject", "openrouter": "abstain"}, verdicts)
	assert.Contains(t, ins.Reason, "1 bless, 0 revise, 1 reject, 1 abstain of 3")
	for _, r := range ins.Reviews {
		assert.Empty(t, r.Rationale, "a rejected insight keeps its verdicts, not their texts")
	}
	// The same compaction on replay.
	assert.Equal(t, snapshot(t, h.m), snapshot(t, h.replayed(cfg)))
}

// Two insights of the same statement pending at once (dedup was off when
// they were extracted): consensus blesses the first; the second is a
// duplicate of it at blessing time, so the statement is blessed once.
func TestBlessTimeDuplicate(t *testing.T) {
	h := newHarness(t, baseConfig())
	sid := mustSeed(t, h, "q", 0)
	h.m.cfg.Dedup.Enabled = false
	h.answer = func(t *pb.Task, llm, prompt string) string {
		if t.TaskType == TypeExtraction {
			return `[{"text": "The Fano plane has exactly 7 points and 7 lines."}, {"text": "The Fano plane has exactly seven lines and seven points!"}]`
		}
		return simpleAnswer(t)
	}
	for _, tk := range h.m.Propose(h.now) {
		h.run(tk) // exploration
	}
	for i := 0; i < 3; i++ { // critique, synthesis, extraction
		ts := h.m.Propose(h.now)
		require.NotEmpty(t, ts)
		h.run(ts[0])
	}
	require.Len(t, h.m.Insights(), 2)
	h.m.cfg.Dedup.Enabled = true
	h.runAll()
	var blessed, dup []Insight
	for _, ins := range h.m.Insights() {
		switch ins.Status {
		case StatusBlessed:
			blessed = append(blessed, ins)
		case StatusDuplicate:
			dup = append(dup, ins)
		}
	}
	require.Len(t, blessed, 1)
	require.Len(t, dup, 1)
	assert.Equal(t, blessed[0].ID, dup[0].DuplicateOf)
	assert.Equal(t, threadID(sid), dup[0].ThreadID)
	assert.Empty(t, h.m.Verify())
}

// Extraction checks new insights against blessed and pending ones, the
// earlier items of the same answer, and decisions not yet applied.
func TestExtractionDedup(t *testing.T) {
	h := newHarness(t, baseConfig())
	h.m.checker.Add("sec-1", "There is no projective plane of order 6.", "documenter/section")
	mustSeed(t, h, "q", 0)
	h.answer = func(t *pb.Task, llm, prompt string) string {
		if t.TaskType == TypeExtraction {
			return `[{"text": "The Fano plane has exactly 7 points and 7 lines."},
				{"text": "No projective plane of order 6 exists."},
				{"text": "In the Fano plane there are exactly seven points and seven lines."},
				{"text": "The Fano plane has 7 points and 7 lines, so it is the smallest projective plane."}]`
		}
		return simpleAnswer(t)
	}
	h.runAll()
	ins := h.m.Insights()
	require.Len(t, ins, 4)
	assert.Equal(t, StatusBlessed, ins[0].Status)
	assert.Equal(t, StatusDuplicate, ins[1].Status, "duplicates a document section (shared checker)")
	assert.Equal(t, "sec-1", ins[1].DuplicateOf)
	assert.Equal(t, StatusDuplicate, ins[2].Status, "duplicates an earlier item of the answer")
	assert.Equal(t, ins[0].ID, ins[2].DuplicateOf)
	assert.Equal(t, ins[0].ID, ins[3].BorderlineOf, "borderline (0.5): sent to a dedup_confirm task")
	assert.Equal(t, StatusBlessed, ins[3].Status, "the LLM said it is not a duplicate")
}

func TestDedupConfirmBatch(t *testing.T) {
	cfg := baseConfig()
	cfg.Dedup.BatchSize = 2
	h := newHarness(t, cfg)
	h.m.checker.Add("sec-a", "The Fano plane has seven points and seven lines in total.", "documenter/section")
	h.m.checker.Add("sec-b", "PSL(2,7) is a simple group of order 168.", "documenter/section")
	mustSeed(t, h, "q", 0)
	var prompts []string
	h.answer = func(t *pb.Task, llm, prompt string) string {
		switch t.TaskType {
		case TypeExtraction:
			return `[{"text": "The Fano plane has seven points and seven lines, three per line."},
				{"text": "PSL(2,7) of order 168 is simple and acts on the Fano plane."}]`
		case TypeDedupConfirm:
			prompts = append(prompts, prompt)
			return "```json\n{\"duplicates\": [[2, 1], [7, 8]]}\n```"
		}
		return simpleAnswer(t)
	}
	ran := h.runAll()
	dc := byType(ran, TypeDedupConfirm)
	require.Len(t, dc, 1)
	require.Len(t, prompts, 1)
	assert.Contains(t, prompts[0], "Pair (1, 2)")
	assert.Contains(t, prompts[0], "Pair (3, 4)")
	ins := h.m.Insights()
	require.Len(t, ins, 2)
	assert.Equal(t, StatusDuplicate, ins[0].Status)
	assert.Equal(t, "sec-a", ins[0].DuplicateOf)
	assert.Equal(t, StatusBlessed, ins[1].Status, "not confirmed: reviewed")
}

func TestVerifyAndRepairBlessedDuplicates(t *testing.T) {
	h := newHarness(t, baseConfig())
	mustSeed(t, h, "q", 0)
	h.m.cfg.Dedup.Enabled = false
	h.answer = func(t *pb.Task, llm, prompt string) string {
		if t.TaskType == TypeExtraction {
			return `[{"text": "The Fano plane has exactly 7 points and 7 lines."}, {"text": "The Fano plane has exactly seven lines and seven points!"}]`
		}
		return simpleAnswer(t)
	}
	h.runAll()
	require.Len(t, h.m.Blessed(), 2, "with dedup off both are blessed")
	probs := h.m.Verify()
	require.Len(t, probs, 1)
	assert.Equal(t, ProblemBlessedDuplicate, probs[0].Kind)
	later := h.m.Blessed()[1].ID
	assert.Equal(t, later, probs[0].ID)

	evs, err := h.m.DecideRepair(probs[0], h.now)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, []string{blessedPath(later)}, func() []string { h.apply(evs); return h.m.Exports(evs[0]) }())
	assert.Empty(t, h.m.Verify())
	require.Len(t, h.m.Blessed(), 1)
	data, err := h.m.Export(blessedPath(later))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"status": "duplicate"`)
	evs, err = h.m.DecideRepair(probs[0], h.now)
	require.NoError(t, err)
	assert.Empty(t, evs, "repaired already")

	// A blessed store out of step with the statuses is rebuilt.
	h.m.st.Blessed = append(h.m.st.Blessed, h.m.st.Blessed[0])
	probs = h.m.Verify()
	require.NotEmpty(t, probs)
	assert.Equal(t, ProblemBlessedTwice, probs[0].Kind)
	evs, err = h.m.DecideRepair(probs[0], h.now)
	require.NoError(t, err)
	h.apply(evs)
	assert.Empty(t, h.m.Verify())
	_, err = h.m.DecideRepair(modules.Problem{Kind: "nope", ID: "x"}, h.now)
	assert.Error(t, err)
}

func TestExtractionValidation(t *testing.T) {
	cfg := baseConfig()
	cfg.Backends = []string{"solo"}
	cfg.DeepBackends = nil
	cfg.PreferDeep = ""
	h := newHarness(t, cfg)
	mustSeed(t, h, "q", 0)
	h.answer = func(t *pb.Task, llm, prompt string) string {
		if t.TaskType == TypeExtraction {
			return "Here is a summary in prose rather than JSON: [the Fano plane"
		}
		return simpleAnswer(t)
	}
	ran := h.runAll()
	ext := byType(ran, TypeExtraction)
	require.Len(t, ext, 1)
	assert.Equal(t, int32(4), ext[0].Attempts)
	assert.Contains(t, ext[0].Conversation.Messages[len(ext[0].Conversation.Messages)-2].Content, "could not be used", "the retry says why")
	ch := h.m.Chunks()[0]
	assert.Equal(t, chunkFailed, ch.Status)
	assert.Equal(t, "Here is a summary in prose rather than JSON: [the Fano plane", ch.Raw, "raw answer kept")
	assert.Equal(t, ThreadFailed, h.m.Threads()[0].Status)
	crit := byType(ran, TypeCritique)
	assert.Empty(t, crit[0].LlmExclude, "one backend: the critic cannot differ")
	assert.False(t, byType(ran, TypeSynthesis)[0].RequiresDeepMode, "no deep backend")
}

func TestParseInsights(t *testing.T) {
	items, dropped, err := parseInsights("t", "```json\n[{\"text\": \" The Fano plane  has 7 points. \", \"tags\": [\"a\", \"\"], \"confidence\": 0.7}, {\"text\": \"short\"}]\n```", 10, 100, 5)
	require.Nil(t, err)
	require.Len(t, items, 1)
	assert.Equal(t, "The Fano plane has 7 points.", items[0].Text)
	assert.Equal(t, []string{"a"}, items[0].Tags)
	require.Len(t, dropped, 1)
	assert.Contains(t, dropped[0].Reason, "fewer than 10")

	items, _, err = parseInsights("t", `{"insights": [{"text": "The Fano plane has 7 points."}]}`, 10, 100, 5)
	require.Nil(t, err)
	assert.Equal(t, 0.5, items[0].Confidence)

	for _, tc := range []struct{ answer, phase, msg string }{
		{"no json here", "schema", "no JSON"},
		{`[{"text": "abc"`, "schema", "no JSON"},
		{`[{"text": 5}]`, "schema", "insight 1"},
		{`[{"tags": []}]`, "schema", `"text" is missing`},
		{`[{"text": "The Fano plane has 7 points.", "confidence": 2}]`, "schema", "not in [0,1]"},
		{`{"verdict": "bless"}`, "schema", "expected a JSON array"},
		{`[]`, "rules", "empty"},
		{`[{"text": "  "}]`, "rules", "no usable insight: insight 1: empty text"},
		{`[{"text": "a"},{"text": "b"},{"text": "c"},{"text": "d"},{"text": "e"},{"text": "f"}]`, "rules", "at most 5"},
	} {
		_, _, err := parseInsights("task-x", tc.answer, 10, 100, 5)
		require.NotNil(t, err, tc.answer)
		assert.Equal(t, tc.phase, err.Phase, tc.answer)
		assert.Contains(t, err.Msg, tc.msg, tc.answer)
		assert.Equal(t, tc.answer, err.Raw)
		var ve *modules.ValidationError
		assert.True(t, errors.As(error(err), &ve))
	}
}

func TestParseVerdictAndDuplicates(t *testing.T) {
	v, err := parseVerdict("t", "```json\n{\"verdict\": \"Bless\", \"rationale\": \"fine\", \"revision\": \"x\"}\n```", 5, 50)
	require.Nil(t, err)
	assert.Equal(t, verdict{Verdict: "bless", Rationale: "fine"}, v)
	for _, tc := range []struct{ answer, phase string }{
		{`{"rationale": "x"}`, "schema"},
		{`{"verdict": "bless"}`, "schema"},
		{`{"verdict": 3, "rationale": "x"}`, "schema"},
		{`{"verdict": "maybe", "rationale": "x"}`, "rules"},
		{`{"verdict": "revise", "rationale": "x"}`, "rules"},
		{`{"verdict": "revise", "rationale": "x", "revision": "tiny"}`, "rules"},
		{`{"verdict": "bless", "rationale": " "}`, "rules"},
	} {
		_, err := parseVerdict("t", tc.answer, 5, 50)
		require.NotNil(t, err, tc.answer)
		assert.Equal(t, tc.phase, err.Phase, tc.answer)
	}
	d, err := parseDuplicates("t", `{"duplicates": [[2,1],[3,4],[2,7],[9,10]]}`, 4)
	require.Nil(t, err)
	assert.Equal(t, map[int]bool{0: true, 1: true}, d, "stray pairs and pairs out of range are ignored")
	_, err = parseDuplicates("t", `{"duplicates": [[1]]}`, 1)
	assert.NotNil(t, err)
	_, err = parseDuplicates("t", `{}`, 1)
	assert.NotNil(t, err)
}

func TestSeeds(t *testing.T) {
	h := newHarness(t, Config{Seeds: []SeedSpec{{Text: "Config question?", Priority: 1}}})
	_, err := h.m.DecideAddSeed("  config QUESTION ", 0, h.now)
	assert.ErrorIs(t, err, ErrSeedExists, "same question as a config seed")
	_, err = h.m.DecideAddSeed(" ", 0, h.now)
	assert.ErrorContains(t, err, "empty")
	_, err = h.m.DecideAddSeed("x", MaxSeedPriority+1, h.now)
	assert.ErrorContains(t, err, "out of range")
	_, err = h.m.DecideAddSeed(strings.Repeat("x", MaxSeedChars+1), 0, h.now)
	assert.ErrorContains(t, err, "limit")
	mustSeed(t, h, "Added question?", 4)
	_, err = h.m.DecideAddSeed("added question", 0, h.now)
	assert.ErrorIs(t, err, ErrSeedExists)
	seeds := h.m.Seeds()
	require.Len(t, seeds, 2)
	assert.Equal(t, "Added question?", seeds[0].Text, "higher priority first")
	assert.Equal(t, "waiting", seeds[0].Status)

	// The built-in seeds are testdata/seeds.yaml.
	def := DefaultSeeds()
	require.NotEmpty(t, def)
	fromTestdata, err := LoadSeeds(filepath.Join("..", "..", "testdata", "seeds.yaml"))
	require.NoError(t, err)
	assert.Equal(t, def, fromTestdata)

	bad := []struct{ yaml, want string }{
		{"seeds:\n  - text: ok\n  - text: \"\"\n", "bad.yaml:3: seeds[1]: seed text is empty"},
		{"seeds:\n  - text: ok\n    priority: 9\n", "bad.yaml:2: seeds[0]: seed priority 9 is out of range"},
		{"seeds:\n  - txt: ok\n", "field txt not found"},
		{"other: 1\n", "field other not found"},
		{"seeds: []\n", "no seeds"},
		{"", "empty seeds file"},
	}
	for _, b := range bad {
		_, err := ParseSeeds("bad.yaml", []byte(b.yaml))
		assert.ErrorContains(t, err, b.want, b.yaml)
	}
	_, err = New(Config{Seeds: []SeedSpec{{Text: ""}}})
	assert.ErrorContains(t, err, "seed 1")
}

// New threads start only while fewer than max_active_threads are active;
// higher-priority seeds first.
func TestSpawnRespectsMaxActiveThreads(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxActiveThreads = 2
	cfg.Seeds = []SeedSpec{{Text: "low", Priority: 0}, {Text: "mid", Priority: 1}, {Text: "high", Priority: 3}}
	h := newHarness(t, cfg)
	ts := h.m.Propose(h.now)
	require.Len(t, ts, 2)
	assert.Equal(t, []string{threadID(seedID("high")), threadID(seedID("mid"))}, []string{ts[0].Subject, ts[1].Subject})
	assert.Len(t, h.m.Propose(h.now), 2, "proposing again adds nothing")
	// A new, urgent seed waits for room instead of overshooting.
	mustSeed(t, h, "urgent", 5)
	assert.Len(t, h.m.Propose(h.now), 2)
	h.run(ts[0])
	assert.Len(t, byType(h.m.Propose(h.now), TypeExploration), 1, "one thread active, one spawning")
	// The high thread moves on and still counts until it is done.
	h.runAll()
	for _, s := range h.m.Seeds() {
		assert.Equal(t, ThreadDone, s.Status, s.Text)
	}
}

func TestPromptsOverride(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "exploration_start.tmpl"), []byte("CUSTOM: {{.Seed}}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("ignored"), 0o644))
	cfg := baseConfig()
	cfg.PromptsDir = dir
	cfg.Seeds = []SeedSpec{{Text: "Q?"}}
	m, err := New(cfg)
	require.NoError(t, err)
	act, err := m.NextAction(m.Propose(time.Now())[0])
	require.NoError(t, err)
	assert.Equal(t, "CUSTOM: Q?\n", act.Prompt)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "critique.tmpl"), []byte("{{.Nope}}"), 0o644))
	_, err = New(cfg)
	assert.ErrorContains(t, err, filepath.Join(dir, "critique.tmpl"))
	require.NoError(t, os.Remove(filepath.Join(dir, "critique.tmpl")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "critque.tmpl"), []byte("x"), 0o644))
	_, err = New(cfg)
	assert.ErrorContains(t, err, "critque.tmpl is not a prompt")
	cfg.PromptsDir = filepath.Join(dir, "missing")
	_, err = New(cfg)
	assert.ErrorContains(t, err, "prompts_dir")
}

func TestApplyRefusesBadEvents(t *testing.T) {
	h := newHarness(t, baseConfig())
	assert.ErrorContains(t, h.m.Apply(&pb.ModuleEvent{Type: "nope", TaskId: "t1"}, h.now), `unknown event type "nope"`)
	assert.ErrorContains(t, h.m.Apply(&pb.ModuleEvent{Type: evReview, TaskId: "t1", Data: []byte("{")}, h.now), "does not decode")
	assert.ErrorContains(t, h.m.Apply(event(evReview, "t1", reviewData{Insight: "in-x"}), h.now), "unknown insight in-x")
	assert.ErrorContains(t, h.m.Restore([]byte("{")), "restore")
	assert.ErrorContains(t, h.m.Restore([]byte(`{"insights": null}`)), "null section")
}

// A reviewer whose request budget runs out on unusable answers abstains
// when its task completes, so the panel still decides.
func TestReviewerOutOfBudgetAbstains(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxRequests = func(tt string) int {
		if tt == TypeReview {
			return 1
		}
		return 10
	}
	h := newHarness(t, cfg)
	h.answer = func(t *pb.Task, llm, prompt string) string {
		if t.TaskType == TypeReview && llm == "openrouter" {
			return `{"verdict": "perhaps"}`
		}
		return simpleAnswer(t)
	}
	mustSeed(t, h, "q", 0)
	h.runAll()
	for _, ins := range h.m.Insights() {
		assert.Equal(t, StatusBlessed, ins.Status, ins.ID)
		r := ins.reviewBy(1, "openrouter")
		require.NotNil(t, r)
		assert.Equal(t, VerdictAbstain, r.Verdict)
		assert.Contains(t, r.Rationale, "ended without a verdict")
	}
}
