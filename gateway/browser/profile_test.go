package browser

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuiltinProfiles(t *testing.T) {
	builtin, err := Builtin()
	require.NoError(t, err)
	assert.Equal(t, []string{"chatgpt", "claude", "gemini"}, Names(builtin))
	for name, p := range builtin {
		assert.Equal(t, name, p.Name)
		assert.NotEmpty(t, p.Selectors.Generating, name)
		assert.NotEmpty(t, p.Selectors.LoginWall, name)
		assert.True(t, p.HasDeepMode(), name)
		assert.NotEmpty(t, p.Selectors.FileInput, name)
		assert.NotEmpty(t, p.RateLimit.Patterns, name)
		assert.NotEmpty(t, p.LoginURL, name)
		assert.Equal(t, []string{"prompt"}, p.StartupCheck, name)
		// What a long run needs to tell a whole answer, a failed one and
		// a bot check from each other.
		assert.NotEmpty(t, p.Complete, name)
		assert.NotEmpty(t, p.ErrorTurn.In, name)
		assert.NotEmpty(t, p.ErrorTurn.match, name)
		assert.NotEmpty(t, p.ErrorTurn.Retry.CSS, name)
		assert.Equal(t, defaultErrorTurnRetries, p.ErrorTurn.Retries, name)
		assert.NotEmpty(t, p.Challenge.title, name)
		assert.NotEmpty(t, p.Challenge.Markers, name)
		assert.True(t, p.isChallenge(pageState{Title: "Just a moment..."}), name)
	}
	assert.Equal(t, "https://claude.ai/new", builtin["claude"].StartURL)
	assert.Equal(t, SelectorList{"button[aria-label='Stop response']"}, builtin["claude"].Selectors.StopSelector())
	assert.Equal(t, "button[data-testid='stop-button']", builtin["chatgpt"].Selectors.StopSelector()[0])
	// Sites with guest chat say what a login looks like; Claude has none.
	assert.NotEmpty(t, builtin["chatgpt"].Selectors.LoggedIn)
	assert.NotEmpty(t, builtin["gemini"].Selectors.LoggedIn)
	assert.Empty(t, builtin["claude"].Selectors.LoggedIn)
	assert.True(t, builtin["claude"].isLoginURL("https://claude.ai/login?returnTo=/new"))
	assert.False(t, builtin["claude"].isLoginURL("https://claude.ai/new"))
	assert.True(t, builtin["chatgpt"].isLoginURL("https://auth.openai.com/log-in"))
	assert.True(t, builtin["gemini"].isLoginURL("https://accounts.google.com/ServiceLogin?continue=x"))
	assert.False(t, builtin["gemini"].isLoginURL("https://gemini.google.com/app"))
	assert.True(t, builtin["chatgpt"].isPendingURL("https://chatgpt.com/c/WEB:4f1c"))
	assert.False(t, builtin["chatgpt"].isPendingURL("https://chatgpt.com/c/6710d1a2-0c3e-8000-9e1f-1b2c3d4e5f60"))
}

func TestWithBaseURL(t *testing.T) {
	builtin, err := Builtin()
	require.NoError(t, err)
	p, err := builtin["gemini"].WithBaseURL("http://127.0.0.1:4321")
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:4321/app", p.StartURL)
	assert.Equal(t, "http://127.0.0.1:4321", p.origin())
	assert.Equal(t, "https://gemini.google.com/app", builtin["gemini"].StartURL, "the original is unchanged")
	_, err = builtin["gemini"].WithBaseURL("127.0.0.1:4321")
	assert.EqualError(t, err, `site profile gemini: base URL "127.0.0.1:4321": must be an http(s) URL like http://127.0.0.1:8080`)
}

func TestUserProfiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sites.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`profiles:
  chatgpt:              # patch one selector of the built-in
    selectors:
      answer: "div.agent-turn"
  work-claude:          # a copy of claude on another address
    extends: claude
    start_url: https://claude.example.org/new
    completion: {stable_ms: 3000}
  mine:
    start_url: http://127.0.0.1:9000/
    selectors: {prompt: textarea, send: "button.send", answer: ".reply"}
    rate_limit:
      banner: ".limit"
      patterns:
        - {match: "wait (?P<in>\\d+ min)", retry: relative}
`), 0o600))
	profiles, err := LoadProfiles(file)
	require.NoError(t, err)
	assert.Equal(t, []string{"chatgpt", "claude", "gemini", "mine", "work-claude"}, Names(profiles))

	gpt := profiles["chatgpt"]
	assert.Equal(t, SelectorList{"div.agent-turn"}, gpt.Selectors.Answer)
	assert.Equal(t, builtinProfile(t, "chatgpt").Selectors.Prompt, gpt.Selectors.Prompt, "fields not set keep the built-in's")
	assert.Len(t, gpt.RateLimit.Patterns, len(builtinProfile(t, "chatgpt").RateLimit.Patterns))
	assert.True(t, gpt.HasDeepMode())

	wc := profiles["work-claude"]
	assert.Equal(t, "https://claude.example.org/new", wc.StartURL)
	assert.Equal(t, 3000, wc.Completion.StableMS)
	assert.Equal(t, 400, wc.Completion.PollMS)
	assert.Equal(t, builtinProfile(t, "claude").Selectors.Answer, wc.Selectors.Answer)
	assert.Equal(t, "https://claude.ai/new", profiles["claude"].StartURL)

	mine := profiles["mine"]
	assert.Equal(t, []string{"prompt", "send"}, mine.StartupCheck)
	assert.Equal(t, defaultStableMS, mine.Completion.StableMS)
	d, _ := mine.BannerRetry("Please wait 12 min.", time.Now())
	assert.Equal(t, 12*time.Minute, d)
}

