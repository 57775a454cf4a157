// Package remote runs fano's gateways on other machines: a gateway host
// serves the backends it holds to the orchestrator over protoactor-go
// remote (gRPC, pb messages only), with mutual TLS, keepalive, and an
// intent cache so that a request repeated after a lost message or answer
// is answered from what the host already did.
package remote

import _ "github.com/asynkron/protoactor-go/remote"
