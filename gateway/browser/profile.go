package browser

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Profile is everything fano knows about one chat web site: where to start,
// which elements to drive and read, and how to tell "done", "rate limited"
// and "logged out" apart. Selectors are CSS selectors (document.querySelectorAll
// syntax), so one poll of the page reads them all in a single round trip.
//
// A Profile is immutable once loaded; backends share it freely.
type Profile struct {
	// Name is the profile's key (built in: chatgpt, gemini, claude).
	Name string `yaml:"-"`
	// Extends names the profile this one starts from (user profiles only);
	// fields this one sets replace the base's, lists as a whole.
	Extends string `yaml:"extends,omitempty"`
	// StartURL is where a new conversation starts.
	StartURL   string     `yaml:"start_url"`
	Selectors  Selectors  `yaml:"selectors"`
	Completion Completion `yaml:"completion"`
	RateLimit  RateLimit  `yaml:"rate_limit"`
	// LoginURL are regular expressions on the page's URL: a page whose
	// URL matches one is a login page (a redirect to /login).
	LoginURL []string `yaml:"login_url"`
	// PendingURL are regular expressions on the page's URL: a conversation
	// address matching one is an interim one (ChatGPT's /c/WEB:<id> right
	// after sending); fano waits for the real one and never stores it.
	PendingURL []string `yaml:"pending_url"`
	// Controls are the site's settings reached through steps (open a
	// menu, pick an item, read its state, close). Names fano drives:
	// deep_mode (on when a request asks for deep mode, off otherwise) and
	// upload (walked before selectors.file_input is used); any control
	// with always: true is switched on before every prompt (a model or
	// effort choice). `fano profile check` walks them all.
	Controls map[string]*Control `yaml:"controls"`
	// StartupCheck names the selectors (fields of Selectors, like "prompt")
	// that must match something on the start page when the backend starts;
	// default prompt and send.
	StartupCheck []string `yaml:"startup_check"`

	// Complete is a selector list that appears when an answer is done (the
	// toolbar under it); a new match ends the wait at once. Empty: the
	// answer is done once its text was stable for completion.stable_ms.
	Complete SelectorList `yaml:"complete"`
	// AnswerText is how the answer is read: innerText (default),
	// textContent, attribute:<name> of the answer element, or
	// copy:<selector>: the site's copy button (in or after the answer)
	// gives the answer's markdown (caught inside the page; the desktop's
	// clipboard is not touched).
	AnswerText string `yaml:"answer_text"`
	// MaxStallSeconds: an answer whose text does not grow for this long
	// while the generating signal stays is stalled (stopped; what it shows
	// is kept if it validates). Default 120; ten times that in deep mode
	// (it thinks before it writes), never beyond max_answer_seconds.
	MaxStallSeconds int `yaml:"max_stall_seconds"`
	// MaxAnswerSeconds bounds one answer from sending to done; default 1800.
	MaxAnswerSeconds int `yaml:"max_answer_seconds"`
	// ConversationGone matches the site's "conversation not found" notice.
	// A conversation is also gone when its URL redirects elsewhere or it
	// loads with no answer.
	ConversationGone SelectorList `yaml:"conversation_gone"`
	// Challenge recognises the bot-check page a site's CDN shows instead
	// of the chat ("Just a moment..."): the backend waits for a person.
	Challenge Challenge `yaml:"challenge"`
	// ErrorTurn recognises an answer the site ended with an error, and
	// the site's own control that asks for it again.
	ErrorTurn ErrorTurn `yaml:"error_turn"`

	loginURL   []*regexp.Regexp
	pendingURL []*regexp.Regexp
}

