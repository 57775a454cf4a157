package browser

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"fano/gateway/browser/fakechat"
)

func checkField(t *testing.T, r *CheckReport, field string) FieldCheck {
	t.Helper()
	for _, f := range r.Fields {
		if f.Field == field {
			return f
		}
	}
	t.Fatalf("no field %s in the report", field)
	return FieldCheck{}
}

// fano profile check lists every field and walks the controls without
// switching them or sending anything.
func TestCheckProfile(t *testing.T) {
	for _, site := range []string{"chatgpt", "claude", "gemini"} {
		t.Run(site, func(t *testing.T) {
			t.Parallel()
			f := newFixture2026(t, site, fakechat.Control{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var out bytes.Buffer
			r, err := CheckProfile(ctx, f.cfg, &out)
			require.NoError(t, err)
			t.Log(out.String())
			assert.Equal(t, 0, r.Problems, out.String())
			assert.True(t, checkField(t, r, "login").OK)
			assert.True(t, checkField(t, r, "selectors.prompt").OK)
			assert.NotContains(t, checkField(t, r, "selectors.login_wall").Detail, " 1 visible", "no login wall shows")
			dm := checkField(t, r, "controls.deep_mode")
			assert.True(t, dm.OK, dm.Detail)
			assert.Contains(t, dm.Detail, "state off")
			assert.Contains(t, out.String(), "0 problem(s)")
			if site == "gemini" {
				up := checkField(t, r, "controls.upload")
				assert.True(t, up.OK, up.Detail)
				assert.Contains(t, up.Detail, "selectors.file_input found 1")
			}
			assert.Empty(t, f.site.Sent(), "no prompt is sent")
		})
	}
	t.Run("problems", func(t *testing.T) {
		t.Parallel()
		f := newFixture2026(t, "chatgpt", fakechat.Control{Shape2026: fakechat.Shape2026{Guest: true}})
		p := f.cfg.Profile.clone()
		p.Selectors.Prompt = SelectorList{"#gone", "div.also-gone"}
		p.Controls["deep_mode"].Item.Text = "Ultra"
		p.Completion.LoadTimeoutSeconds = 3 // short, yet room for a page load on a loaded machine
		f.cfg.Profile = p
		f.cfg.ActionTimeout = time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var out bytes.Buffer
		r, err := CheckProfile(ctx, f.cfg, &out)
		require.NoError(t, err)
		t.Log(out.String())
		assert.Equal(t, 3, r.Problems, out.String())
		assert.Contains(t, checkField(t, r, "login").Detail, "neither the prompt input")
		assert.Equal(t, `not found: "#gone, div.also-gone"`, checkField(t, r, "selectors.prompt").Detail)
		assert.Contains(t, checkField(t, r, "controls.deep_mode").Detail, `item "[role='menuitemradio']" with text "Ultra" did not show`)
	})
}

// A site that sends the browser to its login page is reported as such.
func TestCheckProfileLoginPage(t *testing.T) {
	f := newFixture2026(t, "claude", fakechat.Control{LoginWall: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	r, err := CheckProfile(ctx, f.cfg, &out)
	require.NoError(t, err)
	t.Log(out.String())
	login := checkField(t, r, "login")
	assert.False(t, login.OK)
	assert.Regexp(t, `login (wall|page)`, login.Detail)
	assert.Contains(t, r.URL, "/login")
	assert.GreaterOrEqual(t, r.Problems, 1)
}

// A bot-check page is reported as what it is, with the command that lets
// a person pass it, not as a page without a prompt input.
func TestCheckProfileChallengePage(t *testing.T) {
	f := newFixture2026(t, "chatgpt", fakechat.Control{Challenge: true})
	f.cfg.Profile.Completion.LoadTimeoutSeconds = 1
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	r, err := CheckProfile(ctx, f.cfg, &out)
	require.NoError(t, err)
	t.Log(out.String())
	login := checkField(t, r, "login")
	assert.False(t, login.OK)
	assert.Contains(t, login.Detail, `bot check ("Just a moment...",`)
	assert.Contains(t, login.Detail, "fano login test-chatgpt")
	marker := checkField(t, r, "challenge.markers")
	assert.True(t, marker.OK, marker.Detail)
	assert.GreaterOrEqual(t, r.Problems, 1)
}
