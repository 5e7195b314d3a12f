package main

import (
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
)

func TestParseSelections(t *testing.T) {
	for _, tc := range []struct {
		name, annotation string
		want             []selection
		err              string
	}{
		{name: "json as the operator writes it", annotation: `[{"name":"eb-numa0","namespace":"daq","interface":"eb0"}]`,
			want: []selection{{Name: "eb-numa0", Namespace: "daq", Interface: "eb0"}}},
		{name: "json, namespace and interface defaulted", annotation: `[{"name":"a"},{"name":"b"}]`,
			want: []selection{{Name: "a", Namespace: "pods", Interface: "net1"}, {Name: "b", Namespace: "pods", Interface: "net2"}}},
		{name: "short form", annotation: "a, other/b@data0,c",
			want: []selection{{Name: "a", Namespace: "pods", Interface: "net1"}, {Name: "b", Namespace: "other", Interface: "data0"}, {Name: "c", Namespace: "pods", Interface: "net3"}}},
		{name: "a field not honoured", annotation: `[{"name":"a","ips":["10.0.0.1/24"]}]`, err: `unknown field "ips"`},
		{name: "no name", annotation: `[{"interface":"eb0"}]`, err: "element 1 names no network"},
		{name: "empty short element", annotation: "a,,b", err: "element 2 names no network"},
		{name: "eth0 taken", annotation: "a@eth0", err: `interface "eth0" of network pods/a is taken`},
		{name: "interface twice", annotation: "a@x,b@x", err: `interface "x" of network pods/b is taken`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSelections(tc.annotation, "pods")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDelegateConfig(t *testing.T) {
	s := selection{Name: "eb-numa0", Namespace: "daq", Interface: "eb0"}
	for _, tc := range []struct {
		name, config, wantType, wantName, err string
	}{
		{name: "named by the definition", config: `{"cniVersion":"0.4.0","type":"macvlan","master":"data0"}`, wantType: "macvlan", wantName: "eb-numa0"},
		{name: "own name kept", config: `{"cniVersion":"0.4.0","name":"data","type":"macvlan"}`, wantType: "macvlan", wantName: "data"},
		{name: "not json", config: `{"type":`, err: "daq/eb-numa0: spec.config is not JSON"},
		{name: "a plugin list", config: `{"name":"x","plugins":[{"type":"macvlan"}]}`, err: "is a plugin list"},
		{name: "no type", config: `{"cniVersion":"0.4.0"}`, err: `names no plugin ("type")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pluginType, conf, err := delegateConfig(tc.config, s)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			var fields map[string]any
			if err != nil || json.Unmarshal(conf, &fields) != nil {
				t.Fatalf("config %s, %v", conf, err)
			}
			if pluginType != tc.wantType || fields["name"] != tc.wantName {
				t.Fatalf("type %q name %v, want %q %q", pluginType, fields["name"], tc.wantType, tc.wantName)
			}
		})
	}
}

func TestStatusOf(t *testing.T) {
	address := func(cidr string, iface *int) *current.IPConfig {
		ip, n, _ := net.ParseCIDR(cidr)
		n.IP = ip
		return &current.IPConfig{Interface: iface, Address: *n}
	}
	zero, one := 0, 1
	result := &current.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*current.Interface{{Name: "eb0", Mac: "aa:bb:cc:dd:ee:01"}, {Name: "eb0", Mac: "aa:bb:cc:dd:ee:02", Sandbox: "/var/run/netns/x"}},
		IPs:        []*current.IPConfig{address("10.200.64.3/16", &one), address("10.200.0.1/16", &zero), address("10.9.0.1/24", nil)},
	}
	got, err := statusOf("daq/eb-numa0", "eb0", result, false)
	want := networkStatus{Name: "daq/eb-numa0", Interface: "eb0", IPs: []string{"10.200.64.3", "10.9.0.1"}, Mac: "aa:bb:cc:dd:ee:02"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v (the sandbox's interface and the addresses of no interface)", got, err, want)
	}
}
