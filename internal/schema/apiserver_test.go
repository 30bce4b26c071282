package schema_test

import (
	"context"
	"errors"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/informerd/informerd/internal/schema"
	"github.com/informerd/informerd/internal/testenv"
)

// checkAll checks each path against s and fails unless the valid ones pass
// and the invalid ones are refused.
func checkAll(t *testing.T, s *schema.Schema, valid, invalid []string) {
	t.Helper()
	for _, p := range valid {
		if err := s.Check(split(t, p)); err != nil {
			t.Errorf("Check(%s) = %v, want nil", p, err)
		}
	}
	for _, p := range invalid {
		err := s.Check(split(t, p))
		if !errors.Is(err, schema.ErrInvalidPath) {
			t.Errorf("Check(%s) = %v, want ErrInvalidPath", p, err)
		}
		t.Logf("Check(%s): %v", p, err)
	}
}

func TestBuiltInSchema(t *testing.T) {
	src := schema.NewSource(discovery.NewDiscoveryClientForConfigOrDie(env.Config).OpenAPIV3())
	start := time.Now()
	pod, err := src.For(context.Background(), kschema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	if err != nil || pod == nil {
		t.Fatalf("For(Pod) = %v, %v", pod, err)
	}
	t.Logf("the core/v1 schemas were fetched and parsed in %v", time.Since(start))
	checkAll(t, pod,
		[]string{"metadata.labels", "metadata.labels.`app.kubernetes.io/name`", "status.podIP", "spec.containers.image",
			"spec.containers.ports.containerPort", "spec.containers.resources.limits.cpu", "metadata.managedFields.fieldsV1.f:metadata",
			"metadata.ownerReferences.uid", "spec.volumes.configMap.items.key"},
		[]string{"status.podIPz", "spec.containers.imagez", "metadata.creationTimestamp.x", "spec.containers.resources.limits.cpu.x",
			"spec.containers.ports.targetPort.x"})

	deploy, err := src.For(context.Background(), kschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil || deploy == nil {
		t.Fatalf("For(Deployment) = %v, %v", deploy, err)
	}
	checkAll(t, deploy,
		[]string{"spec.template.spec.containers.image", "spec.strategy.rollingUpdate.maxSurge", "status.readyReplicas"},
		[]string{"spec.template.spec.containers.imagez", "spec.strategy.rollingUpdate.maxSurge.x"})
}

func TestCustomResourceSchemas(t *testing.T) {
	ctx := context.Background()
	const group = "schema.informerd.test"
	object := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	crds := map[string]*apiextensionsv1.JSONSchemaProps{
		// A structural schema.
		"Gizmo": ptr.To(object(map[string]apiextensionsv1.JSONSchemaProps{
			"spec": object(map[string]apiextensionsv1.JSONSchemaProps{
				"size":     {Type: "integer"},
				"port":     {XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}},
				"selector": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &str}},
				"parts":    {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: ptr.To(object(map[string]apiextensionsv1.JSONSchemaProps{"name": str}))}},
			}),
			"status": object(map[string]apiextensionsv1.JSONSchemaProps{"phase": str}),
		})),
		// Anything under spec.
		"Blob": ptr.To(object(map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		})),
		// Anything at all.
		"Doodad": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
	}
	client := apiextensions.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	for kind, s := range crds {
		plural := map[string]string{"Gizmo": "gizmos", "Blob": "blobs", "Doodad": "doodads"}[kind]
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s},
				}},
			},
		}
		if _, err := client.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
	}

	// The API server publishes a CRD's schema a moment after creating it; a
	// Source caches "no schema" for MaxAge, so ask a new one each time.
	openAPI := discovery.NewDiscoveryClientForConfigOrDie(env.Config).OpenAPIV3()
	kinds := map[string]*schema.Schema{}
	start := time.Now()
	testenv.Eventually(t, 30*time.Second, "the CRDs' schemas published", func() bool {
		src := schema.NewSource(openAPI)
		for kind := range crds {
			s, err := src.For(ctx, kschema.GroupVersionKind{Group: group, Version: "v1", Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			if s == nil {
				return false
			}
			kinds[kind] = s
		}
		return true
	})
	t.Logf("the CRDs' schemas were published %v after they were created", time.Since(start).Round(time.Millisecond))

	checkAll(t, kinds["Gizmo"],
		[]string{"spec.size", "spec.port", "spec.selector.app", "spec.parts.name", "status.phase", "metadata.labels.`app.kubernetes.io/name`", "metadata.name"},
		[]string{"spec.sizez", "spec.size.x", "spec.port.x", "spec.selector.app.x", "spec.parts.namez", "status.x", "specs", "metadata.creationTimestamp.x"})
	checkAll(t, kinds["Blob"],
		[]string{"spec", "spec.anything", "spec.anything.below.it", "metadata.labels"},
		[]string{"status", "metadata.labelz"})
	checkAll(t, kinds["Doodad"],
		[]string{"spec.anything", "status.anything", "metadata.labels"},
		[]string{"metadata.labelz"})
}
