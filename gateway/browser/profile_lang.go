package browser

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// SelectorList is one CSS selector or several tried in order: the first one
// that matches a (visible, where it matters) element is used. In YAML it is
// a string or a list of strings.
type SelectorList []string

// UnmarshalYAML reads a string or a list of strings.
func (l *SelectorList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" || strings.TrimSpace(n.Value) == "" {
			*l = nil
			return nil
		}
		*l = SelectorList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(SelectorList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode || strings.TrimSpace(c.Value) == "" {
				return fmt.Errorf("line %d: a selector list holds non-empty CSS selector strings", c.Line)
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: must be a CSS selector or a list of them", n.Line)
}

// Empty says whether no selector is set.
func (l SelectorList) Empty() bool { return len(l) == 0 }

// String is the list as one CSS selector group (for messages).
func (l SelectorList) String() string { return strings.Join(l, ", ") }

// js is the list for the page scripts (never nil: a JSON array).
func (l SelectorList) js() []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// Target is an element to click or read: the first visible match of CSS
// (tried in order) whose text contains Text (case-insensitive; "" = any).
// In YAML a plain string or list is CSS alone.
type Target struct {
	CSS  SelectorList `yaml:"css"`
	Text string       `yaml:"text"`
}

// UnmarshalYAML reads a selector (list) or {css, text}.
func (t *Target) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		t.Text = ""
		return t.CSS.UnmarshalYAML(n)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "css":
			if err := t.CSS.UnmarshalYAML(n.Content[i+1]); err != nil {
				return err
			}
		case "text":
			t.Text = n.Content[i+1].Value
		default:
			return fmt.Errorf("line %d: %s: unknown field (known: css, text)", k.Line, k.Value)
		}
	}
	if t.CSS.Empty() {
		return fmt.Errorf("line %d: needs css (the element's selector)", n.Line)
	}
	return nil
}

// Empty says whether no element is named.
func (t Target) Empty() bool { return t.CSS.Empty() }

func (t Target) String() string {
	if t.Text == "" {
		return fmt.Sprintf("%q", t.CSS.String())
	}
	return fmt.Sprintf("%q with text %q", t.CSS.String(), t.Text)
}

func (t Target) js() map[string]any { return map[string]any{"css": t.CSS.js(), "text": t.Text} }

// Control is a site setting reached through steps: click each of Steps in
// turn (a menu button, a submenu entry), then read and set Item (a switch
// or menu item), read its state back and close the menu. A control without
// Item only opens (the upload menu that makes a file input appear).
type Control struct {
	// Steps are clicked in order to reach Item; each must show before it
	// is clicked.
	Steps []Target `yaml:"steps"`
	// Item turns the control on (and, without Off, off again: a toggle).
	Item Target `yaml:"item"`
	// Off is clicked to turn it off when the items are radio choices
	// (ChatGPT's effort menu: High on, Medium off).
	Off Target `yaml:"off"`
	// On is visible, inside the open menu, when the control is on; empty:
	// Item's own aria-checked / aria-pressed / aria-selected / checked, or
	// a "selected" class on it or inside it.
	On SelectorList `yaml:"on"`
	// Shown is visible with the menu closed when the control is on (the
	// mode picker's label "… Extended"); it saves opening the menu, and
	// reads the state back when the menu closes after a click. It is
	// trusted only while the first step shows.
	Shown Target `yaml:"shown"`
	// Always switches the control on before every prompt (a model or
	// effort choice the user wants for every request).
	Always bool `yaml:"always"`
	// Close is how the menu is closed afterwards: "escape" (default) or
	// "none" (the site closes it itself).
	Close string `yaml:"close"`
}

// control returns the named control, or nil.
func (p *Profile) control(name string) *Control {
	if c, ok := p.Controls[name]; ok && c != nil {
		return c
	}
	return nil
}

// HasDeepMode says whether the profile can switch deep mode.
func (p *Profile) HasDeepMode() bool { return p.control("deep_mode") != nil }

// isLoginURL says whether a page URL is one of the site's login pages.
func (p *Profile) isLoginURL(u string) bool {
	for _, re := range p.loginURL {
		if re.MatchString(u) {
			return true
		}
	}
	return false
}

// isPendingURL says whether a page URL is an interim conversation address.
func (p *Profile) isPendingURL(u string) bool {
	for _, re := range p.pendingURL {
		if re.MatchString(u) {
			return true
		}
	}
	return false
}

// validateLanguage checks and compiles the parts of a profile beyond
// plain selectors: login URLs, controls and notice kinds. It also turns
// the old selectors.deep_mode toggle into controls.deep_mode.
func (p *Profile) validateLanguage(add func(field, format string, args ...any)) {
	p.loginURL = nil
	for i, s := range p.LoginURL {
		re, err := regexp.Compile(s)
		if err != nil {
			add(fmt.Sprintf("login_url[%d]", i), "%v", err)
			continue
		}
		p.loginURL = append(p.loginURL, re)
	}
	p.pendingURL = nil
	for i, s := range p.PendingURL {
		re, err := regexp.Compile(s)
		if err != nil {
			add(fmt.Sprintf("pending_url[%d]", i), "%v", err)
			continue
		}
		p.pendingURL = append(p.pendingURL, re)
	}
	if !p.Selectors.DeepMode.Empty() {
		if p.Controls == nil {
			p.Controls = map[string]*Control{}
		}
		p.Controls["deep_mode"] = &Control{Item: Target{CSS: p.Selectors.DeepMode}, On: p.Selectors.DeepModeOn, Close: "none"}
		p.Selectors.DeepMode, p.Selectors.DeepModeOn = nil, nil
	}
	for name, c := range p.Controls {
		at := "controls." + name
		if c == nil {
			add(at, "empty; a control needs steps or an item")
			continue
		}
		if len(c.Steps) == 0 && c.Item.Empty() {
			add(at, "needs steps (what to click to reach it) or an item (what sets it)")
		}
		if name != "upload" && c.Item.Empty() {
			add(at+".item", "missing; the element that switches the control")
		}
		if !c.Off.Empty() && c.Item.Empty() {
			add(at+".off", "needs an item too")
		}
		switch c.Close {
		case "", "escape", "none":
		default:
			add(at+".close", "%q must be escape or none", c.Close)
		}
	}
	for i := range p.RateLimit.Patterns {
		switch k := p.RateLimit.Patterns[i].Kind; k {
		case "", NoticeCap, NoticeRate, NoticeDegraded, NoticeTransient, NoticeConversationFull:
		default:
			add(fmt.Sprintf("rate_limit.patterns[%d].kind", i), "%q must be one of: cap, rate, degraded, transient, conversation_full", k)
		}
	}
}