// Every mistake in a user profiles file is one clear error naming the
// file, the line and the field.
func TestUserProfileErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"profiles:\n  x:\n    start_url: http://a/\n    selectors: {prompt: p, send: s, answr: a}\n",
			"sites.yaml:4: profiles.x.selectors.answr: unknown field (known: prompt, send, answer, generating, stop, login_wall, logged_in, deep_mode, deep_mode_on, file_input)"},
		{"profiles:\n  x:\n    start_url: http://a/\n    selectors: {prompt: p, send: s}\n",
			"sites.yaml: profiles.x.selectors.answer: missing; a CSS selector"},
		{"profiles:\n  x:\n    extends: chatgtp\n",
			"sites.yaml:3: profiles.x.extends: unknown profile \"chatgtp\" (known: chatgpt, claude, gemini)"},
		{"profiles:\n  chatgpt:\n    start_url: chatgpt.com\n",
			"sites.yaml:3: profiles.chatgpt.start_url: \"chatgpt.com\" must be an http(s) URL"},
		{"profiles:\n  chatgpt:\n    rate_limit:\n      patterns:\n        - {match: \"in (\\\\d+ min\", retry: relative}\n",
			"sites.yaml:5: profiles.chatgpt.rate_limit.patterns[0].match: error parsing regexp: missing closing ): `in (\\d+ min`"},
		{"profiles:\n  chatgpt:\n    rate_limit:\n      patterns:\n        - {match: \"in (\\\\d+ min)\", retry: relative}\n",
			"sites.yaml:5: profiles.chatgpt.rate_limit.patterns[0].match: retry relative needs a named group (?P<in>...) holding the duration"},
		{"profiles:\n  chatgpt:\n    rate_limit:\n      patterns:\n        - {match: \"limit\", retry: soon}\n",
			"sites.yaml:5: profiles.chatgpt.rate_limit.patterns[0].retry: \"soon\" must be one of: absolute, relative, none"},
		{"profiles:\n  chatgpt:\n    startup_check: [prompt, sned]\n",
			"sites.yaml:3: profiles.chatgpt.startup_check[1]: unknown selector \"sned\" (one of: prompt, send, answer, generating, stop, login_wall, logged_in, deep_mode, deep_mode_on, file_input)"},
		{"profiles:\n  chatgpt:\n    completion: {stable_ms: fast}\n",
			"sites.yaml:3: profiles.chatgpt.completion.stable_ms: cannot unmarshal !!str `fast` into int"},
		{"profiles:\n  chatgpt:\n    error_turn:\n      match: [\"went wrong (\"]\n",
			"sites.yaml:4: profiles.chatgpt.error_turn.match[0]: error parsing regexp: missing closing ): `went wrong (`"},
		{"profiles:\n  x:\n    extends: chatgpt\n    error_turn: {in: null, match: [oops]}\n",
			"sites.yaml:4: profiles.x.error_turn.in: missing; error_turn.match is matched against the text of the containers this selector finds"},
		{"profiles:\n  x:\n    start_url: http://a/\n    selectors: {prompt: p, send: s, answer: a}\n    error_turn: {retry_button: button}\n",
			"sites.yaml:5: profiles.x.error_turn.retry_button: needs error_turn.match (what an error turn says)"},
		{"profiles:\n  claude:\n    challenge:\n      title: [\"\"]\n",
			"sites.yaml:4: profiles.claude.challenge.title[0]: empty; a regular expression"},
		{"profiles:\n  claude:\n    challenge:\n      markers: [\"#challenge[[\"]\n",
			"sites.yaml:4: profiles.claude.challenge.markers: \"#challenge[[\" is not a valid CSS selector: '[' inside an attribute selector at offset 11"},
		{"profile:\n  x: {}\n", "sites.yaml:1: profile: unknown key; the file has one key, profiles"},
		{"profiles: [a]\n", "sites.yaml:1: profiles: must map a profile name to a profile"},
	} {
		_, err := ParseProfiles([]byte(tc.yaml), "sites.yaml")
		if assert.Error(t, err, tc.yaml) {
			assert.Equal(t, tc.want, err.Error(), tc.yaml)
		}
	}
	// An empty file adds nothing.
	profiles, err := ParseProfiles(nil, "sites.yaml")
	require.NoError(t, err)
	assert.Len(t, profiles, 3)
	_, err = LoadProfiles(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "site profiles file: open ")
}

