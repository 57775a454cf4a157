package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/pb"
)

func three() Config {
	return Config{
		BufferPercent: 10,
		Backends: []BackendConfig{
			{Name: "chatgpt", Kind: KindBrowser, HourlyLimit: 50, DeepDailyLimit: 100, MaxConcurrency: 3},
			{Name: "gemini", Kind: KindBrowser, HourlyLimit: 50, DeepDailyLimit: 20},
			{Name: "openrouter", Kind: KindAPI, HourlyLimit: 50, MaxConcurrency: 4},
		},
	}
}

func TestChooseOrder(t *testing.T) {
	r := newRig(t, three(), at(10, 0))
	now := r.now()
	all := []string{"chatgpt", "gemini", "openrouter"}
	r.useN("chatgpt", false, 10)
	r.useN("gemini", false, 20)
	r.useN("openrouter", false, 5)

	// Most remaining hourly budget.
	got, ok := r.book.Choose(&pb.Task{}, all, now)
	require.True(t, ok)
	assert.Equal(t, "openrouter", got)

	// Only among the free ones.
	got, _ = r.book.Choose(&pb.Task{}, []string{"chatgpt", "gemini"}, now)
	assert.Equal(t, "chatgpt", got)
	_, ok = r.book.Choose(&pb.Task{}, nil, now)
	assert.False(t, ok)

	// Conversation continuity beats remaining budget...
	cont := &pb.Task{Conversation: &pb.ConversationState{Llm: "gemini"}}
	got, _ = r.book.Choose(cont, all, now)
	assert.Equal(t, "gemini", got)
	// ...but falls back when its backend cannot serve.
	got, _ = r.book.Choose(cont, []string{"chatgpt", "openrouter"}, now)
	assert.Equal(t, "openrouter", got)

	// Preference beats both, and a task waits for its preferred backend.
	pref := &pb.Task{LlmPreference: "chatgpt", Conversation: &pb.ConversationState{Llm: "gemini"}}
	got, _ = r.book.Choose(pref, all, now)
	assert.Equal(t, "chatgpt", got)
	_, ok = r.book.Choose(pref, []string{"gemini", "openrouter"}, now)
	assert.False(t, ok, "preferred backend not free: none")
	r.useN("chatgpt", false, 35)
	_, ok = r.book.Choose(pref, all, now)
	assert.False(t, ok, "preferred backend out of quota: none")
	_, ok = r.book.Choose(&pb.Task{LlmPreference: "chatgpt", LlmExclude: []string{"chatgpt"}}, all, now)
	assert.False(t, ok, "preferred but excluded: none")

	// Exclusion.
	got, _ = r.book.Choose(&pb.Task{LlmExclude: []string{"openrouter"}}, all, now)
	assert.Equal(t, "gemini", got)
	got, _ = r.book.Choose(&pb.Task{LlmExclude: []string{"gemini"}, Conversation: &pb.ConversationState{Llm: "gemini"}}, all, now)
	assert.Equal(t, "openrouter", got, "continuity never overrides exclusion")
	_, ok = r.book.Choose(&pb.Task{LlmExclude: all}, all, now)
	assert.False(t, ok)

	// Deep mode: only backends with deep budget left.
	got, _ = r.book.Choose(&pb.Task{RequiresDeepMode: true}, all, now)
	assert.Equal(t, "gemini", got, "chatgpt is out of hourly quota, openrouter has no deep mode")

	// Ties go by name.
	r2 := newRig(t, three(), at(10, 0))
	got, _ = r2.book.Choose(&pb.Task{}, all, now)
	assert.Equal(t, "chatgpt", got)
}

