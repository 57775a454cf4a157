// Package remote runs fano's gateways on other machines: a gateway host
// serves the backends it holds to the orchestrator over protoactor-go
// remote (gRPC, pb messages only), with mutual TLS, keepalive, and a book
// of intents, so that a request repeated after a lost message or answer
// is answered from what the host already did. The logic is in plain
// types (intentBook, hostTable, promptJournal); hub.go and host.go only
// translate messages into calls on them.
package remote
