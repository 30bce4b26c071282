// Command informerd-inject is the mutating admission webhook that adds
// informerd as a native sidecar to the Pods of namespaces labelled
// informerd.io/inject=enabled and to Pods annotated informerd.io/inject:
// "true" (internal/inject). main only parses flags and serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerd/informerd/internal/inject"
	"github.com/informerd/informerd/internal/transport"
)

func main() {
	o := inject.DefaultOptions("ghcr.io/informerd/informerd:v0.1.0")
	var (
		addr       = flag.String("address", ":8443", "HTTPS listen address of the webhook")
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig for reading ConfigMaps and writing Events; empty: in-cluster")
		tlsFiles   transport.TLSFiles
		self       selfSignedFlags
	)
	flag.StringVar(&self.caSecret, "self-signed-ca-secret", "", "instead of --tls-cert-file: make the webhook's certificate itself, from a CA kept in this Secret (shared by the replicas, made by the first), renew it before it expires, and keep the CA in --webhook-configuration's caBundle; no cert-manager needed")
	flag.StringVar(&self.namespace, "namespace", "informerd", "with --self-signed-ca-secret: the namespace of the Secret and of --service")
	flag.StringVar(&self.service, "service", "informerd-inject", "with --self-signed-ca-secret: the webhook's Service, whose names the certificate carries")
	flag.StringVar(&self.webhookConfiguration, "webhook-configuration", "informerd-inject", "with --self-signed-ca-secret: the MutatingWebhookConfiguration whose caBundle is kept")
	flag.StringVar(&tlsFiles.CertFile, "tls-cert-file", "", "the webhook's serving certificate (PEM), reloaded when it changes (a Secret that cert-manager or deploy/'s job renews)")
	flag.StringVar(&tlsFiles.KeyFile, "tls-key-file", "", "the key of --tls-cert-file")
	flag.StringVar(&o.Image, "image", o.Image, "informerd's image for the injected sidecar")
	flag.IntVar(&o.KubeAPIPort, "kube-api-port", o.KubeAPIPort, "the sidecar's Kubernetes API port on 127.0.0.1 (the app's KUBERNETES_SERVICE_PORT)")
	flag.IntVar(&o.GRPCPort, "grpc-port", o.GRPCPort, "the sidecar's gRPC port on 127.0.0.1")
	flag.IntVar(&o.MetricsPort, "metrics-port", o.MetricsPort, "the sidecar's metrics and probe port")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*addr, *kubeconfig, tlsFiles, self, o, log); err != nil {
		log.Error("informerd-inject stopped", "err", err)
		os.Exit(1)
	}
}

// selfSignedFlags configure --self-signed-ca-secret.
type selfSignedFlags struct{ caSecret, namespace, service, webhookConfiguration string }

func run(addr, kubeconfig string, files transport.TLSFiles, self selfSignedFlags, o inject.Options, log *slog.Logger) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if self.caSecret != "" {
		dir, err := os.MkdirTemp("", "informerd-inject-tls-")
		if err != nil {
			return err
		}
		issuer, ca, err := inject.SelfSigned(ctx, kube, self.namespace, self.caSecret, self.service, dir)
		if err != nil {
			return err
		}
		files = transport.TLSFiles{CertFile: issuer.CertFile(), KeyFile: issuer.KeyFile()}
		go func() { _ = issuer.Run(ctx) }()
		go func() {
			if err := inject.KeepCABundle(ctx, kube, self.webhookConfiguration, ca, time.Minute); err != nil {
				log.Error("the webhook's caBundle could not be set; the API server will not trust the webhook", "err", err)
			}
		}()
	}
	certs, err := transport.NewTLS("webhook", files)
	if err != nil {
		return err
	}
	go func() { _ = certs.Run(ctx) }()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: inject.NewHandler(o, kube, log).Mux(), TLSConfig: certs.Config(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("informerd-inject is listening", "address", lis.Addr().String(), "image", o.Image)
	if err := srv.ServeTLS(lis, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
