package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informerd/informerd/internal/auth"
	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/transport"
)

// validateNodeBound checks the flags that confine a node tier: the root's
// --node-bound-service-accounts and the leaf's --unix-socket-allowed-uids.
func (o Options) validateNodeBound(cfg *config.Config) error {
	if _, err := o.nodeBinding(cfg); err != nil {
		return err
	}
	uids, err := transport.ParseUIDs(o.UnixSocketAllowedUIDs)
	if err != nil {
		return err
	}
	if len(uids) > 0 && !transport.Unix(o.GRPCAddress) && !transport.Unix(o.KubeAPIAddress) {
		return errors.New("--unix-socket-allowed-uids checks the processes that connect to a Unix socket; set --grpc-address (or --kube-api-address) to unix:///path")
	}
	return nil
}

// nodeBinding is the node binding of --node-bound-service-accounts over
// cfg's resources; nil when the flag is empty.
func (o Options) nodeBinding(cfg *config.Config) (*auth.NodeBinding, error) {
	accounts, err := auth.ParseServiceAccounts(o.NodeBoundServiceAccounts)
	if err != nil {
		return nil, fmt.Errorf("--node-bound-service-accounts: %w", err)
	}
	if len(accounts) == 0 {
		return nil, nil
	}
	if o.AuthMode != auth.ModeKubernetes {
		return nil, fmt.Errorf("--node-bound-service-accounts confines ServiceAccount tokens to the node they name, so it needs --auth-mode=kubernetes, not %q", o.AuthMode)
	}
	for _, r := range cfg.Resources {
		if r.Resource == "pods" && !slices.ContainsFunc(r.Indexes, func(ix config.Index) bool { return ix.JSONPath == auth.NodeIndexPath }) {
			return nil, fmt.Errorf("--node-bound-service-accounts: resource pods has no index with jsonpath %q, so a node-bound caller could read no pod; add one, e.g. {name: node, jsonpath: %q}",
				auth.NodeIndexPath, auth.NodeIndexPath)
		}
	}
	return auth.NewNodeBinding(accounts, cfg.Resources), nil
}

// peers is the check of --unix-socket-allowed-uids; nil when the flag is
// empty.
func (o Options) peers(reg prometheus.Registerer, log *slog.Logger) (*transport.Peers, error) {
	uids, err := transport.ParseUIDs(o.UnixSocketAllowedUIDs)
	if err != nil || len(uids) == 0 {
		return nil, err
	}
	p, err := transport.NewPeers(transport.PeerOptions{AllowedUIDs: uids, Registerer: reg, Log: log.With("component", "unix-socket")})
	if err != nil {
		return nil, fmt.Errorf("--unix-socket-allowed-uids: %w", err)
	}
	return p, nil
}

// peersOn is l admitting only --unix-socket-allowed-uids when it is a Unix
// socket and the flag is set, else l.
func (d *Daemon) peersOn(name string, l net.Listener) net.Listener {
	if d.peers == nil || l.Addr().Network() != "unix" {
		return l
	}
	return d.peers.Listener(name, l)
}
