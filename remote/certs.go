package remote

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// OrchestratorName is the name in the orchestrator's certificate; a host
// accepts no other peer.
const OrchestratorName = "fano-orchestrator"

// The files of `fano remote init` in <data-dir>/remote/. Keys are 0600.
const (
	caCertFile     = "ca.pem"
	caKeyFile      = "ca-key.pem"
	orchCertFile   = "orchestrator.pem"
	orchKeyFile    = "orchestrator-key.pem"
	issuedFile     = "issued.json" // host name -> serial of its one valid certificate
	remoteDirName  = "remote"
	certValidity   = 2 * 365 * 24 * time.Hour
	caCertValidity = 10 * 365 * 24 * time.Hour
)

var reHostName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// ValidHostName reports whether name may name a gateway host.
func ValidHostName(name string) bool { return reHostName.MatchString(name) && name != OrchestratorName }

// Dir is where the orchestrator keeps its CA and certificate.
func Dir(dataDir string) string { return filepath.Join(dataDir, remoteDirName) }

// Init makes the CA and the orchestrator's certificate in
// <dataDir>/remote/. It refuses to replace an existing CA: every host's
// bundle would stop working.
func Init(dataDir string, now time.Time) error {
	dir := Dir(dataDir)
	if _, err := os.Stat(filepath.Join(dir, caKeyFile)); err == nil {
		return fmt.Errorf("remote init: %s already holds a CA; hosts enrolled with it would be refused by a new one", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("remote init: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("remote init: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "fano gateway CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caCertValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("remote init: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	certPEM, keyPEM, _, err := issue(ca, caKey, OrchestratorName, now)
	if err != nil {
		return fmt.Errorf("remote init: %w", err)
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return fmt.Errorf("remote init: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{caKeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKeyDER}), 0o600},
		{caCertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644},
		{orchKeyFile, keyPEM, 0o600},
		{orchCertFile, certPEM, 0o644},
		{issuedFile, []byte("{}\n"), 0o600},
	} {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("remote init: %w", err)
		}
	}
	return nil
}

// Bundle is what a gateway host needs to join: its certificate and key,
// the CA, and where the orchestrator listens.
type Bundle struct {
	Host         string `yaml:"host"`
	Orchestrator string `yaml:"orchestrator"`
	Certificate  string `yaml:"certificate"`
	Key          string `yaml:"key"`
	CA           string `yaml:"ca"`
}

// Enroll issues host's certificate and returns its bundle. The host's
// earlier certificate, if any, is revoked: the orchestrator accepts one
// certificate per host, the newest.
func Enroll(dataDir, host, orchestrator string, now time.Time) ([]byte, error) {
	if !ValidHostName(host) {
		return nil, fmt.Errorf("remote enroll: host name %q: must be 1-63 letters, digits, '-' or '_' (and not %s)", host, OrchestratorName)
	}
	dir := Dir(dataDir)
	ca, caKey, caPEM, err := loadCA(dir)
	if err != nil {
		return nil, fmt.Errorf("remote enroll %s: %w", host, err)
	}
	certPEM, keyPEM, sn, err := issue(ca, caKey, host, now)
	if err != nil {
		return nil, fmt.Errorf("remote enroll %s: %w", host, err)
	}
	issued, err := loadIssued(dir)
	if err != nil {
		return nil, fmt.Errorf("remote enroll %s: %w", host, err)
	}
	issued[host] = sn.String()
	if err := saveIssued(dir, issued); err != nil {
		return nil, fmt.Errorf("remote enroll %s: %w", host, err)
	}
	return yaml.Marshal(Bundle{Host: host, Orchestrator: orchestrator, Certificate: string(certPEM), Key: string(keyPEM), CA: string(caPEM)})
}

// Revoke makes host's certificate refused; it has none valid until
// enrolled again.
func Revoke(dataDir, host string) error {
	dir := Dir(dataDir)
	issued, err := loadIssued(dir)
	if err != nil {
		return fmt.Errorf("remote revoke %s: %w", host, err)
	}
	if _, ok := issued[host]; !ok {
		return fmt.Errorf("remote revoke %s: no certificate issued to this host", host)
	}
	delete(issued, host)
	return saveIssued(dir, issued)
}

// Identity is one side's certificate and the CA it trusts.
type Identity struct {
	Name string
	Cert tls.Certificate
	CA   *x509.CertPool
	// Issued, on the orchestrator, is the serial of each host's one valid
	// certificate; nil on a host.
	Issued map[string]string
	// IssuedDir, if set, holds the issued.json Issued was read from: it
	// is read again when it changes, so an enroll or a revoke counts for
	// the next connection without a restart.
	IssuedDir string

	issuedMu  sync.Mutex
	issuedMod time.Time
}

// issuedSerial is the serial of host's one valid certificate, and false
// when none is issued (revoked).
func (id *Identity) issuedSerial(host string) (string, bool, bool) {
	id.issuedMu.Lock()
	defer id.issuedMu.Unlock()
	if id.IssuedDir != "" {
		if fi, err := os.Stat(filepath.Join(id.IssuedDir, issuedFile)); err == nil && !fi.ModTime().Equal(id.issuedMod) {
			if m, err := loadIssued(id.IssuedDir); err == nil {
				id.Issued, id.issuedMod = m, fi.ModTime()
			}
		}
	}
	if id.Issued == nil {
		return "", false, false
	}
	sn, ok := id.Issued[host]
	return sn, ok, true
}

// OrchestratorIdentity loads the orchestrator's certificate from
// <dataDir>/remote/.
func OrchestratorIdentity(dataDir string) (*Identity, error) {
	dir := Dir(dataDir)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, orchCertFile), filepath.Join(dir, orchKeyFile))
	if err != nil {
		return nil, fmt.Errorf("remote: the orchestrator's certificate (run `fano remote init`): %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("remote: %s holds no certificate", filepath.Join(dir, caCertFile))
	}
	issued, err := loadIssued(dir)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	id := &Identity{Name: OrchestratorName, Cert: cert, CA: pool, Issued: issued, IssuedDir: dir}
	if fi, err := os.Stat(filepath.Join(dir, issuedFile)); err == nil {
		id.issuedMod = fi.ModTime()
	}
	return id, nil
}

// LoadBundle reads a host's bundle file.
func LoadBundle(path string) (*Bundle, *Identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("bundle: %w", err)
	}
	var b Bundle
	if err := yaml.Unmarshal(data, &b); err != nil {
		return nil, nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	cert, err := tls.X509KeyPair([]byte(b.Certificate), []byte(b.Key))
	if err != nil {
		return nil, nil, fmt.Errorf("bundle %s: certificate and key: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(b.CA)) {
		return nil, nil, fmt.Errorf("bundle %s: ca: no certificate", path)
	}
	return &b, &Identity{Name: b.Host, Cert: cert, CA: pool}, nil
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, now time.Time) (certPEM, keyPEM []byte, sn *big.Int, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	sn = serial()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), sn, nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil, fmt.Errorf("no CA in %s: run `fano remote init` first", dir)
		}
		return nil, nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, nil, fmt.Errorf("%s: CA files are not PEM", dir)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, caCertFile), err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, caKeyFile), err)
	}
	return ca, key, caPEM, nil
}

