package remote

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	pr "github.com/asynkron/protoactor-go/remote"

	"fano/pb"
)

// helloTypeName is how a HostHello is named on the wire.
var helloTypeName = string(proto.MessageName(&pb.HostHello{}))

// bindHellos keeps a host to its own name: a HostHello that arrives over
// a link whose TLS peer certificate names another host is dropped (and
// refused is told), so a host enrolled as laptop cannot register as
// desk. Links without a certificate (plaintext on loopback) are not
// checked.
func bindHellos(refused func(string)) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		name := peerName(ss)
		if name == "" {
			return handler(srv, ss)
		}
		return handler(srv, &boundStream{ServerStream: ss, name: name, refused: refused})
	}
}

func peerName(ss grpc.ServerStream) string {
	p, ok := peer.FromContext(ss.Context())
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return ""
	}
	return ti.State.PeerCertificates[0].Subject.CommonName
}

type boundStream struct {
	grpc.ServerStream
	name    string
	refused func(string)
}

func (s *boundStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*pr.RemoteMessage)
	if !ok {
		return nil
	}
	batch := rm.GetMessageBatch()
	if batch == nil {
		return nil
	}
	kept := batch.Envelopes[:0]
	for _, env := range batch.Envelopes {
		if int(env.TypeId) < len(batch.TypeNames) && batch.TypeNames[env.TypeId] == helloTypeName {
			var h pb.HostHello
			if err := proto.Unmarshal(env.MessageData, &h); err != nil || h.Host != s.name {
				if s.refused != nil {
					s.refused("remote: refused a hello as host " + h.Host + " over a link whose certificate names " + s.name)
				}
				continue
			}
		}
		kept = append(kept, env)
	}
	batch.Envelopes = kept
	return nil
}
