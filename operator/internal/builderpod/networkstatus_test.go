package builderpod

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDataAddress(t *testing.T) {
	const defaultNet = `{"name":"podnet","interface":"eth0","ips":["10.244.1.5"],"default":true}`
	for _, tc := range []struct {
		name, status string // "-" for no annotation
		want, err    string
	}{
		{name: "eb0's IPv4", status: `[` + defaultNet + `,{"name":"daq/eb-numa1","interface":"eb0","ips":["fd00::7","192.168.40.7"],"mac":"02:00:00:00:00:07"}]`,
			want: "192.168.40.7"},
		{name: "not attached yet", status: "-", err: "no k8s.v1.cni.cncf.io/network-status annotation: the data network is not attached (is Multus running on node n1?)"},
		{name: "eb0 missing", status: `[` + defaultNet + `]`, err: "lists no interface eb0"},
		{name: "IPv6 only", status: `[{"name":"daq/eb","interface":"eb0","ips":["fd00::7"]}]`, err: "interface eb0 (network daq/eb) has no IPv4 address"},
		{name: "garbage", status: `{`, err: "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Spec: corev1.PodSpec{NodeName: "n1"}}
			if tc.status != "-" {
				pod.Annotations[NetworkStatusAnnotation] = tc.status
			}
			got, err := DataAddress(pod)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("DataAddress = %q, %v; want %q", got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("DataAddress = %q, %v; want an error saying %q", got, err, tc.err)
			}
		})
	}
}