func builtinProfile(t *testing.T, name string) *Profile {
	t.Helper()
	builtin, err := Builtin()
	require.NoError(t, err)
	return builtin[name]
}

// The profile language: selector lists, controls with steps, notice kinds,
// login URLs, and the old single deep-mode toggle.
func TestProfileLanguage(t *testing.T) {
	profiles, err := ParseProfiles([]byte(`profiles:
  site:
    start_url: http://127.0.0.1:9000/
    login_url: ['/signin$']
    selectors:
      prompt: ["#new-prompt", "#old-prompt"]
      send: button.send
      answer: .reply
      logged_in: .avatar
    controls:
      deep_mode:
        steps: [button.model, {css: "[role=menuitem]", text: Effort}]
        item: {css: "[role=menuitemradio]", text: High}
        off: {css: "[role=menuitemradio]", text: Low}
      model:
        steps: [button.model]
        item: {css: "[role=menuitemradio]", text: Opus}
        always: true
    rate_limit:
      banner: ["[role=dialog]", .toast]
      patterns:
        - {match: "another model until (?P<time>.+)", retry: absolute, kind: degraded}
  old:
    extends: site
    selectors: {deep_mode: "button.think", deep_mode_on: "button.think.on"}
`), "sites.yaml")
	require.NoError(t, err)
	p := profiles["site"]
	assert.Equal(t, SelectorList{"#new-prompt", "#old-prompt"}, p.Selectors.Prompt)
	dm := p.control("deep_mode")
	require.NotNil(t, dm)
	assert.Equal(t, []Target{{CSS: SelectorList{"button.model"}}, {CSS: SelectorList{"[role=menuitem]"}, Text: "Effort"}}, dm.Steps)
	assert.Equal(t, Target{CSS: SelectorList{"[role=menuitemradio]"}, Text: "Low"}, dm.Off)
	assert.True(t, p.control("model").Always)
	assert.Equal(t, []string{"deep_mode", "model"}, controlNames(p))
	assert.True(t, p.isLoginURL("http://127.0.0.1:9000/signin"))
	assert.Equal(t, NoticeDegraded, p.ClassifyNotice("Responses will use another model until 7:13 PM", time.Now()).Kind)

	old := profiles["old"].control("deep_mode")
	require.NotNil(t, old)
	assert.Empty(t, old.Steps, "the old toggle replaces the base's steps")
	assert.Equal(t, SelectorList{"button.think"}, old.Item.CSS)
	assert.Equal(t, SelectorList{"button.think.on"}, old.On)

	for _, tc := range []struct{ yaml, want string }{
		{"profiles:\n  chatgpt:\n    controls:\n      deep_mode: {steps: [a], itme: b}\n",
			"sites.yaml:4: profiles.chatgpt.controls.deep_mode.itme: unknown field (known: steps, item, off, on, shown, always, close)"},
		{"profiles:\n  chatgpt:\n    controls:\n      effort: {steps: [a]}\n",
			"sites.yaml: profiles.chatgpt.controls.effort.item: missing; the element that switches the control"},
		{"profiles:\n  chatgpt:\n    controls:\n      deep_mode: {item: {text: High}}\n",
			"sites.yaml:4: profiles.chatgpt.controls.deep_mode.item: needs css (the element's selector)"},
		{"profiles:\n  chatgpt:\n    controls:\n      deep_mode: {item: a, close: later}\n",
			"sites.yaml:4: profiles.chatgpt.controls.deep_mode.close: \"later\" must be escape or none"},
		{"profiles:\n  chatgpt:\n    login_url: ['(']\n",
			"sites.yaml:3: profiles.chatgpt.login_url[0]: error parsing regexp: missing closing ): `(`"},
		{"profiles:\n  chatgpt:\n    selectors: {answer: [a, 3, {x: 1}]}\n",
			"sites.yaml:3: profiles.chatgpt.selectors.answer: a selector list holds non-empty CSS selector strings"},
		{"profiles:\n  chatgpt:\n    rate_limit:\n      patterns:\n        - {match: limit, retry: none, kind: soon}\n",
			"sites.yaml:5: profiles.chatgpt.rate_limit.patterns[0].kind: \"soon\" must be one of: cap, rate, degraded, transient, conversation_full"},
	} {
		_, err := ParseProfiles([]byte(tc.yaml), "sites.yaml")
		if assert.Error(t, err, tc.yaml) {
			assert.Equal(t, tc.want, err.Error(), tc.yaml)
		}
	}
}
