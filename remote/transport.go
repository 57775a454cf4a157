package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pr "github.com/asynkron/protoactor-go/remote"
	cmap "github.com/orcaman/concurrent-map"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"fano/logging"
)

// Keepalive on both sides: a link whose packets are dropped without a
// reset is closed after about KeepaliveTime+KeepaliveTimeout, and the
// server allows the client's pings at that rate (gRPC's default
// enforcement would close a link pinged more often than every 5 minutes).
const (
	KeepaliveTime    = 2 * time.Second
	KeepaliveTimeout = 2 * time.Second
)

const endpointQueueSlots = 1024

// Flow-control windows of a link and of its stream, fixed on both sides.
// gRPC's default grows them by estimating the bandwidth, which pings the
// peer after every burst of data it reads: on a link that carries many
// small batches that doubled the frames written, read and answered, and
// a 64 KB window was given back every 16 KB. A window this size is only
// a bound on what the peer may send ahead; nothing is held for it.
const (
	streamWindow = 1 << 20
	connWindow   = 1 << 20
)

// Transport is how one side listens and dials.
type Transport struct {
	// Listen is host:port to listen on (port 0: any free port).
	Listen string
	// Advertise is host:port the other side dials to reach this one;
	// "" = the listening address.
	Advertise string
	// Identity is this side's certificate and CA; nil only with Plaintext.
	Identity *Identity
	// Plaintext turns TLS off; allowed only when every address is on
	// loopback.
	Plaintext bool
	// Accept decides whether a peer whose certificate the CA signed may
	// connect, by the certificate's name and serial.
	Accept func(name, serial string) error
	// Refused is told one line for each refused peer.
	Refused func(line string)
	Logger  zerolog.Logger
}

// start makes an actor system listening as t says and returns it with
// its remote.
func (t Transport) start() (*actor.ActorSystem, *pr.Remote, error) {
	host, portStr, err := net.SplitHostPort(t.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen address %q: %w", t.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen address %q: port: %w", t.Listen, err)
	}
	var opts []pr.ConfigOption
	kc := keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}
	dial := []grpc.DialOption{grpc.WithKeepaliveParams(kc),
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow)}
	ks := []grpc.ServerOption{
		grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
	}
	if t.Plaintext {
		for _, a := range []string{t.Listen, t.Advertise} {
			if a != "" && !Loopback(a) {
				return nil, nil, fmt.Errorf("plaintext is allowed only on loopback; %s is not (enroll this host and use its bundle)", a)
			}
		}
		opts = append(opts, pr.WithDialOptions(append(dial, grpc.WithTransportCredentials(insecureCreds()))...),
			pr.WithServerOptions(ks...))
	} else {
		if t.Identity == nil {
			return nil, nil, fmt.Errorf("no certificate: mTLS needs one (plaintext only on loopback, when asked for)")
		}
		srv, cli := t.tlsConfigs()
		opts = append(opts,
			pr.WithDialOptions(append(dial, grpc.WithTransportCredentials(credentials.NewTLS(cli)))...),
			pr.WithServerOptions(append(ks, grpc.Creds(loggedCreds{credentials.NewTLS(srv), t.Refused}),
				grpc.StreamInterceptor(bindHellos(t.Refused)))...))
	}
	if t.Advertise != "" {
		opts = append(opts, pr.WithAdvertisedHost(t.Advertise))
	}
	// The writer's queue to each peer starts at this many slots and grows
	// when needed; protoactor's default (a million) is 16 MB a peer, made
	// at once and scanned by every collection.
	opts = append(opts, pr.WithEndpointWriterQueueSize(endpointQueueSlots))
	// Start panics when it cannot listen: try the port first.
	if port != 0 {
		l, err := net.Listen("tcp", t.Listen)
		if err != nil {
			return nil, nil, fmt.Errorf("listen %s: %w", t.Listen, err)
		}
		l.Close()
	}
	logw := t.Logger
	sys := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(quietTransport{logging.Slog(logw).Handler()})
	})))
	slimRegistry(sys)
	r := pr.NewRemote(sys, pr.Configure(host, port, opts...))
	if err := startRemote(r); err != nil {
		return nil, nil, fmt.Errorf("listen %s: %w", t.Listen, err)
	}
	return sys, r, nil
}

