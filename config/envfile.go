package config

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LoadEnvFile reads KEY=VALUE lines (blank lines and # comments skipped,
// an optional "export " prefix and quotes around the value allowed) and
// sets them in the process environment. Errors name the file and line,
// never a value.
func LoadEnvFile(path string) (names []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llm.env_file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	type kv struct{ k, v string }
	var vars []kv
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !envNameRE.MatchString(k) {
			return nil, fmt.Errorf("llm.env_file %s:%d: want NAME=value", path, n)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vars = append(vars, kv{k, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("llm.env_file %s: %w", path, err)
	}
	// All or nothing: a bad line changes no variable.
	for _, e := range vars {
		if err := os.Setenv(e.k, e.v); err != nil {
			return nil, fmt.Errorf("llm.env_file %s: %s: %w", path, e.k, err)
		}
		names = append(names, e.k)
	}
	return names, nil
}

// UnsetKeyVariables lists, for every enabled API backend whose key
// variable is unset or empty, the field and the variable, sorted by
// backend. fano still runs (those backends wait in the credentials
// state); `fano config validate` reports them.
func (c *Config) UnsetKeyVariables() []string {
	var out []string
	for _, name := range c.EnabledBackends() {
		b, _ := c.Backend(name)
		if b == nil || b.Type != TypeAPI || b.API == nil || b.API.APIKeyEnv == "" || b.Host != "" {
			continue
		}
		if strings.TrimSpace(os.Getenv(b.API.APIKeyEnv)) == "" {
			out = append(out, fmt.Sprintf("backends.%s.api.api_key_env: environment variable %s is unset or empty", name, b.API.APIKeyEnv))
		}
	}
	return out
}
