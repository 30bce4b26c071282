//go:build !linux

package transport

import "net"

const peerCredentialsSupported = false

func peerCredentials(net.Conn) (credentials, error) { return credentials{}, ErrPeerCredentials }
