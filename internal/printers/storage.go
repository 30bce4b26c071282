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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations of k8s.io/kubernetes/pkg/apis/storage/util.
const (
	isDefaultStorageClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultStorageClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

var storageClassPrinter = &Printer{
	columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
		{Name: "Provisioner", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["provisioner"]},
		{Name: "ReclaimPolicy", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["reclaimPolicy"]},
		{Name: "VolumeBindingMode", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["volumeBindingMode"]},
		{Name: "AllowVolumeExpansion", Type: "string", Description: storagev1.StorageClass{}.SwaggerDoc()["allowVolumeExpansion"]},
		{Name: "Age", Type: "string", Description: ageDescription},
	},
	row: rowOf(func(obj *storagev1.StorageClass, now time.Time) []any {
		return printStorageClass(obj, "", now)
	}),
	list: func(items [][]byte, now time.Time) ([]metav1.TableRow, error) {
		classes := make([]*storagev1.StorageClass, len(items))
		for i, data := range items {
			obj, err := decode[storagev1.StorageClass](data, storagev1.SchemeGroupVersion)
			if err != nil {
				return nil, err
			}
			classes[i] = obj
		}
		effectiveDefault := effectiveDefaultStorageClass(classes)
		rows := make([]metav1.TableRow, len(items))
		for i, obj := range classes {
			rows[i].Cells = printStorageClass(obj, effectiveDefault, now)
			rows[i].Object.Raw = items[i]
		}
		return rows, nil
	},
}

func printStorageClass(obj *storagev1.StorageClass, effectiveDefault string, now time.Time) []any {
	name := obj.Name
	if effectiveDefault != "" && obj.Name == effectiveDefault {
		name += " (default)"
	}
	reclaimPolicy := string(corev1.PersistentVolumeReclaimDelete)
	if obj.ReclaimPolicy != nil {
		reclaimPolicy = string(*obj.ReclaimPolicy)
	}
	volumeBindingMode := string(storagev1.VolumeBindingImmediate)
	if obj.VolumeBindingMode != nil {
		volumeBindingMode = string(*obj.VolumeBindingMode)
	}
	allowVolumeExpansion := false
	if obj.AllowVolumeExpansion != nil {
		allowVolumeExpansion = *obj.AllowVolumeExpansion
	}
	return []any{name, obj.Provisioner, reclaimPolicy, volumeBindingMode, allowVolumeExpansion, translateTimestampSince(obj.CreationTimestamp, now)}
}

// effectiveDefaultStorageClass returns the name of the effective default StorageClass.
// When multiple StorageClasses have the default annotation, the most recently created one
// is the effective default. If timestamps are equal, the one with alphabetically first name wins.
func effectiveDefaultStorageClass(items []*storagev1.StorageClass) string {
	var effectiveDefault *storagev1.StorageClass
	for _, item := range items {
		if item.Annotations[isDefaultStorageClassAnnotation] != "true" && item.Annotations[betaIsDefaultStorageClassAnnotation] != "true" {
			continue
		}
		switch {
		case effectiveDefault == nil:
			effectiveDefault = item
		case item.CreationTimestamp.After(effectiveDefault.CreationTimestamp.Time):
			effectiveDefault = item
		case item.CreationTimestamp.Equal(&effectiveDefault.CreationTimestamp) && item.Name < effectiveDefault.Name:
			effectiveDefault = item
		}
	}
	if effectiveDefault != nil {
		return effectiveDefault.Name
	}
	return ""
}

var volumeAttributesClassPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "DriverName", Type: "string", Description: storagev1.VolumeAttributesClass{}.SwaggerDoc()["driverName"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *storagev1.VolumeAttributesClass, now time.Time) []any {
	return []any{obj.Name, obj.DriverName, translateTimestampSince(obj.CreationTimestamp, now)}
})

var volumeAttachmentPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
	{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
	{Name: "Node", Type: "string", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]},
	{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *storagev1.VolumeAttachment, now time.Time) []any {
	pvName := ""
	if obj.Spec.Source.PersistentVolumeName != nil {
		pvName = *obj.Spec.Source.PersistentVolumeName
	}
	return []any{obj.Name, obj.Spec.Attacher, pvName, obj.Spec.NodeName, obj.Status.Attached, translateTimestampSince(obj.CreationTimestamp, now)}
})

var csiNodePrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *storagev1.CSINode, now time.Time) []any {
	return []any{obj.Name, int64(len(obj.Spec.Drivers)), translateTimestampSince(obj.CreationTimestamp, now)}
})

var csiDriverPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "AttachRequired", Type: "boolean", Description: storagev1.CSIDriverSpec{}.SwaggerDoc()["attachRequired"]},
	{Name: "PodInfoOnMount", Type: "boolean", Description: storagev1.CSIDriverSpec{}.SwaggerDoc()["podInfoOnMount"]},
	{Name: "StorageCapacity", Type: "boolean", Description: storagev1.CSIDriverSpec{}.SwaggerDoc()["storageCapacity"]},
	{Name: "TokenRequests", Type: "string", Description: storagev1.CSIDriverSpec{}.SwaggerDoc()["tokenRequests"]},
	{Name: "RequiresRepublish", Type: "boolean", Description: storagev1.CSIDriverSpec{}.SwaggerDoc()["requiresRepublish"]},
	{Name: "Modes", Type: "string", Description: storagev1.CSIDriverSpec{}.SwaggerDoc()["volumeLifecycleModes"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *storagev1.CSIDriver, now time.Time) []any {
	attachRequired := true
	if obj.Spec.AttachRequired != nil {
		attachRequired = *obj.Spec.AttachRequired
	}
	podInfoOnMount := false
	if obj.Spec.PodInfoOnMount != nil {
		podInfoOnMount = *obj.Spec.PodInfoOnMount
	}
	allModes := []string{}
	for _, mode := range obj.Spec.VolumeLifecycleModes {
		allModes = append(allModes, string(mode))
	}
	modes := strings.Join(allModes, ",")
	if len(modes) == 0 {
		modes = "<none>"
	}
	storageCapacity := false
	if obj.Spec.StorageCapacity != nil {
		storageCapacity = *obj.Spec.StorageCapacity
	}
	tokenRequests := "<unset>"
	if obj.Spec.TokenRequests != nil {
		audiences := []string{}
		for _, t := range obj.Spec.TokenRequests {
			audiences = append(audiences, t.Audience)
		}
		tokenRequests = strings.Join(audiences, ",")
	}
	requiresRepublish := false
	if obj.Spec.RequiresRepublish != nil {
		requiresRepublish = *obj.Spec.RequiresRepublish
	}
	return []any{obj.Name, attachRequired, podInfoOnMount, storageCapacity, tokenRequests, requiresRepublish, modes, translateTimestampSince(obj.CreationTimestamp, now)}
})
