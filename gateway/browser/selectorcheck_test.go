package browser

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSelectorAcceptsWhatBrowsersAccept(t *testing.T) {
	for _, sel := range []string{
		"#prompt-textarea", "button[data-testid='send-button']", "div[data-message-author-role=\"assistant\"]",
		"a > b + c ~ d e", ".markdown.prose", "button[aria-label='Think longer'], [data-testid='auth-modal']",
		":is(.a, .b) :not([hidden])", "div:has(> .x)", "p::before", "[data-x]", "[lang|=en i]", "li:nth-child(2n+1)",
		"message-content .markdown", "*", "input[type=file]", `[title="a]b"]`,
	} {
		assert.NoError(t, parseSelector(sel), sel)
	}
}

func TestParseSelectorRejectsTypos(t *testing.T) {
	for _, sel := range []string{
		".prose[[[", "div[", "a >", "> a", "a,,b", ", a", "a,", ".", "#", "div:", "[='x']", "[a='x]", "a)", "a]", ":not(a",
		"[a=b c]", "div 'x'",
	} {
		assert.Error(t, parseSelector(sel), sel)
	}
}

func TestInvalidSelectorIsNamedAtLoad(t *testing.T) {
	_, err := ParseProfiles([]byte("profiles:\n  chatgpt:\n    selectors:\n      answer: \".prose[[[\"\n"), "sites.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sites.yaml:4: profiles.chatgpt.selectors.answer")
	assert.Contains(t, err.Error(), "not a valid CSS selector")

	_, err = ParseProfiles([]byte("profiles:\n  chatgpt:\n    complete: \"div >\"\n    answer_text: html\n    max_stall_seconds: -1\n"), "sites.yaml")
	require.Error(t, err)
	for _, want := range []string{"sites.yaml:3: profiles.chatgpt.complete", "sites.yaml:4: profiles.chatgpt.answer_text", "sites.yaml:5: profiles.chatgpt.max_stall_seconds"} {
		assert.Contains(t, err.Error(), want)
	}
}

// complete and conversation_gone take selector lists; every selector of a
// list, and of a control's steps, is parsed.
func TestSelectorListsAreParsedAtLoad(t *testing.T) {
	ps, err := ParseProfiles([]byte("profiles:\n  chatgpt:\n    complete: [\"#a\", \".b\"]\n    conversation_gone: \".gone\"\n"), "sites.yaml")
	require.NoError(t, err)
	assert.Equal(t, SelectorList{"#a", ".b"}, ps["chatgpt"].Complete)
	assert.Equal(t, SelectorList{".gone"}, ps["chatgpt"].ConversationGone)

	_, err = ParseProfiles([]byte("profiles:\n  chatgpt:\n    complete: [\"#a\", \"div >\"]\n    conversation_gone: [\".ok\", \"[x\"]\n"), "sites.yaml")
	require.Error(t, err)
	for _, want := range []string{"sites.yaml:3: profiles.chatgpt.complete: \"div >\"", "sites.yaml:4: profiles.chatgpt.conversation_gone: \"[x\""} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestBuiltinProfilesParse(t *testing.T) {
	ps, err := Builtin()
	require.NoError(t, err)
	assert.Len(t, ps, 3)
}

func TestSamePage(t *testing.T) {
	want := "https://chatgpt.com/c/68a1-77"
	assert.True(t, samePage(want, want))
	assert.True(t, samePage("https://chatgpt.com/c/68a1-77/", want))
	assert.True(t, samePage("https://chatgpt.com/g/g-p-123/c/68a1-77?model=x", want), "moved under a project")
	assert.False(t, samePage("https://chatgpt.com/", want), "redirected to a new chat")
	assert.False(t, samePage("https://chatgpt.com/c/other", want))
	assert.False(t, samePage("https://evil.example/c/68a1-77", want))
}
