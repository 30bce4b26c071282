// Command incluster-go is an unmodified client-go program that runs in a
// pod: rest.InClusterConfig(), a list and a write. Injected beside
// informerd (docs/deploy.md), the pod's environment and service account
// volume point InClusterConfig at informerd, so the list is answered from
// informerd's cache and the write is forwarded with the pod's token; the
// code is what it would be without informerd.
//
// It lists the ConfigMaps of its namespace, creates the ConfigMap named
// by its first argument, and prints one JSON object.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(name string) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return err
	}
	namespace := strings.TrimSpace(string(ns))
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	list, err := kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	if _, err := kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"host": cfg.Host, "listed": names, "created": name})
}
