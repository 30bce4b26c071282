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

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var roleBindingPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Role", Type: "string", Description: rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Users", Type: "string", Priority: 1, Description: "Users in the roleBinding"},
	{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the roleBinding"},
	{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the roleBinding"},
}, func(obj *rbacv1.RoleBinding, now time.Time) []any {
	return printBinding(obj.Name, obj.RoleRef, obj.Subjects, obj.CreationTimestamp, now)
})

var clusterRoleBindingPrinter = newPrinter([]metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDescription},
	{Name: "Role", Type: "string", Description: rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]},
	{Name: "Age", Type: "string", Description: ageDescription},
	{Name: "Users", Type: "string", Priority: 1, Description: "Users in the clusterRoleBinding"},
	{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the clusterRoleBinding"},
	{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the clusterRoleBinding"},
}, func(obj *rbacv1.ClusterRoleBinding, now time.Time) []any {
	return printBinding(obj.Name, obj.RoleRef, obj.Subjects, obj.CreationTimestamp, now)
})

// printBinding is upstream's printRoleBinding and printClusterRoleBinding.
func printBinding(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time, now time.Time) []any {
	roleRef := fmt.Sprintf("%s/%s", ref.Kind, ref.Name)
	users, groups, sas := subjectsStrings(subjects)
	return []any{name, roleRef, translateTimestampSince(created, now), strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

// subjectsStrings is k8s.io/kubernetes/pkg/apis/rbac's SubjectsStrings
// without the subjects of other kinds, which the printers drop.
func subjectsStrings(subjects []rbacv1.Subject) (users, groups, sas []string) {
	for _, subject := range subjects {
		switch subject.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, fmt.Sprintf("%s/%s", subject.Namespace, subject.Name))
		case rbacv1.UserKind:
			users = append(users, subject.Name)
		case rbacv1.GroupKind:
			groups = append(groups, subject.Name)
		}
	}
	return users, groups, sas
}
