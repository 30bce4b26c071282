// Package ctl is informerctl, the command line client of informerd: get,
// list and watch objects with kubectl's habits, see what is served, and
// summarize health and lag from the metrics address. cmd/informerctl only
// runs Execute.
package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/informerd/informerd/api/proto/informerd/v1"
	"github.com/informerd/informerd/pkg/client"
)

// AddressEnv is the environment variable that sets --address's default.
const AddressEnv = "INFORMERD_ADDRESS"

// options are the flags every command shares.
type options struct {
	conn    client.Config
	timeout time.Duration
	out     io.Writer
	errOut  io.Writer
}

// NewCommand returns the informerctl command, writing to out and errOut.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	o := &options{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:   "informerctl",
		Short: "Read Kubernetes objects from informerd's cache",
		Long: `informerctl reads the objects informerd caches, as kubectl reads them from the
API server: get one or list them by namespace, label selector or index, watch
their changes (resuming from a resourceVersion), see which resources are
served, and summarize health and lag from informerd's metrics address.
See docs/clients.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	addr := os.Getenv(AddressEnv)
	if addr == "" {
		addr = "127.0.0.1:50051"
	}
	f := root.PersistentFlags()
	f.StringVarP(&o.conn.Address, "address", "a", addr, "informerd's gRPC address: host:port or unix:///path; $"+AddressEnv+" sets the default")
	f.StringVar(&o.conn.CAFile, "ca-file", "", "PEM CA bundle to verify informerd's certificate with; turns TLS on")
	f.StringVar(&o.conn.ServerName, "server-name", "", "name to check informerd's certificate against, if not the address's host")
	f.StringVar(&o.conn.CertFile, "cert-file", "", "client certificate for --auth-mode=mtls")
	f.StringVar(&o.conn.KeyFile, "key-file", "", "key of --cert-file")
	f.StringVar(&o.conn.TokenFile, "token-file", "", "bearer token file for --auth-mode=kubernetes (a ServiceAccount token for audience informerd)")
	f.BoolVar(&o.conn.Insecure, "insecure", false, "allow plaintext to an address that is not loopback or a Unix socket")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long a get, list or resources call may take (a watch runs until interrupted)")
	root.AddCommand(newGet(o), newWatch(o), newResources(o), newStatus(o))
	return root
}

// Execute runs the command line args until done or ctx ends (a watch then
// stops quietly) and returns the exit status: 0, or 1 after printing the
// error.
func Execute(ctx context.Context, args []string, out, errOut io.Writer) int {
	cmd := NewCommand(out, errOut)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(errOut, "informerctl:", err)
		return 1
	}
	return 0
}

// dial connects to informerd; the caller closes the connection.
func (o *options) dial() (*grpc.ClientConn, pb.CacheServiceClient, error) {
	conn, err := client.Dial(o.conn)
	if err != nil {
		return nil, nil, err
	}
	return conn, pb.NewCacheServiceClient(conn), nil
}

// unary runs f — one call, or the pages of one List — within --timeout and
// explains its error.
func (o *options) unary(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		return explain(err, o.conn.Address)
	}
	return nil
}
