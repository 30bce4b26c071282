package printers

import "k8s.io/apimachinery/pkg/runtime/schema"

// registry holds the resources whose kube-apiserver v1.37.2 storage prints
// with k8s.io/kubernetes/pkg/printers/internalversion, for the version of
// each that the printer decodes. Resources that kube-apiserver prints with
// its default table convertor (roles, clusterroles, limitranges,
// csistoragecapacities, ...) are not here: they print as Default.
var registry = map[schema.GroupResource]*Printer{
	{Resource: "pods"}:                   podPrinter,
	{Resource: "podtemplates"}:           podTemplatePrinter,
	{Resource: "replicationcontrollers"}: replicationControllerPrinter,
	{Resource: "services"}:               servicePrinter,
	{Resource: "endpoints"}:              endpointsPrinter,
	{Resource: "nodes"}:                  nodePrinter,
	{Resource: "events"}:                 eventPrinter,
	{Resource: "namespaces"}:             namespacePrinter,
	{Resource: "secrets"}:                secretPrinter,
	{Resource: "serviceaccounts"}:        serviceAccountPrinter,
	{Resource: "persistentvolumes"}:      persistentVolumePrinter,
	{Resource: "persistentvolumeclaims"}: persistentVolumeClaimPrinter,
	{Resource: "configmaps"}:             configMapPrinter,
	{Resource: "resourcequotas"}:         resourceQuotaPrinter,
	{Resource: "componentstatuses"}:      componentStatusPrinter,

	{Group: "apps", Resource: "deployments"}:         deploymentPrinter,
	{Group: "apps", Resource: "replicasets"}:         replicaSetPrinter,
	{Group: "apps", Resource: "statefulsets"}:        statefulSetPrinter,
	{Group: "apps", Resource: "daemonsets"}:          daemonSetPrinter,
	{Group: "apps", Resource: "controllerrevisions"}: controllerRevisionPrinter,

	{Group: "batch", Resource: "jobs"}:     jobPrinter,
	{Group: "batch", Resource: "cronjobs"}: cronJobPrinter,

	{Group: "autoscaling", Resource: "horizontalpodautoscalers"}: horizontalPodAutoscalerPrinter,

	{Group: "events.k8s.io", Resource: "events"}:              eventsV1Printer,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}:   endpointSlicePrinter,
	{Group: "coordination.k8s.io", Resource: "leases"}:        leasePrinter,
	{Group: "policy", Resource: "poddisruptionbudgets"}:       podDisruptionBudgetPrinter,
	{Group: "scheduling.k8s.io", Resource: "priorityclasses"}: priorityClassPrinter,
	{Group: "node.k8s.io", Resource: "runtimeclasses"}:        runtimeClassPrinter,

	{Group: "networking.k8s.io", Resource: "ingresses"}:       ingressPrinter,
	{Group: "networking.k8s.io", Resource: "ingressclasses"}:  ingressClassPrinter,
	{Group: "networking.k8s.io", Resource: "networkpolicies"}: networkPolicyPrinter,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:    serviceCIDRPrinter,
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:     ipAddressPrinter,

	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:        roleBindingPrinter,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: clusterRoleBindingPrinter,

	{Group: "storage.k8s.io", Resource: "storageclasses"}:          storageClassPrinter,
	{Group: "storage.k8s.io", Resource: "volumeattributesclasses"}: volumeAttributesClassPrinter,
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:       volumeAttachmentPrinter,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                csiNodePrinter,
	{Group: "storage.k8s.io", Resource: "csidrivers"}:              csiDriverPrinter,

	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:     mutatingWebhookPrinter,
	{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}:   validatingWebhookPrinter,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}:       validatingAdmissionPolicyPrinter,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}: validatingAdmissionPolicyBindingPrinter,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:         mutatingAdmissionPolicyPrinter,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicybindings"}:   mutatingAdmissionPolicyBindingPrinter,

	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                 flowSchemaPrinter,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}: priorityLevelConfigurationPrinter,

	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: certificateSigningRequestPrinter,
}
