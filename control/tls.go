package control

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files of the certificate fano generates for a remote panel when the
// config names none.
const (
	TLSCertFile = "panel-tls.crt"
	TLSKeyFile  = "panel-tls.key"
)

// PanelTLS is the TLS setup of a panel served to the network.
type PanelTLS struct {
	Config      *tls.Config
	CertFile    string // the PEM certificate clients can pin
	Fingerprint string // SHA-256 of the certificate, hex pairs
	Generated   bool   // fano made it (this start or an earlier one)
}

// LoadPanelTLS loads certFile/keyFile, or when both are empty the
// certificate fano generated in dataDir, generating it (valid for a
// year, for localhost, the loopback addresses and this host's name) if
// it is missing or expired.
func LoadPanelTLS(certFile, keyFile, dataDir string) (*PanelTLS, error) {
	generated := certFile == ""
	if generated {
		certFile, keyFile = filepath.Join(dataDir, TLSCertFile), filepath.Join(dataDir, TLSKeyFile)
		if err := ensureCert(certFile, keyFile); err != nil {
			return nil, err
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("panel TLS: load %s and %s: %w", certFile, keyFile, err)
	}
	sum := sha256.Sum256(pair.Certificate[0])
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	return &PanelTLS{
		Config:   &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		CertFile: certFile, Fingerprint: strings.Join(hexes, ":"), Generated: generated,
	}, nil
}

// ensureCert generates a self-signed certificate unless a valid one is
// there.
func ensureCert(certFile, keyFile string) error {
	if b, err := os.ReadFile(certFile); err == nil {
		if blk, _ := pem.Decode(b); blk != nil {
			if c, err := x509.ParseCertificate(blk.Bytes); err == nil && time.Now().Before(c.NotAfter.Add(-24*time.Hour)) {
				if _, err := os.Stat(keyFile); err == nil {
					return nil
				}
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("panel TLS: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("panel TLS: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("panel TLS: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return fmt.Errorf("panel TLS: serial: %w", err)
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "fano control panel"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("panel TLS: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("panel TLS: encode key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("panel TLS: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("panel TLS: %w", err)
	}
	return nil
}

// ClientTLS trusts the system's roots and the panel's certificate in
// certFile (a generated one is self-signed).
func ClientTLS(certFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("panel TLS: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("panel TLS: %s holds no PEM certificate", certFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
