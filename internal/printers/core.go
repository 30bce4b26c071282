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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// betaStorageClassAnnotation is k8s.io/kubernetes/pkg/apis/core's
// BetaStorageClassAnnotation.
const betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

var podTemplatePrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
	{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."},
}, func(obj *corev1.PodTemplate, _ time.Time) []any {
	names, images := layoutContainerCells(obj.Template.Spec.Containers)
	return []any{obj.Name, names, images, labels.FormatLabels(obj.Template.Labels)}
})

var replicationControllerPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Desired", Type: "integer", Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]},
	{Name: "Current", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]},
	{Name: "Ready", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]},
}, func(obj *corev1.ReplicationController, now time.Time) []any {
	desiredReplicas := int32(0)
	if obj.Spec.Replicas != nil {
		desiredReplicas = *obj.Spec.Replicas
	}
	var containers []corev1.Container
	if obj.Spec.Template != nil {
		containers = obj.Spec.Template.Spec.Containers
	}
	names, images := layoutContainerCells(containers)
	return []any{obj.Name, int64(desiredReplicas), int64(obj.Status.Replicas), int64(obj.Status.ReadyReplicas), translateTimestampSince(obj.CreationTimestamp, now),
		names, images, labels.FormatLabels(obj.Spec.Selector)}
})

var namespacePrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Status", Type: "string", Description: "The status of the namespace"},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *corev1.Namespace, now time.Time) []any {
	return []any{obj.Name, string(obj.Status.Phase), translateTimestampSince(obj.CreationTimestamp, now)}
})

var secretPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
	{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *corev1.Secret, now time.Time) []any {
	// The conversion to the internal type merges stringData into data.
	data := len(obj.Data)
	for k := range obj.StringData {
		if _, ok := obj.Data[k]; !ok {
			data++
		}
	}
	return []any{obj.Name, string(obj.Type), int64(data), translateTimestampSince(obj.CreationTimestamp, now)}
})

var serviceAccountPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *corev1.ServiceAccount, now time.Time) []any {
	return []any{obj.Name, translateTimestampSince(obj.CreationTimestamp, now)}
})

var configMapPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *corev1.ConfigMap, now time.Time) []any {
	return []any{obj.Name, int64(len(obj.Data) + len(obj.BinaryData)), translateTimestampSince(obj.CreationTimestamp, now)}
})

var persistentVolumePrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Capacity", Type: "string", Description: corev1.PersistentVolumeSpec{}.SwaggerDoc()["capacity"]},
	{Name: "Access Modes", Type: "string", Description: corev1.PersistentVolumeSpec{}.SwaggerDoc()["accessModes"]},
	{Name: "Reclaim Policy", Type: "string", Description: corev1.PersistentVolumeSpec{}.SwaggerDoc()["persistentVolumeReclaimPolicy"]},
	{Name: "Status", Type: "string", Description: corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"]},
	{Name: "Claim", Type: "string", Description: corev1.PersistentVolumeSpec{}.SwaggerDoc()["claimRef"]},
	{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
	{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pv"},
	{Name: "Reason", Type: "string", Description: corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "VolumeMode", Type: "string", Priority: 1, Description: corev1.PersistentVolumeSpec{}.SwaggerDoc()["volumeMode"]},
}, printPersistentVolume)

func printPersistentVolume(obj *corev1.PersistentVolume, now time.Time) []any {
	claimRefUID := ""
	if obj.Spec.ClaimRef != nil {
		claimRefUID += obj.Spec.ClaimRef.Namespace
		claimRefUID += "/"
		claimRefUID += obj.Spec.ClaimRef.Name
	}

	modesStr := accessModesAsString(obj.Spec.AccessModes)
	reclaimPolicyStr := string(obj.Spec.PersistentVolumeReclaimPolicy)

	aQty := obj.Spec.Capacity[corev1.ResourceStorage]
	aSize := aQty.String()

	phase := obj.Status.Phase
	if obj.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	volumeMode := "<unset>"
	if obj.Spec.VolumeMode != nil {
		volumeMode = string(*obj.Spec.VolumeMode)
	}

	volumeAttributeClass := "<unset>"
	if obj.Spec.VolumeAttributesClassName != nil {
		volumeAttributeClass = *obj.Spec.VolumeAttributesClassName
	}

	// GetPersistentVolumeClass: the beta annotation first.
	class, found := obj.Annotations[betaStorageClassAnnotation]
	if !found {
		class = obj.Spec.StorageClassName
	}
	return []any{obj.Name, aSize, modesStr, reclaimPolicyStr,
		string(phase), claimRefUID, class, volumeAttributeClass,
		obj.Status.Reason, translateTimestampSince(obj.CreationTimestamp, now), volumeMode}
}

var persistentVolumeClaimPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Status", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]},
	{Name: "Volume", Type: "string", Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"]},
	{Name: "Capacity", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]},
	{Name: "Access Modes", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]},
	{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
	{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "VolumeMode", Type: "string", Priority: 1, Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"]},
}, printPersistentVolumeClaim)

