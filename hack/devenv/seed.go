package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/testenv"
)

// seed creates a namespace with a few pods bound to two made-up nodes and a
// few ConfigMaps, so the sample config has something to serve. Nothing runs
// the pods: the local control plane has no scheduler or kubelet.
func seed(ctx context.Context, env *testenv.Env) error {
	client, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	ns := "demo"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range 6 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("web-%d", i),
				Labels: map[string]string{"app": "web"},
			},
			Spec: corev1.PodSpec{
				NodeName:   fmt.Sprintf("node-%d", i%2),
				Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1.0"}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range 3 {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%d", i), Labels: map[string]string{"team": "a"}},
			Data:       map[string]string{"index": fmt.Sprint(i)},
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
