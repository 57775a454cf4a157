// Package fakechat serves the fake chat web UIs of testdata/chatui on
// 127.0.0.1 for tests that drive a real browser: one Server per site
// (chatgpt, gemini, claude), conversations kept in memory, and a control
// (Server.SetControl or POST /__fake/control) for the login wall, the
// rate-limit banner, streaming speed and "generate forever".
//
// The answer to a prompt is "Answer <turn> to: <prompt>", prefixed with
// "[deep mode] " when deep mode was on and followed by the attached file
// names, then a fixed tail ending in "(end of answer)".
package fakechat

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Sites are the fake UIs, one per built-in site profile, and "turns": a
// site no built-in profile knows, with a completion toolbar under each
// finished answer (see testdata/chatui/turns).
var Sites = []string{"chatgpt", "gemini", "claude", "turns"}

// Tail ends every complete answer.
const Tail = "This answer is streamed token by token, so a reader must wait for its end. (end of answer)"

// Control is how the fake site behaves; the zero value is a plain,
// logged-in site without limits.
type Control struct {
	// LoginWall shows the login wall instead of the composer.
	LoginWall bool `json:"login_wall"`
	// Limit answers are given, then every send shows the rate-limit
	// banner instead of answering; 0 = no limit.
	Limit int `json:"limit"`
	// BannerOnLoad also shows the banner when a page loads once the limit
	// is reached (before anything is sent).
	BannerOnLoad bool `json:"banner_on_load"`
	// Banner is the banner's text (default: the site's "try again later").
	Banner string `json:"banner"`
	// FullAfter: a conversation that holds this many answers is full: a
	// send to it shows FullBanner instead of answering, while a new
	// conversation answers; 0 = never full.
	FullAfter  int    `json:"full_after"`
	FullBanner string `json:"full_banner"`
	// Forever keeps an answer streaming until the stop button is clicked.
	Forever bool `json:"forever"`
	// TokenMS is the delay between streamed tokens (default 5).
	TokenMS int `json:"token_ms"`
	// PauseMS pauses before the last token, with the stop button still
	// shown (a reader that only waits for stable text ends too early).
	PauseMS int `json:"pause_ms"`
	// HistoryDelayMS delays showing a loaded conversation's earlier turns
	// after the composer (default 100).
	HistoryDelayMS int `json:"history_delay_ms"`
	// StallAfter streams this many tokens, then stops growing while still
	// showing the stop button (a hung answer); 0 = never.
	StallAfter int `json:"stall_after"`
	// NoStart accepts a send but never shows an answer or the stop button.
	NoStart bool `json:"no_start"`
	// SendHoldMS keeps the send button's click handler busy this long
	// after the prompt has gone to the server (read when a page loads):
	// the site has the prompt while the click has not returned.
	SendHoldMS int `json:"send_hold_ms"`
	// Challenge serves the CDN's bot-check page ("Just a moment...",
	// #challenge-running, its challenge-platform script, no composer)
	// instead of the site.
	Challenge bool `json:"challenge"`
	// ChallengeClearMS: the bot check passes by itself this long after
	// it shows, and the site loads again (0: it never does).
	ChallengeClearMS int `json:"challenge_clear_ms"`
	// CutAfter: an answer's stream ends after this many tokens without
	// the site's completion signal (the stop button goes, no action bar
	// shows); 0 = never.
	CutAfter int `json:"cut_after"`
	// CutKept: the site kept only the cut text, so the conversation read
	// again still shows the answer cut; otherwise the site finished it on
	// its side and a reload shows it whole.
	CutKept bool `json:"cut_kept"`
	// ErrorTurns: this many attempts at an answer (sends and clicks on the
	// turn's Retry) end in the site's error turn after ErrorAfter tokens;
	// the attempts after them answer.
	ErrorTurns int `json:"error_turns"`
	ErrorAfter int `json:"error_after"`
	// Shape2026 is how a 2026 page (see Sites2026) behaves; ignored by the
	// 2025 pages.
	Shape2026
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Cut: the answer was kept cut (Control.CutKept); shown without its
	// completion signal.
	Cut bool `json:"cut,omitempty"`
	// Failed: the answer's last attempt ended in an error turn.
	Failed bool `json:"failed,omitempty"`
}

