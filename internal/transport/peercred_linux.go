package transport

import (
	"fmt"
	"net"
	"syscall"
)

const peerCredentialsSupported = true

// peerCredentials reads SO_PEERCRED of c, a Unix socket connection.
func peerCredentials(c net.Conn) (credentials, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return credentials{}, fmt.Errorf("a %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return credentials{}, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return credentials{}, err
	}
	if credErr != nil {
		return credentials{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return credentials{pid: cred.Pid, uid: cred.Uid, gid: cred.Gid}, nil
}