// Selectors locate the elements of a chat page. Each is a SelectorList: one
// CSS selector, or a list of them tried in order (the first one that
// matches anything is used), for a site that rolls out new markup
// gradually and shows old and new shapes at once.
type Selectors struct {
	// Prompt is the input the prompt is typed into (textarea or
	// contenteditable).
	Prompt SelectorList `yaml:"prompt"`
	// Send is the button that sends the prompt.
	Send SelectorList `yaml:"send"`
	// Answer matches every assistant answer of the conversation; the last
	// match is the answer being written.
	Answer SelectorList `yaml:"answer"`
	// Generating is visible while an answer is still being written (often
	// the stop button). Empty: completion is decided by stability alone.
	Generating SelectorList `yaml:"generating"`
	// Stop stops a running answer (clicked when a request is abandoned);
	// default: Generating.
	Stop SelectorList `yaml:"stop"`
	// LoginWall is visible when the site wants a login.
	LoginWall SelectorList `yaml:"login_wall"`
	// LoggedIn is on the page (visible or not: it may sit in a collapsed
	// sidebar) only when a user is logged in (an account menu). Set it for sites that let guests chat: a visible composer
	// without it is guest mode, which fano treats as a login wall.
	LoggedIn SelectorList `yaml:"logged_in"`
	// DeepMode is the old single-toggle form of controls.deep_mode: the
	// element clicked, its state read from DeepModeOn when set, else from
	// its aria-pressed / aria-checked / checked. When set it replaces
	// controls.deep_mode.
	DeepMode   SelectorList `yaml:"deep_mode"`
	DeepModeOn SelectorList `yaml:"deep_mode_on"`
	// FileInput is the <input type=file> that image attachments go into;
	// controls.upload, when set, is walked first to make it appear.
	FileInput SelectorList `yaml:"file_input"`
}

// Completion says when an answer is complete: the Generating signal is gone
// and the answer's text has not changed for StableMS.
type Completion struct {
	StableMS int `yaml:"stable_ms"`
	// PollMS is how often the page is read.
	PollMS int `yaml:"poll_ms"`
	// StartTimeoutSeconds bounds the wait for an answer to begin after
	// sending (neither a new answer nor the Generating signal).
	StartTimeoutSeconds int `yaml:"start_timeout_seconds"`
	// LoadTimeoutSeconds bounds loading a page until its prompt input shows.
	LoadTimeoutSeconds int `yaml:"load_timeout_seconds"`
}

// RateLimit describes the site's rate-limit notice.
type RateLimit struct {
	// Banner matches the containers notices show in (dialogs, alerts,
	// toasts); only a visible one counts.
	Banner SelectorList `yaml:"banner"`
	// Patterns are tried in order on the banner's text; the first match
	// says what the notice is (kind) and how to read its time. A visible
	// banner that no pattern matches is an ordinary error (transient), not
	// a limit: containers like dialogs and toasts hold other messages too.
	Patterns []Pattern `yaml:"patterns"`
}

// Retry kinds of a Pattern.
const (
	// RetryAbsolute: the named group "time" holds a clock time ("3:45 PM",
	// "15:45", optionally with a weekday or "tomorrow").
	RetryAbsolute = "absolute"
	// RetryRelative: the named group "in" holds a duration ("27 minutes",
	// "1 hour and 5 minutes", "2h 30m").
	RetryRelative = "relative"
	// RetryNone: no time given; wait for the next quota window.
	RetryNone = "none"
)

// Pattern is one way a rate-limit banner is worded.
type Pattern struct {
	// Match is an RE2 regular expression, like
	// `(?i)try again in (?P<in>[^.]+)`.
	Match string `yaml:"match"`
	// Retry is RetryAbsolute, RetryRelative or RetryNone.
	Retry string `yaml:"retry"`
	// Kind is what the notice means: cap (a usage cap), rate (a short
	// rate limit), degraded (the site answers with another model; a named
	// group "model" may hold the model it ran out of), transient (an
	// ordinary error) or conversation_full (the conversation reached the
	// site's length limit: the task goes on in a new one). Default: rate
	// for retry relative, else cap.
	Kind string `yaml:"kind"`

	re *regexp.Regexp
}

func (pt *Pattern) kind() string {
	switch {
	case pt.Kind != "":
		return pt.Kind
	case pt.Retry == RetryRelative:
		return NoticeRate
	default:
		return NoticeCap
	}
}

