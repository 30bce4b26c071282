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
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

var podDisruptionBudgetPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
	{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
	{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *policyv1.PodDisruptionBudget, now time.Time) []any {
	minAvailable := "N/A"
	if obj.Spec.MinAvailable != nil {
		minAvailable = obj.Spec.MinAvailable.String()
	}
	maxUnavailable := "N/A"
	if obj.Spec.MaxUnavailable != nil {
		maxUnavailable = obj.Spec.MaxUnavailable.String()
	}
	return []any{obj.Name, minAvailable, maxUnavailable, int64(obj.Status.DisruptionsAllowed), translateTimestampSince(obj.CreationTimestamp, now)}
})

var leasePrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *coordinationv1.Lease, now time.Time) []any {
	var holderIdentity string
	if obj.Spec.HolderIdentity != nil {
		holderIdentity = *obj.Spec.HolderIdentity
	}
	return []any{obj.Name, holderIdentity, translateTimestampSince(obj.CreationTimestamp, now)}
})

var priorityClassPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Value", Type: "integer", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["value"]},
	{Name: "Global-Default", Type: "boolean", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "PreemptionPolicy", Type: "string", Description: schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]},
}, func(obj *schedulingv1.PriorityClass, now time.Time) []any {
	var preemptionPolicy string
	if obj.PreemptionPolicy != nil {
		preemptionPolicy = string(*obj.PreemptionPolicy)
	}
	return []any{obj.Name, int64(obj.Value), obj.GlobalDefault, translateTimestampSince(obj.CreationTimestamp, now), preemptionPolicy}
})

var runtimeClassPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Handler", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["handler"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *nodev1.RuntimeClass, now time.Time) []any {
	return []any{obj.Name, obj.Handler, translateTimestampSince(obj.CreationTimestamp, now)}
})

var mutatingWebhookPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []any {
	return []any{obj.Name, int64(len(obj.Webhooks)), translateTimestampSince(obj.CreationTimestamp, now)}
})

var validatingWebhookPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []any {
	return []any{obj.Name, int64(len(obj.Webhooks)), translateTimestampSince(obj.CreationTimestamp, now)}
})

var validatingAdmissionPolicyPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
	{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *admissionregistrationv1.ValidatingAdmissionPolicy, now time.Time) []any {
	return []any{obj.Name, int64(len(obj.Spec.Validations)), paramKindString(obj.Spec.ParamKind), translateTimestampSince(obj.CreationTimestamp, now)}
})

var mutatingAdmissionPolicyPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Mutations", Type: "integer", Description: "Mutation indicates the number of mutations rules defined in this configuration"},
	{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *admissionregistrationv1.MutatingAdmissionPolicy, now time.Time) []any {
	return []any{obj.Name, int64(len(obj.Spec.Mutations)), paramKindString(obj.Spec.ParamKind), translateTimestampSince(obj.CreationTimestamp, now)}
})

func paramKindString(paramKind *admissionregistrationv1.ParamKind) string {
	if paramKind == nil {
		return "<unset>"
	}
	return paramKind.APIVersion + "/" + paramKind.Kind
}

var policyBindingColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to"},
	{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configuration param"},
	{Name: "Age", Type: "string", Description: ageDescription},
}

var validatingAdmissionPolicyBindingPrinter = newPrinter(policyBindingColumns, func(obj *admissionregistrationv1.ValidatingAdmissionPolicyBinding, now time.Time) []any {
	return []any{obj.Name, obj.Spec.PolicyName, paramRefString(obj.Spec.ParamRef), translateTimestampSince(obj.CreationTimestamp, now)}
})

var mutatingAdmissionPolicyBindingPrinter = newPrinter(policyBindingColumns, func(obj *admissionregistrationv1.MutatingAdmissionPolicyBinding, now time.Time) []any {
	return []any{obj.Name, obj.Spec.PolicyName, paramRefString(obj.Spec.ParamRef), translateTimestampSince(obj.CreationTimestamp, now)}
})

func paramRefString(pr *admissionregistrationv1.ParamRef) string {
	paramName := "<unset>"
	if pr != nil {
		if len(pr.Name) > 0 {
			if pr.Namespace != "" {
				paramName = pr.Namespace + "/" + pr.Name
			} else {
				// Can't tell from here if param is cluster-scoped, so all
				// params without names get * namespace
				paramName = "*/" + pr.Name
			}
		} else if pr.Selector != nil {
			paramName = pr.Selector.String()
		}
	}
	return paramName
}