// Sent is one send the server received.
type Sent struct {
	Conversation string   `json:"conversation_id"`
	Prompt       string   `json:"prompt"`
	Deep         bool     `json:"deep"`
	Attachments  []string `json:"attachments"`
}

// Server is one fake site on 127.0.0.1. Safe for concurrent use.
type Server struct {
	site string
	dir  string
	srv  *httptest.Server

	mu       sync.Mutex
	ctl      Control
	convs    map[string][]Message
	sent     []Sent
	answered int
	stops    int
	stopped  chan struct{} // closed and replaced on every stop
	sendSeen chan struct{} // closed and replaced on every send
	streams  int
	// streamSeen is closed and replaced whenever a page starts showing
	// an answer (the page tells the server).
	streamSeen chan struct{}
	// owners maps a conversation to the account (browser profile, by its
	// cookie) that made it: like the real sites, another account's
	// conversation is not found.
	owners map[string]string
	// errorsLeft counts down Control.ErrorTurns; retries counts clicks on
	// an error turn's Retry.
	errorsLeft int
	retries    int
	challenges int // bot-check pages served
	loads      int // conversations a page loaded (opened or reloaded)
}

// accountCookie names a browser profile's account on the fake site.
const accountCookie = "fake_account"

// New starts the fake site on 127.0.0.1, serving testdata/chatui (see Dir).
func New(site string) (*Server, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return NewInDir(dir, site)
}

// NewInDir starts the fake site, serving the UIs under dir.
func NewInDir(dir, site string) (*Server, error) {
	if !slices.Contains(Sites, site) && !slices.Contains(Sites2026, site) {
		return nil, fmt.Errorf("fakechat: unknown site %q (known: %s)", site, strings.Join(append(slices.Clone(Sites), Sites2026...), ", "))
	}
	if _, err := os.Stat(filepath.Join(dir, siteDir(site), "index.html")); err != nil {
		return nil, fmt.Errorf("fakechat: %w", err)
	}
	s := &Server{site: site, dir: dir, convs: map[string][]Message{}, owners: map[string]string{}, stopped: make(chan struct{}), sendSeen: make(chan struct{}), streamSeen: make(chan struct{})}
	s.srv = httptest.NewServer(s.routes())
	return s, nil
}

// Dir finds testdata/chatui: $FANO_CHATUI_DIR, else by walking up from the
// working directory to the module root.
func Dir() (string, error) {
	if d := os.Getenv("FANO_CHATUI_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testdata", "chatui"), nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("fakechat: no go.mod above the working directory; set FANO_CHATUI_DIR")
		}
	}
}

// URL is the site's base URL, like http://127.0.0.1:41234.
func (s *Server) URL() string { return s.srv.URL }

// Site is the site's name.
func (s *Server) Site() string { return s.site }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Control returns the current behaviour.
func (s *Server) Control() Control {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctl
}

// SetControl sets the behaviour; it also restarts the answer count that
// Limit applies to.
func (s *Server) SetControl(c Control) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctl = c
	s.answered = 0
	s.errorsLeft = c.ErrorTurns
}

// Retries returns how often an error turn's Retry was clicked.
func (s *Server) Retries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retries
}

// Loads returns how many times a page loaded a conversation's turns
// (opening or reloading its address).
func (s *Server) Loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// Challenges returns how many bot-check pages were served.
func (s *Server) Challenges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.challenges
}

// Sent returns every send received, oldest first.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Sends returns how many sends were received, and a channel that is
// closed at the next one.
func (s *Server) Sends() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent), s.sendSeen
}

// Streams returns how many answers a page began to show, and a channel
// that is closed at the next one.
func (s *Server) Streams() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams, s.streamSeen
}

// Conversation returns a conversation's turns (nil if unknown).
func (s *Server) Conversation(id string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.convs[id])
}

// Stops returns how often a stop button was clicked, and a channel that is
// closed at the next click.
func (s *Server) Stops() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stops, s.stopped
}

// Forget deletes a conversation: loading its URL then finds nothing and
// the page goes to a new chat, like a conversation deleted on the site.
func (s *Server) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.convs, id)
	delete(s.owners, id)
}

