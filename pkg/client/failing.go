package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// failing is a ListerWatcher whose every call fails with err.
type failing struct{ err error }

func (f failing) List(metav1.ListOptions) (runtime.Object, error)   { return nil, f.err }
func (f failing) Watch(metav1.ListOptions) (watch.Interface, error) { return nil, f.err }
func (f failing) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return nil, f.err
}
func (f failing) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, f.err
}
func (failing) IsWatchListSemanticsUnSupported() bool { return true }
