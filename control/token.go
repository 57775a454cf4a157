package control

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"fano/config"
)

// TokenFile is the panel token's file in the data directory (mode 0600).
const TokenFile = "panel.token"

// AddrFile holds the address the running panel listens on (written at
// start, removed at stop), so the CLI finds a panel on port 0 or one whose
// config it was not given.
const AddrFile = "panel.addr"

// TokenSource says where the token came from.
type TokenSource string

const (
	TokenFromConfig    TokenSource = "config"    // control.token
	TokenFromEnv       TokenSource = "env"       // the variable named by control.token_env
	TokenFromFile      TokenSource = "file"      // <data-dir>/panel.token
	TokenGenerated     TokenSource = "generated" // new, written to <data-dir>/panel.token
	TokenNotConfigured TokenSource = "none"      // LoadToken found none
)

// minToken matches config validation of control.token.
const minToken = 16

// ResolveToken returns the panel token: control.token, else the variable
// control.token_env names, else <dataDir>/panel.token, else (create) a new
// random token written there with mode 0600. Errors name the setting or
// file, never the token.
func ResolveToken(ctl config.Control, dataDir string, getenv func(string) string, create bool) (string, TokenSource, error) {
	if ctl.Token != "" {
		if len(ctl.Token) < minToken {
			return "", "", fmt.Errorf("control.token: must be at least %d characters", minToken)
		}
		return ctl.Token, TokenFromConfig, nil
	}
	if ctl.TokenEnv != "" && getenv != nil {
		if v := strings.TrimSpace(getenv(ctl.TokenEnv)); v != "" {
			if len(v) < minToken {
				return "", "", fmt.Errorf("control.token_env: $%s must hold at least %d characters", ctl.TokenEnv, minToken)
			}
			return v, TokenFromEnv, nil
		}
	}
	path := filepath.Join(dataDir, TokenFile)
	tok, err := readTokenFile(path)
	switch {
	case err == nil:
		return tok, TokenFromFile, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", "", err
	case !create:
		return "", TokenNotConfigured, nil
	}
	tok, err = newToken()
	if err != nil {
		return "", "", err
	}
	if err := writeTokenFile(path, tok); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process made it first: use theirs
			tok, err = readTokenFile(path)
			if err != nil {
				return "", "", err
			}
			return tok, TokenFromFile, nil
		}
		return "", "", err
	}
	return tok, TokenGenerated, nil
}

func readTokenFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s: readable by others (mode %#o): run chmod 600 on it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < minToken {
		return "", fmt.Errorf("%s: the token must be at least %d characters (delete the file to have a new one generated)", path, minToken)
	}
	return tok, nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("panel token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// writeTokenFile creates path (never overwrites) with mode 0600, durably.
func writeTokenFile(path, tok string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