// ConversationID returns the id in a conversation URL of this site.
func (s *Server) ConversationID(url string) string {
	i := strings.LastIndexByte(url, '/')
	if i < 0 {
		return ""
	}
	return url[i+1:]
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /__fake/common/", http.StripPrefix("/__fake/common/", noCache(http.FileServer(http.Dir(filepath.Join(s.dir, "common"))))))
	mux.Handle("GET /__fake/site/", http.StripPrefix("/__fake/site/", noCache(http.FileServer(http.Dir(filepath.Join(s.dir, siteDir(s.site)))))))
	mux.HandleFunc("GET /__fake/api/session", s.session)
	mux.HandleFunc("GET /__fake/api/conversation/{id}", s.conversation)
	mux.HandleFunc("POST /__fake/api/send", s.send)
	mux.HandleFunc("POST /__fake/api/stop", s.stop)
	mux.HandleFunc("POST /__fake/api/streaming", s.streaming)
	mux.HandleFunc("POST /__fake/api/retry", s.retry)
	mux.HandleFunc("POST /__fake/api/challenge-passed", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		s.ctl.Challenge = false
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	// The CDN's challenge script, loaded by the bot-check page.
	mux.HandleFunc("GET /cdn-cgi/challenge-platform/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte("window._cf_chl_opt = window._cf_chl_opt || {};\n"))
	})
	mux.HandleFunc("GET /__fake/control", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Control()) })
	mux.HandleFunc("POST /__fake/control", func(w http.ResponseWriter, r *http.Request) {
		var c Control
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetControl(c)
		writeJSON(w, c)
	})
	mux.HandleFunc("GET /favicon.ico", http.NotFound)
	// Every other path is the single-page app (start page, conversations).
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s.mu.Lock()
		challenge := s.ctl.Challenge
		if challenge {
			s.challenges++
		}
		s.mu.Unlock()
		if challenge {
			// Like the CDN: status 403 and its own page.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			http.ServeFile(noStatus{w}, r, filepath.Join(s.dir, "common", "challenge.html"))
			return
		}
		http.ServeFile(w, r, filepath.Join(s.dir, siteDir(s.site), "index.html"))
	})
	return mux
}

// noStatus is a ResponseWriter whose status was written already.
type noStatus struct{ http.ResponseWriter }

func (noStatus) WriteHeader(int) {}

func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// banner returns the banner text when the limit is reached ("" if not).
// Called with mu held.
func (s *Server) banner() string {
	if s.ctl.Limit <= 0 || s.answered < s.ctl.Limit {
		return ""
	}
	if s.ctl.Banner != "" {
		return s.ctl.Banner
	}
	switch baseSite(s.site) {
	case "claude":
		return "You are out of free messages. Please try again later."
	case "gemini":
		return "You've reached your limit. Try again later."
	default:
		return "You've reached our limit of messages per hour. Please try again later."
	}
}