func loadIssued(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, issuedFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no CA in %s: run `fano remote init` first", dir)
		}
		return nil, err
	}
	m := map[string]string{}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, issuedFile), err)
	}
	return m, nil
}

func saveIssued(dir string, m map[string]string) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, issuedFile), append(data, '\n'), 0o600)
}

// writeFile writes data whole (temp file, fsync, rename) with mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteBundle writes a bundle to path, 0600 (it holds a key).
func WriteBundle(path string, data []byte) error { return writeFile(path, data, 0o600) }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n.Add(n, big.NewInt(1))
}

// writeFileFast replaces path by a rename, without waiting for the disk:
// for status files rewritten every second.
func writeFileFast(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Ledger is the name of the orchestrator's WAL for hosts: made once in
// <dataDir>/remote/ledger, so intents of two data directories never meet
// in a host's book.
func Ledger(dataDir string) (string, error) {
	path := filepath.Join(Dir(dataDir), "ledger")
	if data, err := os.ReadFile(path); err == nil {
		return string(bytes.TrimSpace(data)), nil
	}
	if err := os.MkdirAll(Dir(dataDir), 0o700); err != nil {
		return "", fmt.Errorf("remote ledger: %w", err)
	}
	id := serial().Text(36)
	if err := writeFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("remote ledger: %w", err)
	}
	return id, nil
}

// Version is this binary's version as a host and the orchestrator
// compare it: the module version and the commit it was built from.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += "-modified"
		}
	}
	return v
}
