package fakechat

import "strings"

// Sites2026 are the fake UIs shaped like the sites in 2026 (testdata/chatui/
// 2026/<site>): menus for deep mode, notices in dialogs and toasts, login
// pages, guest mode, ChatGPT's gradual new markup. They share the server's
// behaviour (conversations, streaming, Control) with the 2025 pages.
var Sites2026 = []string{"chatgpt-2026", "claude-2026", "gemini-2026"}

// Shape2026 is what a 2026 page shows besides the shared behaviour.
type Shape2026 struct {
	// NewMarkup renders answers in ChatGPT's markup rolled out from about
	// 2026-09 (data-*-search-unit-key) instead of data-message-author-role.
	NewMarkup bool `json:"new_markup"`
	// Guest shows the composer without a login (ChatGPT, Gemini).
	Guest bool `json:"guest"`
	// Notice is shown in the site's notice container when an answer
	// starts, while the answer still comes (a degraded-model notice, an
	// unrelated toast).
	Notice string `json:"notice"`
	// NoticeOnLoad is shown in the notice container when a page loads
	// (a "what's new" dialog, a leftover toast).
	NoticeOnLoad string `json:"notice_on_load"`
	// StartDelayMS delays the start of an answer after a send.
	StartDelayMS int `json:"start_delay_ms"`
	// NoticeContainer is where Notice and the banner show: "dialog"
	// (default), "toast" or "error" (ChatGPT's text-error line).
	NoticeContainer string `json:"notice_container"`
	// BannerAnswers: once the limit is reached the banner shows but the
	// answer still comes (a degraded notice that keeps answering).
	BannerAnswers bool `json:"banner_answers"`
	// PendingURL: ChatGPT first shows /c/WEB:<request id> after a send
	// and the real conversation address only a second later.
	PendingURL bool `json:"pending_url"`
	// ArtifactPanel shows Claude's artifact side panel (which carries the
	// answer class outside the turns) with this text.
	ArtifactPanel string `json:"artifact_panel"`
}

// siteDir is the directory of a site under testdata/chatui.
func siteDir(site string) string {
	if b, ok := strings.CutSuffix(site, "-2026"); ok {
		return "2026/" + b
	}
	return site
}

// baseSite is the site a fake UI stands for ("chatgpt" for chatgpt-2026).
func baseSite(site string) string {
	b, _ := strings.CutSuffix(site, "-2026")
	return b
}