// selectorFields are the Selectors fields by YAML name, for StartupCheck
// and error messages.
var selectorFields = yamlFields(reflect.TypeFor[Selectors]())

// selector returns the selectors of a Selectors field by its YAML name.
func (s *Selectors) selector(field string) SelectorList {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == field {
			l, _ := v.Field(i).Interface().(SelectorList)
			return l
		}
	}
	return nil
}

// StopSelector is Stop, else Generating.
func (s *Selectors) StopSelector() SelectorList {
	if !s.Stop.Empty() {
		return s.Stop
	}
	return s.Generating
}

// Default completion timings.
const (
	defaultStableMS     = 2000
	defaultPollMS       = 400
	defaultStartTimeout = 120
	defaultLoadTimeout  = 60
	defaultMaxStall     = 120
	defaultMaxAnswer    = 1800
)

func (p *Profile) maxStall() time.Duration { return time.Duration(p.MaxStallSeconds) * time.Second }
func (p *Profile) maxAnswer() time.Duration {
	return time.Duration(p.MaxAnswerSeconds) * time.Second
}

func (p *Profile) stable() time.Duration {
	return time.Duration(p.Completion.StableMS) * time.Millisecond
}
func (p *Profile) poll() time.Duration { return time.Duration(p.Completion.PollMS) * time.Millisecond }
func (p *Profile) startTimeout() time.Duration {
	return time.Duration(p.Completion.StartTimeoutSeconds) * time.Second
}
func (p *Profile) loadTimeout() time.Duration {
	return time.Duration(p.Completion.LoadTimeoutSeconds) * time.Second
}

// fillDefaults sets the timings and startup check a profile leaves out.
func (p *Profile) fillDefaults() {
	c := &p.Completion
	if c.StableMS == 0 {
		c.StableMS = defaultStableMS
	}
	if c.PollMS == 0 {
		c.PollMS = defaultPollMS
	}
	if c.StartTimeoutSeconds == 0 {
		c.StartTimeoutSeconds = defaultStartTimeout
	}
	if c.LoadTimeoutSeconds == 0 {
		c.LoadTimeoutSeconds = defaultLoadTimeout
	}
	if p.StartupCheck == nil {
		p.StartupCheck = []string{"prompt", "send"}
	}
	if p.MaxStallSeconds == 0 {
		p.MaxStallSeconds = defaultMaxStall
	}
	if p.MaxAnswerSeconds == 0 {
		p.MaxAnswerSeconds = defaultMaxAnswer
	}
	if p.Challenge.WaitSeconds == 0 {
		p.Challenge.WaitSeconds = defaultChallengeWait
	}
	if p.ErrorTurn.Retries == 0 {
		p.ErrorTurn.Retries = defaultErrorTurnRetries
	}
}

// clone returns a deep copy.
func (p *Profile) clone() *Profile {
	c := *p
	c.StartupCheck = slices.Clone(p.StartupCheck)
	c.RateLimit.Patterns = slices.Clone(p.RateLimit.Patterns)
	c.LoginURL = slices.Clone(p.LoginURL)
	c.loginURL = slices.Clone(p.loginURL)
	c.PendingURL = slices.Clone(p.PendingURL)
	c.pendingURL = slices.Clone(p.pendingURL)
	c.Challenge.Title = slices.Clone(p.Challenge.Title)
	c.Challenge.title = slices.Clone(p.Challenge.title)
	c.ErrorTurn.Match = slices.Clone(p.ErrorTurn.Match)
	c.ErrorTurn.match = slices.Clone(p.ErrorTurn.match)
	if p.Controls != nil {
		c.Controls = make(map[string]*Control, len(p.Controls))
		for k, v := range p.Controls {
			cc := *v
			c.Controls[k] = &cc
		}
	}
	return &c
}

