package planner

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fieldErrors unpacks the FieldErrors joined in err.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		var fe *FieldError
		if errors.As(e, &fe) && fe == e {
			out = append(out, fe)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		} else if u := errors.Unwrap(e); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}

func TestFabricValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Fabric)
		fields []string // FieldError fields wanted, in order; none means valid
		says   string   // the message names this
	}{
		{name: "fig8 is valid", change: func(*Fabric) {}},
		{name: "leaf-port routing rule", change: func(f *Fabric) { f.Routing = RoutingLeafPortModSpines }},
		{name: "zero counts", change: func(f *Fabric) { f.Leaves, f.Spines, f.PortsPerLeaf, f.LinksPerPair = 0, 0, 0, -1 },
			fields: []string{"leaves", "spines", "portsPerLeaf", "linksPerPair"}, says: "at least 1"},
		{name: "unknown routing", change: func(f *Fabric) { f.Routing = "ECMP" },
			fields: []string{"routing"}, says: `"ECMP"`},
		{name: "no endpoints", change: func(f *Fabric) { f.Endpoints = nil },
			fields: []string{"endpoints"}},
		{name: "duplicate name", change: func(f *Fabric) { f.Endpoints[3].Name = "t1" },
			fields: []string{"endpoints[3].name"}, says: `"t1" is also the name of endpoints[1]`},
		{name: "empty name", change: func(f *Fabric) { f.Endpoints[2].Name = "" },
			fields: []string{"endpoints[2].name"}},
		{name: "no node", change: func(f *Fabric) { f.Endpoints[2].Node = "" },
			fields: []string{"endpoints[2].node"}, says: `"t2"`},
		{name: "same node and NUMA twice", change: func(f *Fabric) { f.Endpoints[5].Node = "t4" },
			fields: []string{"endpoints[5].numa"}, says: `node "t4" NUMA 0`},
		{name: "negative NUMA", change: func(f *Fabric) { f.Endpoints[5].NUMA = -1 },
			fields: []string{"endpoints[5].numa"}},
		{name: "duplicate leaf and port", change: func(f *Fabric) { f.Endpoints[7].Leaf, f.Endpoints[7].Port = 0, 1 },
			fields: []string{"endpoints[7].port"}, says: `"t7" is cabled to leaf 0 port 1, as is endpoints[1]`},
		{name: "leaf out of range", change: func(f *Fabric) { f.Endpoints[6].Leaf = 4 },
			fields: []string{"endpoints[6].leaf"}, says: "leaf 4"},
		{name: "port out of range", change: func(f *Fabric) { f.Endpoints[6].Port = 2 },
			fields: []string{"endpoints[6].port"}, says: "port 2"},
		{name: "negative port", change: func(f *Fabric) { f.Endpoints[0].Port = -1 },
			fields: []string{"endpoints[0].port"}},
		{name: "stream on two endpoints", change: func(f *Fabric) { f.Endpoints[4].Streams = []string{"st1"} },
			fields: []string{"endpoints[4].streams"}, says: `"st1"`},
		{name: "every problem at once", change: func(f *Fabric) {
			f.Endpoints[1].Name = "t0"
			f.Endpoints[2].Leaf = 9
			f.Endpoints[3].Leaf = 0 // onto t1's port
		}, fields: []string{"endpoints[1].name", "endpoints[2].leaf", "endpoints[3].port"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fig8()
			tc.change(&f)
			err := f.Validate()
			if len(tc.fields) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var got []string
			for _, fe := range fieldErrors(t, err) {
				got = append(got, fe.Field)
				if fe.Problem == "" || fe.Fix == "" {
					t.Errorf("%s: want a problem and a fix, got %+v", fe.Field, fe)
				}
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("Validate() fields = %q, want %q; error: %v", got, tc.fields, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate() = %q, want it to say %q", err, tc.says)
			}
		})
	}
}

func TestRequestValidate(t *testing.T) {
	tests := []struct {
		name   string
		req    Request
		fields []string
	}{
		{name: "folded by default", req: Request{Units: 4}},
		{name: "unfolded with spares", req: Request{Units: 4, Spares: 2, Layout: Unfolded}},
		{name: "no units", req: Request{}, fields: []string{"units"}},
		{name: "negative spares and unknown layout", req: Request{Units: 1, Spares: -1, Layout: "Half"},
			fields: []string{"spares", "layout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fe := range fieldErrors(t, tc.req.Validate()) {
				got = append(got, fe.Field)
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("Validate() fields = %q, want %q", got, tc.fields)
			}
		})
	}
}
