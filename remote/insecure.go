package remote

import (
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// insecureCreds is plaintext, for loopback only (Transport.start checks).
func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