// account returns the request's account ("" for a client without one,
// whose conversations anyone may open), giving a new browser profile one.
func account(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(accountCookie); err == nil && c.Value != "" {
		return c.Value
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	http.SetCookie(w, &http.Cookie{Name: accountCookie, Value: hex.EncodeToString(b), Path: "/", MaxAge: 365 * 24 * 3600})
	return ""
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	account(w, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	delay := s.ctl.HistoryDelayMS
	if delay == 0 {
		delay = 100
	}
	banner := ""
	if s.ctl.BannerOnLoad {
		banner = s.banner()
	}
	writeJSON(w, map[string]any{"login_wall": s.ctl.LoginWall, "banner": banner, "history_delay_ms": delay, "send_hold_ms": s.ctl.SendHoldMS, "shape": s.ctl.Shape2026,
		"error_text": s.errorText(), "challenge_clear_ms": s.ctl.ChallengeClearMS})
}

func (s *Server) conversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	acct := account(w, r)
	s.mu.Lock()
	msgs, ok := s.convs[id]
	msgs = slices.Clone(msgs)
	owner := s.owners[id]
	s.loads++
	s.mu.Unlock()
	if !ok || (owner != "" && owner != acct) {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, map[string]any{"id": id, "messages": msgs})
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var in Sent
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	acct := account(w, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, in)
	close(s.sendSeen)
	s.sendSeen = make(chan struct{})
	if s.ctl.LoginWall {
		writeJSON(w, map[string]any{"login_wall": true})
		return
	}
	notice := s.ctl.Notice
	if b := s.banner(); b != "" {
		if !s.ctl.BannerAnswers {
			writeJSON(w, map[string]any{"banner": b})
			return
		}
		notice = b
	}
	id := in.Conversation
	if _, ok := s.convs[id]; !ok || id == "" || (s.owners[id] != "" && s.owners[id] != acct) {
		id = s.newID()
		s.owners[id] = acct
	}
	if s.ctl.FullAfter > 0 && len(s.convs[id])/2 >= s.ctl.FullAfter {
		writeJSON(w, map[string]any{"banner": s.ctl.FullBanner})
		return
	}
	turn := len(s.convs[id])/2 + 1
	answer := fmt.Sprintf("Answer %d to: %s", turn, in.Prompt)
	if in.Deep {
		answer = "[deep mode] " + answer
	}
	if len(in.Attachments) > 0 {
		answer += " [attachments: " + strings.Join(in.Attachments, ", ") + "]"
	}
	answer += " " + Tail
	stored := answer
	if s.ctl.Forever {
		stored = answer + " (stopped)"
	}
	reply := Message{Role: "assistant", Content: stored}
	if s.ctl.CutAfter > 0 && s.ctl.CutKept {
		reply.Content, reply.Cut = firstTokens(answer, s.ctl.CutAfter), true
	}
	s.convs[id] = append(s.convs[id], Message{Role: "user", Content: in.Prompt}, reply)
	s.answered++
	resp := s.attempt(id, answer)
	resp["conversation_id"] = id
	if notice != "" {
		resp["banner"] = notice // shown while the answer still comes
	}
	if s.ctl.StartDelayMS > 0 {
		resp["start_ms"] = s.ctl.StartDelayMS
	}
	writeJSON(w, resp)
}

// attempt is the page's instructions for streaming answer, the last turn
// of conversation id: how fast, and whether this attempt stalls, is cut or
// ends in an error turn. Called with mu held.
func (s *Server) attempt(id, answer string) map[string]any {
	tokenMS := s.ctl.TokenMS
	if tokenMS == 0 {
		tokenMS = 5
	}
	resp := map[string]any{
		"answer": answer, "forever": s.ctl.Forever,
		"token_ms": tokenMS, "pause_ms": s.ctl.PauseMS,
		"stall_after": s.ctl.StallAfter, "no_start": s.ctl.NoStart,
		"cut_after": s.ctl.CutAfter,
	}
	msgs := s.convs[id]
	last := &msgs[len(msgs)-1]
	last.Failed = s.errorsLeft > 0
	if s.errorsLeft > 0 {
		s.errorsLeft--
		resp["fail"], resp["error_after"], resp["error_text"] = true, s.ctl.ErrorAfter, s.errorText()
	}
	return resp
}

// retry is a click on an error turn's Retry: the conversation's last
// answer is attempted again.
func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Conversation string `json:"conversation_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := s.convs[in.Conversation]
	if len(msgs) == 0 {
		http.NotFound(w, r)
		return
	}
	s.retries++
	answer := strings.TrimSuffix(msgs[len(msgs)-1].Content, " (stopped)")
	writeJSON(w, s.attempt(in.Conversation, answer))
}

// errorText is what the site's error turn says.
func (s *Server) errorText() string {
	switch baseSite(s.site) {
	case "claude":
		return "Claude’s response could not be fully generated"
	case "gemini":
		return "Something went wrong and the response wasn’t generated."
	default:
		return "Something went wrong while generating the response. If this issue persists please contact us through our help center at help.openai.com."
	}
}

// firstTokens is the first n tokens of s as the page streams them.
func firstTokens(s string, n int) string {
	toks := reToken.FindAllString(s, -1)
	if n < len(toks) {
		toks = toks[:n]
	}
	return strings.TrimSpace(strings.Join(toks, ""))
}

var reToken = regexp.MustCompile(`\S+\s*`)

func (s *Server) stop(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops++
	close(s.stopped)
	s.stopped = make(chan struct{})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) streaming(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams++
	close(s.streamSeen)
	s.streamSeen = make(chan struct{})
	w.WriteHeader(http.StatusNoContent)
}

// newID makes a conversation id shaped like the site's. Called with mu held.
func (s *Server) newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	if baseSite(s.site) == "gemini" {
		return h[:16]
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
