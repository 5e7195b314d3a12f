package controller

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"daq.io/eventbuilder/operator/internal/ranktable"
)

// Annotations on the rank-table ConfigMap: what the table was planned for,
// whether the failure policy stopped the run, the last failover, and the
// rejoins of lost ranks that have not held yet (runplan.RejoinAttempts,
// JSON), and the pod IPs the epoch's builders were given
// (runplan.GivenAddresses, JSON). The ConfigMap is the operator's durable
// record of the run's table.
const (
	annRequest      = "eventbuilder.daq.io/planned-for"
	annStopped      = "eventbuilder.daq.io/stopped"
	annLastFailover = "eventbuilder.daq.io/last-failover"
	annRejoins      = "eventbuilder.daq.io/rejoin-attempts"
	annAddresses    = "eventbuilder.daq.io/given-addresses"
	// annVacancies: each vacated endpoint's node's boot ID, and since when
	// it is vacated (runplan.Vacancies, JSON).
	annVacancies = "eventbuilder.daq.io/vacancies"
	// annFabric: the Fabric (UID and generation) the table was planned on.
	annFabric = "eventbuilder.daq.io/planned-on-fabric"
	// annFabricReplan: what the last replan for a Fabric edit did, the
	// message of condition FabricChanged. Published with the table it
	// describes, so a status write lost after it (a conflict) cannot lose
	// the condition: every reconcile sets it from here.
	annFabricReplan = "eventbuilder.daq.io/fabric-replan"
)

// record reads a JSON record annotation of the rank-table ConfigMap (the
// zero value without one); one that does not parse is an error naming it.
func record[T any](cm *corev1.ConfigMap, annotation string) (T, error) {
	var v T
	if cm == nil || cm.Annotations[annotation] == "" {
		return v, nil
	}
	if err := json.Unmarshal([]byte(cm.Annotations[annotation]), &v); err != nil {
		var zero T
		return zero, fmt.Errorf("ConfigMap %s annotation %s: %w", cm.Name, annotation, err)
	}
	return v, nil
}

// setRecord writes a JSON record annotation of the rank-table ConfigMap.
func setRecord(cm *corev1.ConfigMap, annotation string, v any) {
	b, _ := json.Marshal(v) // plain data: cannot fail
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[annotation] = string(b)
}

// setOrDelete sets m[k] to v, or deletes k when v is empty.
func setOrDelete(m map[string]string, k, v string) {
	if v == "" {
		delete(m, k)
		return
	}
	m[k] = v
}

// unreadStreams are the streams the rank table in cm lists as no RU
// reading them since a failure (none without one).
func unreadStreams(cm *corev1.ConfigMap) []string {
	if cm == nil {
		return nil
	}
	doc, _ := ranktable.Parse(cm.Data[ranktable.Key]) // loadTable parsed it already, and fails on errors
	return doc.UnreadStreams
}