var flowSchemaPrinter = &Printer{
	columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
		{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
		{Name: "MatchingPrecedence", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]},
		{Name: "DistinguisherMethod", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]},
		{Name: "Age", Type: "string", Description: ageDescription},
		{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
	},
	row: rowOf(printFlowSchema),
	list: func(items [][]byte, now time.Time) ([]metav1.TableRow, error) {
		type item struct {
			obj  *flowcontrolv1.FlowSchema
			data []byte
		}
		seq := make([]item, len(items))
		for i, data := range items {
			obj, err := decode[flowcontrolv1.FlowSchema](data, flowcontrolv1.SchemeGroupVersion)
			if err != nil {
				return nil, err
			}
			seq[i] = item{obj, data}
		}
		// apihelpers.FlowSchemaSequence: by matching precedence, then name.
		sort.SliceStable(seq, func(i, j int) bool {
			if ip, jp := seq[i].obj.Spec.MatchingPrecedence, seq[j].obj.Spec.MatchingPrecedence; ip != jp {
				return ip < jp
			}
			return seq[i].obj.Name < seq[j].obj.Name
		})
		rows := make([]metav1.TableRow, len(seq))
		for i, it := range seq {
			rows[i].Cells = printFlowSchema(it.obj, now)
			rows[i].Object.Raw = it.data
		}
		return rows, nil
	},
}

func printFlowSchema(obj *flowcontrolv1.FlowSchema, now time.Time) []any {
	distinguisherMethod := "<none>"
	if obj.Spec.DistinguisherMethod != nil {
		distinguisherMethod = string(obj.Spec.DistinguisherMethod.Type)
	}
	badPLRef := "?"
	for _, cond := range obj.Status.Conditions {
		if cond.Type == flowcontrolv1.FlowSchemaConditionDangling {
			badPLRef = string(cond.Status)
			break
		}
	}
	return []any{obj.Name, obj.Spec.PriorityLevelConfiguration.Name, int64(obj.Spec.MatchingPrecedence), distinguisherMethod, translateTimestampSince(obj.CreationTimestamp, now), badPLRef}
}

// defaultNominalConcurrencyShares is flowcontrol/v1's default of a nil
// nominalConcurrencyShares.
const defaultNominalConcurrencyShares = 30

var priorityLevelConfigurationPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
	{Name: "NominalConcurrencyShares", Type: "string", Description: flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]},
	{Name: "Queues", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queues"]},
	{Name: "HandSize", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["handSize"]},
	{Name: "QueueLengthLimit", Type: "string", Description: flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queueLengthLimit"]},
	{Name: "Age", Type: "string", Description: ageDescription},
}, func(obj *flowcontrolv1.PriorityLevelConfiguration, now time.Time) []any {
	ncs := any("<none>")
	queues := any("<none>")
	handSize := any("<none>")
	queueLengthLimit := any("<none>")
	if obj.Spec.Limited != nil {
		shares := int32(defaultNominalConcurrencyShares)
		if obj.Spec.Limited.NominalConcurrencyShares != nil {
			shares = *obj.Spec.Limited.NominalConcurrencyShares
		}
		ncs = shares
		if qc := obj.Spec.Limited.LimitResponse.Queuing; qc != nil {
			queues = qc.Queues
			handSize = qc.HandSize
			queueLengthLimit = qc.QueueLengthLimit
		}
	}
	return []any{obj.Name, string(obj.Spec.Type), ncs, queues, handSize, queueLengthLimit, translateTimestampSince(obj.CreationTimestamp, now)}
})

var certificateSigningRequestPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "SignerName", Type: "string", Description: certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]},
	{Name: "Requestor", Type: "string", Description: certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()["request"]},
	{Name: "RequestedDuration", Type: "string", Description: certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]},
	{Name: "Condition", Type: "string", Description: certificatesv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
}, func(obj *certificatesv1.CertificateSigningRequest, now time.Time) []any {
	signerName := "<none>"
	if obj.Spec.SignerName != "" {
		signerName = obj.Spec.SignerName
	}
	requestedDuration := "<none>"
	if obj.Spec.ExpirationSeconds != nil {
		requestedDuration = duration.HumanDuration(time.Duration(*obj.Spec.ExpirationSeconds) * time.Second)
	}
	return []any{obj.Name, translateTimestampSince(obj.CreationTimestamp, now), signerName, obj.Spec.Username, requestedDuration, csrStatus(obj)}
})

func csrStatus(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	var status string
	// must be in order of presidence
	if denied {
		status += "Denied"
	} else if approved {
		status += "Approved"
	} else {
		status += "Pending"
	}
	if failed {
		status += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		status += ",Issued"
	}
	return status
}