func TestBrowserServesOneAtATime(t *testing.T) {
	r := newRig(t, three(), at(10, 0))
	now := r.now()
	assert.Equal(t, []string{"chatgpt", "gemini", "openrouter"}, r.book.Free(now))

	// chatgpt is a browser: configured 3, still one at a time.
	require.True(t, r.book.Acquire("chatgpt"))
	assert.False(t, r.book.Acquire("chatgpt"))
	assert.Equal(t, []string{"gemini", "openrouter"}, r.book.Free(now))
	_, ok := r.book.Choose(&pb.Task{LlmPreference: "chatgpt"}, []string{"chatgpt"}, now)
	assert.False(t, ok, "no free slot")
	st := r.status("chatgpt")
	assert.Equal(t, 1, st.InUse)
	assert.Equal(t, 1, st.MaxConcurrency)
	assert.False(t, st.Available)

	r.book.Release("chatgpt")
	r.book.Release("chatgpt") // an extra release is ignored
	require.True(t, r.book.Acquire("chatgpt"))
	assert.False(t, r.book.Acquire("chatgpt"))

	// The API backend has four slots.
	for range 4 {
		require.True(t, r.book.Acquire("openrouter"))
	}
	assert.False(t, r.book.Acquire("openrouter"))
	assert.False(t, r.book.Acquire("unknown"))
}

// Continuity is a preference, not a pin: the backend that just failed a
// task (avoid_llm) is passed over for any other free one, even the task's
// conversation backend, and taken only when no other is free.
func TestAvoidedBackendIsTheLastResort(t *testing.T) {
	r := newRig(t, three(), at(10, 0))
	now := r.now()
	all := []string{"chatgpt", "gemini", "openrouter"}
	task := &pb.Task{Conversation: &pb.ConversationState{Llm: "chatgpt"}}
	got, _ := r.book.Choose(task, all, now)
	assert.Equal(t, "chatgpt", got, "the conversation's backend first")

	task.AvoidLlm = "chatgpt"
	got, _ = r.book.Choose(task, all, now)
	assert.NotEqual(t, "chatgpt", got)
	got, ok := r.book.Choose(task, []string{"chatgpt"}, now)
	require.True(t, ok)
	assert.Equal(t, "chatgpt", got, "better than waiting when it is the only one free")
}

// Every state a backend shows has its class of the condition table and,
// when a person must end it, what they do.
func TestDescribe(t *testing.T) {
	cases := map[string][2]string{
		"ready":        {"", ""},
		"rate_limited": {"rate", ""},
		"capped":       {"quota", ""},
		"exhausted":    {"quota", ""},
		"paced":        {"quota", ""},
		"circuit_open": {"transient", ""},
		"down":         {"transient", ""},
		"paused":       {"person", "resume it: fano backend resume x"},
		"login":        {"person", "log in again: fano login x"},
		"credits":      {"person", "add credits to the account of x, then: fano backend resume x"},
	}
	for state, want := range cases {
		class, action := Describe("x", state)
		assert.Equal(t, want, [2]string{class, action}, state)
	}
}

// A backend held for its pace (its limiter already queues a request) is
// offered no new task, not even the one whose conversation it holds; a
// request of a task already given to it still gets its quota.
func TestHeldBackendTakesNoNewTask(t *testing.T) {
	r := newRig(t, three(), at(10, 0))
	now := r.now()
	all := []string{"chatgpt", "gemini", "openrouter"}
	assert.True(t, r.book.Hold("openrouter", true))
	assert.False(t, r.book.Hold("openrouter", true), "no change")
	assert.NotContains(t, r.book.Free(now), "openrouter")
	got, ok := r.book.Choose(&pb.Task{Conversation: &pb.ConversationState{Llm: "openrouter"}}, all, now)
	require.True(t, ok)
	assert.NotEqual(t, "openrouter", got, "continuity is a preference only while the backend can serve soon")
	for _, v := range r.book.FreeViews(now) {
		if v.Name == "openrouter" {
			assert.False(t, v.Normal)
		}
	}
	_, err := r.book.DecideUse("openrouter", false, "given-before", now)
	assert.NoError(t, err, "its quota is untouched")
	assert.True(t, r.book.Hold("openrouter", false))
	assert.Contains(t, r.book.Free(now), "openrouter")
}
