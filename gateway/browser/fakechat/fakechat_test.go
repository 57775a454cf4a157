package fakechat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func post(t *testing.T, url string, body any) map[string]any {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The server side of the fake sites, without a browser: pages, the
// conversation store, the limit and the control endpoint.
func TestServer(t *testing.T) {
	for _, site := range Sites {
		s, err := New(site)
		require.NoError(t, err)
		defer s.Close()
		assert.True(t, strings.HasPrefix(s.URL(), "http://127.0.0.1:"))
		code, body := get(t, s.URL()+"/some/conversation/path")
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "/__fake/common/fakechat.js")
		code, _ = get(t, s.URL()+"/__fake/site/app.js")
		assert.Equal(t, http.StatusOK, code, site)
	}

	s, err := New("chatgpt")
	require.NoError(t, err)
	defer s.Close()
	api := s.URL() + "/__fake/api"
	a := post(t, api+"/send", Sent{Prompt: "hi", Deep: true, Attachments: []string{"x.png"}})
	id := a["conversation_id"].(string)
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, id)
	assert.Equal(t, "[deep mode] Answer 1 to: hi [attachments: x.png] "+Tail, a["answer"])
	a = post(t, api+"/send", Sent{Conversation: id, Prompt: "more"})
	assert.Equal(t, id, a["conversation_id"])
	assert.Equal(t, "Answer 2 to: more "+Tail, a["answer"])
	code, body := get(t, api+"/conversation/"+id)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"content":"more"`)
	code, _ = get(t, api+"/conversation/nope")
	assert.Equal(t, http.StatusNotFound, code)

	// Control over HTTP: a limit of one answer, banner on load.
	post(t, s.URL()+"/__fake/control", Control{Limit: 1, Banner: "wait 5 minutes", BannerOnLoad: true})
	assert.Nil(t, post(t, api+"/send", Sent{Prompt: "ok"})["banner"])
	assert.Equal(t, "wait 5 minutes", post(t, api+"/send", Sent{Prompt: "no"})["banner"])
	_, body = get(t, api+"/session")
	assert.Contains(t, body, `"banner":"wait 5 minutes"`)
	s.SetControl(Control{LoginWall: true})
	assert.Equal(t, true, post(t, api+"/send", Sent{Prompt: "x"})["login_wall"])
	n, _ := s.Sends()
	assert.Equal(t, 5, n)
}

// Conversations belong to the account (browser profile cookie) that made
// them; a forgotten one is not found.
func TestServerAccountsAndForget(t *testing.T) {
	s, err := New("turns")
	require.NoError(t, err)
	defer s.Close()
	client := func() *http.Client {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		return &http.Client{Jar: jar}
	}
	a, b := client(), client()
	status := func(c *http.Client, method, path, body string) (int, map[string]any) {
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	status(a, "GET", "/__fake/api/session", "")
	status(b, "GET", "/__fake/api/session", "")
	_, sent := status(a, "POST", "/__fake/api/send", `{"prompt":"mine"}`)
	id := sent["conversation_id"].(string)
	code, _ := status(a, "GET", "/__fake/api/conversation/"+id, "")
	assert.Equal(t, http.StatusOK, code)
	code, _ = status(b, "GET", "/__fake/api/conversation/"+id, "")
	assert.Equal(t, http.StatusNotFound, code, "another account's conversation")
	_, other := status(b, "POST", "/__fake/api/send", `{"conversation_id":"`+id+`","prompt":"theirs"}`)
	assert.NotEqual(t, id, other["conversation_id"], "a send into another account's conversation starts a new one")
	s.Forget(id)
	code, _ = status(a, "GET", "/__fake/api/conversation/"+id, "")
	assert.Equal(t, http.StatusNotFound, code)
}

// The 2026 pages are served from testdata/chatui/2026/<site>; a notice
// that keeps answering comes with the answer.
func TestServer2026(t *testing.T) {
	s, err := New("claude-2026")
	require.NoError(t, err)
	defer s.Close()
	code, body := get(t, s.URL()+"/new")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `data-testid="model-selector-dropdown"`)
	code, body = get(t, s.URL()+"/__fake/site/app.js")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "/login")

	s.SetControl(Control{Limit: 1, Banner: "Responses will use another model", Shape2026: Shape2026{BannerAnswers: true, Guest: true}})
	api := s.URL() + "/__fake/api"
	assert.Nil(t, post(t, api+"/send", Sent{Prompt: "ok"})["banner"])
	a := post(t, api+"/send", Sent{Prompt: "again"})
	assert.Equal(t, "Responses will use another model", a["banner"])
	assert.Equal(t, "Answer 1 to: again "+Tail, a["answer"])
	_, body = get(t, api+"/session")
	assert.Contains(t, body, `"guest":true`)

	_, err = New("claude-2027")
	assert.ErrorContains(t, err, "unknown site")
}

// The shapes of an answer that is not whole, on the server side: an error
// turn's attempts counted down through Retry, a cut kept in the store, and
// the bot-check page served instead of the site until it passes.
func TestBrokenAnswerShapes(t *testing.T) {
	s, err := New("chatgpt-2026")
	require.NoError(t, err)
	defer s.Close()

	s.SetControl(Control{ErrorTurns: 2, ErrorAfter: 3})
	d := post(t, s.URL()+"/__fake/api/send", Sent{Prompt: "p"})
	id := d["conversation_id"].(string)
	assert.Equal(t, true, d["fail"])
	assert.Contains(t, d["error_text"], "Something went wrong while generating the response")
	assert.True(t, s.Conversation(id)[1].Failed)
	d = post(t, s.URL()+"/__fake/api/retry", map[string]string{"conversation_id": id})
	assert.Equal(t, true, d["fail"], "the second attempt fails too")
	d = post(t, s.URL()+"/__fake/api/retry", map[string]string{"conversation_id": id})
	assert.Nil(t, d["fail"], "the third answers")
	assert.Equal(t, "Answer 1 to: p "+Tail, d["answer"])
	assert.False(t, s.Conversation(id)[1].Failed)
	assert.Equal(t, 2, s.Retries())

	s.SetControl(Control{CutAfter: 2, CutKept: true})
	d = post(t, s.URL()+"/__fake/api/send", Sent{Prompt: "q"})
	kept := s.Conversation(d["conversation_id"].(string))[1]
	assert.Equal(t, Message{Role: "assistant", Content: "Answer 1", Cut: true}, kept)

	s.SetControl(Control{Challenge: true})
	code, page := get(t, s.URL()+"/c/any")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, page, "<title>Just a moment...</title>")
	assert.Contains(t, page, `id="challenge-running"`)
	assert.NotContains(t, page, "prompt-textarea", "no composer")
	resp, err := http.Post(s.URL()+"/__fake/api/challenge-passed", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	code, page = get(t, s.URL()+"/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, "prompt-textarea")
	assert.Equal(t, 1, s.Challenges())
}
