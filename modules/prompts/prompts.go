// Package prompts loads a module's prompt templates: text/template files
// embedded in the module, any of which a file of the same name in an
// override directory (the module's prompts_dir) replaces. Every template is
// rendered once at load with sample data, so a template that names a field
// that does not exist fails at start, naming its file.
package prompts

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"unicode/utf8"
)

// Set is one module's parsed prompts. Safe for concurrent Render.
type Set struct {
	module string
	t      map[string]*template.Template
}

// Load parses the templates <dir>/<name>.tmpl of fsys for every name (each
// with samples[name] as its test data), then the overrides in overrideDir
// ("" = none). A file there that is not one of the names is an error.
func Load(module string, fsys fs.FS, dir string, names []string, samples map[string]any, overrideDir string) (*Set, error) {
	s := &Set{module: module, t: map[string]*template.Template{}}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, dir+"/"+name+".tmpl")
		if err != nil {
			return nil, fmt.Errorf("%s: built-in prompt %s: %w", module, name, err)
		}
		if err := s.parse(name, "built-in "+dir+"/"+name+".tmpl", string(src), samples[name]); err != nil {
			return nil, err
		}
	}
	if overrideDir == "" {
		return s, nil
	}
	entries, err := os.ReadDir(overrideDir)
	if err != nil {
		return nil, fmt.Errorf("%s: prompts_dir: %w", module, err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmpl") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".tmpl")
		path := filepath.Join(overrideDir, e.Name())
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("%s: prompts_dir: %s is not a prompt of the %s (known: %s)", module, path, module, strings.Join(names, ", "))
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: prompts_dir: %w", module, err)
		}
		if err := s.parse(name, path, string(src), samples[name]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Set) parse(name, file, src string, sample any) error {
	t, err := template.New(name).Funcs(Funcs).Option("missingkey=error").Parse(src)
	if err != nil {
		return fmt.Errorf("%s: prompt %s: %w", s.module, file, err)
	}
	if err := t.Execute(&bytes.Buffer{}, sample); err != nil {
		return fmt.Errorf("%s: prompt %s: %w", s.module, file, err)
	}
	s.t[name] = t
	return nil
}

// Render executes the named prompt; the result ends with one newline.
func (s *Set) Render(name string, data any) (string, error) {
	t, ok := s.t[name]
	if !ok {
		return "", fmt.Errorf("%s: no prompt %s", s.module, name)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%s: render prompt %s: %w", s.module, name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}

// Funcs are the functions every prompt may use.
var Funcs = template.FuncMap{
	"inc":  func(i int) int { return i + 1 },
	"clip": Clip,
}

// Clip shortens s to at most n characters, at a word boundary, marking the
// cut with an ellipsis.
func Clip(n int, s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n]
	cut := string(r)
	if i := strings.LastIndexAny(cut, " \n"); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimSpace(cut) + " …"
}