// WithBaseURL returns a copy of p whose start URL has the scheme and host
// of base (for example the 127.0.0.1 address of a test server); the path
// is kept.
func (p *Profile) WithBaseURL(base string) (*Profile, error) {
	b, err := url.Parse(base)
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
		return nil, fmt.Errorf("site profile %s: base URL %q: must be an http(s) URL like http://127.0.0.1:8080", p.Name, base)
	}
	if b.Path != "" && b.Path != "/" {
		return nil, fmt.Errorf("site profile %s: base URL %q: must not have a path (the start URL's path is kept)", p.Name, base)
	}
	u, err := url.Parse(p.StartURL)
	if err != nil {
		return nil, fmt.Errorf("site profile %s: start_url %q: %w", p.Name, p.StartURL, err)
	}
	u.Scheme, u.Host = b.Scheme, b.Host
	c := p.clone()
	c.StartURL = u.String()
	return c, nil
}

// origin returns scheme://host of the start URL.
func (p *Profile) origin() string {
	u, err := url.Parse(p.StartURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

//go:embed profiles/*.yaml
var builtinFS embed.FS

// Builtin returns the built-in site profiles (chatgpt, gemini, claude),
// freshly loaded so callers may keep them.
func Builtin() (map[string]*Profile, error) {
	entries, err := fs.ReadDir(builtinFS, "profiles")
	if err != nil {
		return nil, err
	}
	out := map[string]*Profile{}
	var errs []error
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		data, err := builtinFS.ReadFile(path.Join("profiles", e.Name()))
		if err != nil {
			return nil, err
		}
		var root yaml.Node
		file := "built-in profiles/" + e.Name()
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		doc := docNode(&root)
		p := &Profile{}
		ls := &lineSource{file: file}
		if err := ls.decode(doc, p, reflect.TypeFor[Profile](), ""); err != nil {
			errs = append(errs, err)
			continue
		}
		p.Name = name
		if err := ls.validate(p, ""); err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = p
	}
	return out, errors.Join(errs...)
}

// LoadProfiles returns the built-in profiles with the user profiles of
// file (if file is not "") added on top. The file has one key, profiles,
// mapping a name to a profile. A user profile named like a built-in one
// changes only the fields it sets (to fix one selector after a site
// changed); `extends: <name>` starts a new profile from another. Every
// problem is reported with the file, line and field.
func LoadProfiles(file string) (map[string]*Profile, error) {
	profiles, err := Builtin()
	if err != nil {
		return nil, fmt.Errorf("built-in site profiles: %w", err)
	}
	if file == "" {
		return profiles, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("site profiles file: %w", err)
	}
	return parseUserProfiles(data, file, profiles)
}

// ParseProfiles is LoadProfiles on bytes; name is used in messages.
func ParseProfiles(data []byte, name string) (map[string]*Profile, error) {
	profiles, err := Builtin()
	if err != nil {
		return nil, fmt.Errorf("built-in site profiles: %w", err)
	}
	return parseUserProfiles(data, name, profiles)
}

func parseUserProfiles(data []byte, file string, profiles map[string]*Profile) (map[string]*Profile, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return profiles, nil // an empty file adds nothing
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	ls := &lineSource{file: file}
	doc := docNode(&root)
	if doc.Kind != yaml.MappingNode {
		return nil, ls.errorf(doc, "", "must be a mapping with the key profiles")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k := doc.Content[i]
		if k.Value != "profiles" {
			return nil, ls.errorf(k, k.Value, "unknown key; the file has one key, profiles")
		}
		list = doc.Content[i+1]
	}
	if list == nil || list.ShortTag() == "!!null" {
		return profiles, nil
	}
	if list.Kind != yaml.MappingNode {
		return nil, ls.errorf(list, "profiles", "must map a profile name to a profile")
	}
	// Resolve in file order; extends may name a built-in or an earlier
	// user profile.
	var errs []error
	for i := 0; i+1 < len(list.Content); i += 2 {
		name, node := list.Content[i].Value, list.Content[i+1]
		at := "profiles." + name
		if strings.TrimSpace(name) == "" {
			errs = append(errs, ls.errorf(list.Content[i], at, "a profile needs a name"))
			continue
		}
		if node.Kind != yaml.MappingNode {
			errs = append(errs, ls.errorf(node, at, "must be a mapping of profile fields"))
			continue
		}
		base := &Profile{}
		if ext := mapValue(node, "extends"); ext != nil {
			b, ok := profiles[ext.Value]
			if !ok {
				errs = append(errs, ls.errorf(ext, at+".extends", "unknown profile %q (known: %s)", ext.Value, strings.Join(Names(profiles), ", ")))
				continue
			}
			base = b.clone()
		} else if b, ok := profiles[name]; ok {
			base = b.clone()
		}
		if err := ls.decode(node, base, reflect.TypeFor[Profile](), at); err != nil {
			errs = append(errs, err)
			continue
		}
		base.Name = name
		if err := ls.validate(base, at); err != nil {
			errs = append(errs, err)
			continue
		}
		profiles[name] = base
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return profiles, nil
}

// Names returns the profile names, sorted.
func Names(profiles map[string]*Profile) []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lineSource decodes YAML nodes strictly and reports errors with the file,
// line and field path.
type lineSource struct {
	file  string
	lines map[string]int // field path -> line
}

func (ls *lineSource) errorf(n *yaml.Node, at, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if at != "" {
		msg = at + ": " + msg
	}
	if n != nil && n.Line > 0 {
		return fmt.Errorf("%s:%d: %s", ls.file, n.Line, msg)
	}
	return fmt.Errorf("%s: %s", ls.file, msg)
}

// line returns the line of a field path, 0 if unknown.
func (ls *lineSource) line(at string) int { return ls.lines[at] }

// fieldErr reports a validation problem at a field path.
func (ls *lineSource) fieldErr(at, format string, args ...any) error {
	msg := at + ": " + fmt.Sprintf(format, args...)
	if l := ls.line(at); l > 0 {
		return fmt.Errorf("%s:%d: %s", ls.file, l, msg)
	}
	return fmt.Errorf("%s: %s", ls.file, msg)
}

// decode checks that node only uses known fields of t (recording their
// lines), then decodes it onto out, keeping the fields it does not set.
func (ls *lineSource) decode(node *yaml.Node, out any, t reflect.Type, at string) error {
	if ls.lines == nil {
		ls.lines = map[string]int{}
	}
	if err := ls.check(node, t, at); err != nil {
		return err
	}
	if err := node.Decode(out); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			if m := reYAMLLine.FindStringSubmatch(te.Errors[0]); m != nil {
				return fmt.Errorf("%s:%s: %s: %s", ls.file, m[1], ls.pathAt(m[1], at), m[2])
			}
			return fmt.Errorf("%s: %s: %s", ls.file, at, strings.Join(te.Errors, "; "))
		}
		if m := reYAMLLine.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("%s:%s: %s: %s", ls.file, m[1], ls.pathAt(m[1], at), m[2])
		}
		return fmt.Errorf("%s: %s: %w", ls.file, at, err)
	}
	return nil
}

var reYAMLLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// pathAt returns the deepest recorded field path on a line (def if none).
func (ls *lineSource) pathAt(line, def string) string {
	best := def
	for p, l := range ls.lines {
		if strconv.Itoa(l) == line && strings.HasPrefix(p, def) &&
			(len(p) > len(best) || len(p) == len(best) && p < best) {
			best = p
		}
	}
	return best
}

// check walks node against the YAML fields of t.
func (ls *lineSource) check(node *yaml.Node, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil // it checks its own shape
	}
	switch t.Kind() {
	case reflect.Map:
		if node.ShortTag() == "!!null" {
			return nil
		}
		if node.Kind != yaml.MappingNode {
			return ls.errorf(node, at, "must be a mapping")
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			p := joinAt(at, k.Value)
			ls.lines[p] = k.Line
			if err := ls.check(v, t.Elem(), p); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if node.ShortTag() == "!!null" {
			return nil
		}
		if node.Kind != yaml.MappingNode {
			return ls.errorf(node, at, "must be a mapping (fields: %s)", strings.Join(yamlFields(t), ", "))
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			f, ok := fieldByYAML(t, k.Value)
			p := joinAt(at, k.Value)
			if !ok {
				return ls.errorf(k, p, "unknown field (known: %s)", strings.Join(yamlFields(t), ", "))
			}
			ls.lines[p] = k.Line
			if err := ls.check(v, f.Type, p); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if node.ShortTag() == "!!null" {
			return nil
		}
		if node.Kind != yaml.SequenceNode {
			return ls.errorf(node, at, "must be a list")
		}
		for i, item := range node.Content {
			p := fmt.Sprintf("%s[%d]", at, i)
			ls.lines[p] = item.Line
			if err := ls.check(item, t.Elem(), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// validate checks a decoded profile, compiles its patterns and fills
// defaults. at is the profile's path in the file ("" for a built-in file).
func (ls *lineSource) validate(p *Profile, at string) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, ls.fieldErr(joinAt(at, field), format, args...))
	}
	if p.StartURL == "" {
		add("start_url", "missing; where a new conversation starts, like https://chatgpt.com/")
	} else if u, err := url.Parse(p.StartURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("start_url", "%q must be an http(s) URL", p.StartURL)
	}
	for _, f := range []string{"prompt", "send", "answer"} {
		if p.Selectors.selector(f).Empty() {
			add("selectors."+f, "missing; a CSS selector")
		}
	}
	if !p.Selectors.DeepModeOn.Empty() && p.Selectors.DeepMode.Empty() {
		add("selectors.deep_mode_on", "needs selectors.deep_mode (the toggle)")
	}
	p.validateLanguage(add)
	c := p.Completion
	for _, f := range []struct {
		name string
		v    int
	}{{"stable_ms", c.StableMS}, {"poll_ms", c.PollMS}, {"start_timeout_seconds", c.StartTimeoutSeconds}, {"load_timeout_seconds", c.LoadTimeoutSeconds}} {
		if f.v < 0 {
			add("completion."+f.name, "must not be negative; is %d", f.v)
		}
	}
	for i, name := range p.StartupCheck {
		if !slices.Contains(selectorFields, name) {
			add(fmt.Sprintf("startup_check[%d]", i), "unknown selector %q (one of: %s)", name, strings.Join(selectorFields, ", "))
		} else if p.Selectors.selector(name).Empty() {
			add(fmt.Sprintf("startup_check[%d]", i), "selectors.%s is not set", name)
		}
	}
	errs = append(errs, checkIssue12Fields(p, func(field, format string, args ...any) error {
		return ls.fieldErr(joinAt(at, field), format, args...)
	})...)
	errs = append(errs, p.compilePageStates(func(field, format string, args ...any) error {
		return ls.fieldErr(joinAt(at, field), format, args...)
	})...)
	if len(p.RateLimit.Patterns) > 0 && p.RateLimit.Banner.Empty() {
		add("rate_limit.banner", "missing; patterns are matched against the text of the banner this selector finds")
	}
	for i := range p.RateLimit.Patterns {
		pt := &p.RateLimit.Patterns[i]
		field := fmt.Sprintf("rate_limit.patterns[%d]", i)
		re, err := regexp.Compile(pt.Match)
		if pt.Match == "" {
			add(field+".match", "missing; a regular expression")
			continue
		} else if err != nil {
			add(field+".match", "%v", err)
			continue
		}
		pt.re = re
		switch pt.Retry {
		case RetryAbsolute:
			if re.SubexpIndex("time") < 0 {
				add(field+".match", "retry absolute needs a named group (?P<time>...) holding the clock time")
			}
		case RetryRelative:
			if re.SubexpIndex("in") < 0 {
				add(field+".match", "retry relative needs a named group (?P<in>...) holding the duration")
			}
		case RetryNone:
		default:
			add(field+".retry", "%q must be one of: absolute, relative, none", pt.Retry)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	p.Extends = ""
	p.fillDefaults()
	return nil
}

// docNode returns the content of a document node.
func docNode(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return n.Content[0]
	}
	return n
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func joinAt(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func fieldByYAML(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && yamlName(f) == name && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if n := yamlName(f); f.IsExported() && n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}
