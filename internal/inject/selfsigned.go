package inject

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerd/informerd/internal/selfcert"
)

// SelfSigned gives the webhook a serving certificate without cert-manager:
// a CA shared by every replica through the Secret caSecret in namespace
// (the first replica makes it, the others read it), and a serving
// certificate for the webhook's Service names, issued in dir and renewed by
// the returned Issuer's Run. KeepCABundle then puts the CA into the
// MutatingWebhookConfiguration.
func SelfSigned(ctx context.Context, kube kubernetes.Interface, namespace, caSecret, service, dir string) (*selfcert.Issuer, []byte, error) {
	hosts := []string{service, service + "." + namespace, service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
	secrets := kube.CoreV1().Secrets(namespace)
	for attempt := 0; attempt < 2; attempt++ {
		s, err := secrets.Get(ctx, caSecret, metav1.GetOptions{})
		loaded := err == nil
		switch {
		case loaded:
			for name, key := range map[string]string{"ca.crt": "ca.crt", "ca.key": "ca.key"} {
				if err := os.WriteFile(filepath.Join(dir, name), s.Data[key], 0o600); err != nil {
					return nil, nil, err
				}
			}
		case !apierrors.IsNotFound(err):
			return nil, nil, fmt.Errorf("read the CA Secret %s/%s: %w", namespace, caSecret, err)
		}
		issuer, err := selfcert.New(selfcert.Options{Dir: dir, Hosts: hosts})
		if err != nil {
			return nil, nil, err
		}
		ca, err := os.ReadFile(issuer.CAFile())
		if err != nil {
			return nil, nil, err
		}
		key, err := os.ReadFile(filepath.Join(dir, "ca.key"))
		if err != nil {
			return nil, nil, err
		}
		if loaded {
			if !bytes.Equal(s.Data["ca.crt"], ca) {
				return nil, nil, fmt.Errorf("the CA in Secret %s/%s is not usable (expired or malformed); delete the Secret to make a new one", namespace, caSecret)
			}
			return issuer, ca, nil // the shared CA
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: caSecret},
			Data:       map[string][]byte{"ca.crt": ca, "ca.key": key},
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			return issuer, ca, nil
		case apierrors.IsAlreadyExists(err):
			// Another replica made it first: take theirs.
			_ = os.Remove(filepath.Join(dir, "ca.key"))
			continue
		default:
			return nil, nil, fmt.Errorf("store the CA Secret %s/%s: %w", namespace, caSecret, err)
		}
	}
	return nil, nil, fmt.Errorf("the CA Secret %s/%s changed while it was read; start again", namespace, caSecret)
}

// KeepCABundle sets every webhook of the MutatingWebhookConfiguration name
// to trust ca, now and every interval until ctx ends (someone may re-apply
// the manifest without it).
func KeepCABundle(ctx context.Context, kube kubernetes.Interface, name string, ca []byte, interval time.Duration) error {
	set := func() error {
		mwcs := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
		c, err := mwcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed := false
		for i := range c.Webhooks {
			if !bytes.Equal(c.Webhooks[i].ClientConfig.CABundle, ca) {
				c.Webhooks[i].ClientConfig.CABundle, changed = ca, true
			}
		}
		if !changed {
			return nil
		}
		_, err = mwcs.Update(ctx, c, metav1.UpdateOptions{})
		return err
	}
	if err := set(); err != nil {
		return fmt.Errorf("set the caBundle of MutatingWebhookConfiguration %s: %w", name, err)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_ = set() // retried at the next tick; the webhook keeps serving
		}
	}
}
