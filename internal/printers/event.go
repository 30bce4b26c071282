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

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// eventColumns serve events of both core/v1 and events.k8s.io/v1: both are
// stored as the internal core Event.
var eventColumns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.Event{}.InvolvedObject.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: nameDescription},
}

var eventPrinter = newPrinter(eventColumns, printEvent)

// eventsV1Printer prints events.k8s.io/v1 Events, converted as
// k8s.io/kubernetes/pkg/apis/events/v1's Convert_v1_Event_To_core_Event does.
var eventsV1Printer = newPrinter(eventColumns, func(obj *eventsv1.Event, now time.Time) []any {
	e := corev1.Event{
		ObjectMeta:          obj.ObjectMeta,
		InvolvedObject:      obj.Regarding,
		Reason:              obj.Reason,
		Message:             obj.Note,
		Source:              obj.DeprecatedSource,
		FirstTimestamp:      obj.DeprecatedFirstTimestamp,
		LastTimestamp:       obj.DeprecatedLastTimestamp,
		Count:               obj.DeprecatedCount,
		Type:                obj.Type,
		EventTime:           obj.EventTime,
		Action:              obj.Action,
		Related:             obj.Related,
		ReportingController: obj.ReportingController,
		ReportingInstance:   obj.ReportingInstance,
	}
	if obj.Series != nil {
		e.Series = &corev1.EventSeries{Count: obj.Series.Count, LastObservedTime: obj.Series.LastObservedTime}
	}
	return printEvent(&e, now)
})

func printEvent(obj *corev1.Event, now time.Time) []any {
	firstTimestamp := translateTimestampSince(obj.FirstTimestamp, now)
	if obj.FirstTimestamp.IsZero() {
		firstTimestamp = translateMicroTimestampSince(obj.EventTime, now)
	}

	lastTimestamp := translateTimestampSince(obj.LastTimestamp, now)
	if obj.LastTimestamp.IsZero() {
		lastTimestamp = firstTimestamp
	}

	count := obj.Count
	if obj.Series != nil {
		lastTimestamp = translateMicroTimestampSince(obj.Series.LastObservedTime, now)
		count = obj.Series.Count
	} else if count == 0 {
		// Singleton events don't have a count set in the new API.
		count = 1
	}

	var target string
	if len(obj.InvolvedObject.Name) > 0 {
		target = fmt.Sprintf("%s/%s", strings.ToLower(obj.InvolvedObject.Kind), obj.InvolvedObject.Name)
	} else {
		target = strings.ToLower(obj.InvolvedObject.Kind)
	}
	return []any{
		lastTimestamp,
		obj.Type,
		obj.Reason,
		target,
		obj.InvolvedObject.FieldPath,
		formatEventSource(obj.Source, obj.ReportingController, obj.ReportingInstance),
		strings.TrimSpace(obj.Message),
		firstTimestamp,
		int64(count),
		obj.Name,
	}
}

// formatEventSource formats EventSource as a comma separated string excluding Host when empty.
// It uses reportingController when Source.Component is empty and reportingInstance when Source.Host is empty
func formatEventSource(es corev1.EventSource, reportingController, reportingInstance string) string {
	component := firstNonEmpty(es.Component, reportingController)
	instance := firstNonEmpty(es.Host, reportingInstance)
	if len(instance) == 0 {
		return component
	}
	return component + ", " + instance
}
