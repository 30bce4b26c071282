/*
Copyright 2017 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Ported from k8s.io/kubernetes v1.37.2 pkg/printers/internalversion/printers.go
// to the external types of k8s.io/api; changes: a typed object decoded from
// its served JSON instead of the internal type, and an explicit now.

package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// defaultReplicas is what kube-apiserver's defaulting gives a nil
// spec.replicas of apps/v1 before it prints.
const defaultReplicas = 1

func replicasOrDefault(replicas *int32) int32 {
	if replicas == nil {
		return defaultReplicas
	}
	return *replicas
}

var replicaSetPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
	{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
	{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
}, func(obj *appsv1.ReplicaSet, now time.Time) []any {
	names, images := layoutContainerCells(obj.Spec.Template.Spec.Containers)
	return []any{obj.Name, int64(replicasOrDefault(obj.Spec.Replicas)), int64(obj.Status.Replicas), int64(obj.Status.ReadyReplicas), translateTimestampSince(obj.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(obj.Spec.Selector)}
})

var deploymentPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
	{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
	{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]},
}, func(obj *appsv1.Deployment, now time.Time) []any {
	selectorString := "<invalid>"
	if selector, err := metav1.LabelSelectorAsSelector(obj.Spec.Selector); err == nil {
		selectorString = selector.String()
	}
	containers, images := layoutContainerCells(obj.Spec.Template.Spec.Containers)
	return []any{obj.Name, fmt.Sprintf("%d/%d", int64(obj.Status.ReadyReplicas), int64(replicasOrDefault(obj.Spec.Replicas))), int64(obj.Status.UpdatedReplicas), int64(obj.Status.AvailableReplicas), translateTimestampSince(obj.CreationTimestamp, now),
		containers, images, selectorString}
})

var statefulSetPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
}, func(obj *appsv1.StatefulSet, now time.Time) []any {
	names, images := layoutContainerCells(obj.Spec.Template.Spec.Containers)
	return []any{obj.Name, fmt.Sprintf("%d/%d", int64(obj.Status.ReadyReplicas), int64(replicasOrDefault(obj.Spec.Replicas))), translateTimestampSince(obj.CreationTimestamp, now),
		names, images}
})

var daemonSetPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Desired", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]},
	{Name: "Current", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]},
	{Name: "Ready", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]},
	{Name: "Up-to-date", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]},
	{Name: "Available", Type: "integer", Description: appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]},
	{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
}, func(obj *appsv1.DaemonSet, now time.Time) []any {
	s := obj.Status
	names, images := layoutContainerCells(obj.Spec.Template.Spec.Containers)
	return []any{obj.Name, int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled), int64(s.NumberReady), int64(s.UpdatedNumberScheduled), int64(s.NumberAvailable),
		labels.FormatLabels(obj.Spec.Template.Spec.NodeSelector), translateTimestampSince(obj.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(obj.Spec.Selector)}
})

var controllerRevisionPrinter = &Printer{
	columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
		{Name: "Controller", Type: "string", Description: "Controller of the object"},
		{Name: "Revision", Type: "string", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
		{Name: "Age", Type: "string", Description: ageDescription},
	},
	row: func(data []byte, now time.Time) ([]any, []metav1.TableRowCondition, error) {
		obj, err := decode[appsv1.ControllerRevision](data, appsv1.SchemeGroupVersion)
		if err != nil {
			return nil, nil, err
		}
		controllerName := "<none>"
		if controllerRef := metav1.GetControllerOf(obj); controllerRef != nil {
			gv, err := schema.ParseGroupVersion(controllerRef.APIVersion)
			if err != nil {
				return nil, nil, fmt.Errorf("printers: controllerrevision %s: %w", obj.Name, err)
			}
			controllerName = formatResourceName(gv.WithKind(controllerRef.Kind).GroupKind(), controllerRef.Name)
		}
		return []any{obj.Name, controllerName, obj.Revision, translateTimestampSince(obj.CreationTimestamp, now)}, nil, nil
	},
}

// formatResourceName is upstream's formatResourceName(kind, name, true).
func formatResourceName(kind schema.GroupKind, name string) string {
	if kind.Empty() {
		return name
	}
	return strings.ToLower(kind.String()) + "/" + name
}