// registryBuckets is how many buckets the process registry of a hub's
// or a host's actor system has. Each side holds a handful of processes;
// protoactor makes 1,024 buckets of 32 maps each (about 4 MB of small
// maps a system), which every garbage collection of the process scans.
const registryBuckets = 4

// slimRegistry gives sys's process registry registryBuckets buckets,
// keeping the processes the system registered as it started. It runs
// before anything else can reach the registry.
func slimRegistry(sys *actor.ActorSystem) {
	old := sys.ProcessRegistry.LocalPIDs
	slim := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range slim.LocalPIDs {
		slim.LocalPIDs[i] = cmap.New()
	}
	for _, bucket := range old.LocalPIDs {
		// IterCb, not Items: that starts a goroutine a shard.
		bucket.IterCb(func(id string, p any) { slim.GetBucket(id).Set(id, p) })
	}
	sys.ProcessRegistry.LocalPIDs = slim
}

func startRemote(r *pr.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return nil
}

// Loopback reports whether address (host:port or host) is on loopback.
func Loopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfigs are the server's and the client's TLS: each presents this
// side's certificate and requires the peer's, signed by the CA and
// accepted by name (Accept). Names are checked by fano, not by the
// address dialled: hosts move between addresses, names stay.
func (t Transport) tlsConfigs() (server, client *tls.Config) {
	id := t.Identity
	server = &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{id.Cert},
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error { return t.verify(cs, "connecting") },
	}
	client = &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{id.Cert},
		InsecureSkipVerify: true, // the chain and the name are checked in VerifyConnection
		VerifyConnection:   func(cs tls.ConnectionState) error { return t.verify(cs, "dialled") },
	}
	return server, client
}

// verify checks a peer's certificate: signed by the CA, then accepted by
// name. A refusal is one line, to the log and to the peer.
func (t Transport) verify(cs tls.ConnectionState, how string) error {
	refuse := func(format string, args ...any) error {
		line := fmt.Sprintf("remote: refused the peer %s: ", how) + fmt.Sprintf(format, args...)
		if t.Refused != nil {
			t.Refused(line)
		}
		return fmt.Errorf("%s", line)
	}
	if len(cs.PeerCertificates) == 0 {
		return refuse("it presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	name := leaf.Subject.CommonName
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: t.Identity.CA, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return refuse("its certificate (name %q) is not signed by this fano's CA: %v", name, err)
	}
	if t.Accept != nil {
		if err := t.Accept(name, leaf.SerialNumber.String()); err != nil {
			return refuse("certificate name %q: %v", name, err)
		}
	}
	return nil
}

// onceEvery passes each distinct line once a period, so a peer that
// keeps redialling is one line, not thousands.
type onceEvery struct {
	mu     sync.Mutex
	period time.Duration
	seen   map[string]time.Time
}

func (o *onceEvery) pass(line string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]time.Time{}
	}
	if t, ok := o.seen[line]; ok && now.Sub(t) < o.period {
		return false
	}
	o.seen[line] = now
	return true
}

// loggedCreds says, in one line a peer, why a TLS handshake failed on
// the side that accepts connections (gRPC itself keeps it to itself):
// a host that refused this side's certificate is seen here too.
type loggedCreds struct {
	credentials.TransportCredentials
	refused func(string)
}

func (c loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	// A connection closed before its handshake (a port check) is no peer.
	if err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "remote: refused the peer") && c.refused != nil {
		c.refused(fmt.Sprintf("remote: TLS handshake with %s failed: %v (a peer whose certificate is not of this fano's CA, or that refused this side's)",
			hostOnly(conn.RemoteAddr().String()), err))
	}
	return out, info, err
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), refused: c.refused}
}

func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// quietTransport puts protoactor's own lines at debug: a peer that is
// down is redialled every second, and fano says once, in its own words,
// that a host was lost or refused. A message dropped because its type is
// unknown keeps its level.
type quietTransport struct{ slog.Handler }

func (q quietTransport) Enabled(context.Context, slog.Level) bool { return true }

func (q quietTransport) Handle(ctx context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "deserialize") {
		r.Level = slog.LevelDebug
	}
	if !q.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietTransport) WithAttrs(as []slog.Attr) slog.Handler {
	return quietTransport{q.Handler.WithAttrs(as)}
}

func (q quietTransport) WithGroup(name string) slog.Handler {
	return quietTransport{q.Handler.WithGroup(name)}
}