func printPersistentVolumeClaim(obj *corev1.PersistentVolumeClaim, now time.Time) []any {
	phase := obj.Status.Phase
	if obj.DeletionTimestamp != nil {
		phase = "Terminating"
	}

	volumeAttributeClass := "<unset>"
	capacity := ""
	accessModes := ""
	volumeMode := "<unset>"

	if obj.Spec.VolumeAttributesClassName != nil {
		volumeAttributeClass = *obj.Spec.VolumeAttributesClassName
	}

	if obj.Spec.VolumeName != "" {
		accessModes = accessModesAsString(obj.Status.AccessModes)
		storage := obj.Status.Capacity[corev1.ResourceStorage]
		capacity = storage.String()
	}

	if obj.Spec.VolumeMode != nil {
		volumeMode = string(*obj.Spec.VolumeMode)
	}

	// GetPersistentVolumeClaimClass: the beta annotation first.
	class, found := obj.Annotations[betaStorageClassAnnotation]
	if !found && obj.Spec.StorageClassName != nil {
		class = *obj.Spec.StorageClassName
	}
	return []any{obj.Name, string(phase), obj.Spec.VolumeName, capacity, accessModes,
		class, volumeAttributeClass, translateTimestampSince(obj.CreationTimestamp, now), volumeMode}
}

// accessModesAsString is k8s.io/kubernetes/pkg/apis/core/helper's
// GetAccessModesAsString: modes, when present, are always in the same order:
// RWO,ROX,RWX,RWOP.
func accessModesAsString(modes []corev1.PersistentVolumeAccessMode) string {
	modesStr := []string{}
	if slices.Contains(modes, corev1.ReadWriteOnce) {
		modesStr = append(modesStr, "RWO")
	}
	if slices.Contains(modes, corev1.ReadOnlyMany) {
		modesStr = append(modesStr, "ROX")
	}
	if slices.Contains(modes, corev1.ReadWriteMany) {
		modesStr = append(modesStr, "RWX")
	}
	if slices.Contains(modes, corev1.ReadWriteOncePod) {
		modesStr = append(modesStr, "RWOP")
	}
	return strings.Join(modesStr, ",")
}

var resourceQuotaPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
	{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
	{Name: "Age", Type: "string", Description: ageDescription},
}, printResourceQuota)

func printResourceQuota(resourceQuota *corev1.ResourceQuota, now time.Time) []any {
	resources := make([]corev1.ResourceName, 0, len(resourceQuota.Status.Hard))
	for resource := range resourceQuota.Status.Hard {
		resources = append(resources, resource)
	}
	slices.Sort(resources)

	var requestColumn, limitColumn strings.Builder
	for i := range resources {
		w := &requestColumn
		resource := resources[i]
		usedQuantity := resourceQuota.Status.Used[resource]
		hardQuantity := resourceQuota.Status.Hard[resource]

		// use limitColumn writer if a resource name prefixed with "limits" is found
		if pieces := strings.Split(resource.String(), "."); len(pieces) > 1 && pieces[0] == "limits" {
			w = &limitColumn
		}

		fmt.Fprintf(w, "%s: %s/%s, ", resource, usedQuantity.String(), hardQuantity.String())
	}

	age := translateTimestampSince(resourceQuota.CreationTimestamp, now)
	return []any{resourceQuota.Name, strings.TrimSuffix(requestColumn.String(), ", "), strings.TrimSuffix(limitColumn.String(), ", "), age}
}

var componentStatusPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Status", Type: "string", Description: "Status of the component conditions"},
	{Name: "Message", Type: "string", Description: "Message of the component conditions"},
	{Name: "Error", Type: "string", Description: "Error of the component conditions"},
}, func(obj *corev1.ComponentStatus, _ time.Time) []any {
	status := "Unknown"
	message := ""
	errorMessage := ""
	for _, condition := range obj.Conditions {
		if condition.Type == corev1.ComponentHealthy {
			if condition.Status == corev1.ConditionTrue {
				status = "Healthy"
			} else {
				status = "Unhealthy"
			}
			message = condition.Message
			errorMessage = condition.Error
			break
		}
	}
	return []any{obj.Name, status, message, errorMessage}
})
