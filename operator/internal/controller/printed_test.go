package controller

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// printedRow is the run's row as kubectl get prints it: the API server's
// Table of the CRD's printer columns, cells by column name.
func printedRow(ctx context.Context, key client.ObjectKey) (map[string]any, error) {
	cs, err := kubernetes.NewForConfig(apiConfig)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().
		AbsPath("/apis", ebv1.GroupVersion.Group, ebv1.GroupVersion.Version, "namespaces", key.Namespace, "eventbuilderruns", key.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, err
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		return nil, fmt.Errorf("table of %d rows for one run: %s", len(table.Rows), raw)
	}
	row := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		row[c.Name] = table.Rows[0].Cells[i]
	}
	return row, nil
}
